//! Gradients computed on the host: the CPU backend's, and those the boosting loop computes
//! for any backend when a loss has no kernel ([`Objective::has_kernel`]) and hands over with
//! [`crate::backend::HistBackend::set_gradients`].

use rayon::prelude::*;

use crate::objective::Objective;

/// Rows per parallel task.
const ROWS_PER_TASK: usize = 16_384;

/// Writes the (g, h) of every row and group of `margins` (`groups` per row) into `out` and
/// returns the largest |g| and h per group (NaN never wins).
pub fn gradients_into(
    objective: &Objective,
    labels: &[f32],
    weights: Option<&[f32]>,
    margins: &[f32],
    out: &mut [[f32; 2]],
) -> Vec<[f32; 2]> {
    let k = objective.groups();
    if objective.has_row_formula() {
        return vec![out
            .par_chunks_mut(ROWS_PER_TASK)
            .zip(margins.par_chunks(ROWS_PER_TASK))
            .zip(labels.par_chunks(ROWS_PER_TASK))
            .enumerate()
            .map(|(task, ((out, m), y))| {
                let lo = task * ROWS_PER_TASK;
                let w = weights.map(|w| &w[lo..lo + y.len()]);
                objective.gradients_of_rows(m, y, w, out)
            })
            .map(|max| max.expect("a loss with a row formula"))
            .reduce(|| [0.0f32; 2], |x, y| [x[0].max(y[0]), x[1].max(y[1])])];
    }
    out.par_chunks_mut(ROWS_PER_TASK * k)
        .enumerate()
        .map(|(task, chunk)| {
            let mut max = vec![[0.0f32; 2]; k];
            let (lo, rows) = (task * ROWS_PER_TASK, chunk.len() / k);
            let m = &margins[lo * k..(lo + rows) * k];
            let w = weights.map(|w| &w[lo..lo + rows]);
            if objective.softmax_rows(m, &labels[lo..lo + rows], w, chunk, &mut max) {
                return max;
            }
            let mut g = vec![0.0f32; k];
            let mut h = vec![0.0f32; k];
            for (j, row) in chunk.chunks_exact_mut(k).enumerate() {
                let i = task * ROWS_PER_TASK + j;
                let w = weights.map_or(1.0, |w| w[i]);
                objective.gradient(&margins[i * k..(i + 1) * k], labels[i], w, &mut g, &mut h);
                for c in 0..k {
                    row[c] = [g[c], h[c]];
                    max[c][0] = max[c][0].max(g[c].abs());
                    max[c][1] = max[c][1].max(h[c]);
                }
            }
            max
        })
        .reduce(
            || vec![[0.0f32; 2]; k],
            |a, b| {
                a.iter()
                    .zip(&b)
                    .map(|(x, y)| [x[0].max(y[0]), x[1].max(y[1])])
                    .collect()
            },
        )
}

/// Checks that host gradients cover every row and group of the shard.
pub fn check_gradients(got: usize, expected: usize) -> crate::error::Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(crate::error::Error::LengthMismatch {
            column: "gradients".into(),
            got,
            expected,
        })
    }
}
