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
            rows_of_groups(objective, m, &labels[lo..lo + rows], w, chunk, &mut max);
            max
        })
        .reduce(|| vec![[0.0f32; 2]; k], larger_of)
}

/// Writes the (g, h) of rows of several groups (`margins`, `groups` a row, with their
/// labels and weights) into `out` and raises `max` (each group's largest |g| and h) to
/// theirs: a softmax's rows together, any other loss's row by row.
pub fn rows_of_groups(
    objective: &Objective,
    margins: &[f32],
    labels: &[f32],
    weights: Option<&[f32]>,
    out: &mut [[f32; 2]],
    max: &mut [[f32; 2]],
) {
    if objective.softmax_rows(margins, labels, weights, out, max) {
        return;
    }
    let k = objective.groups();
    let (mut g, mut h) = (vec![0.0f32; k], vec![0.0f32; k]);
    for (j, row) in out.chunks_exact_mut(k).enumerate() {
        let w = weights.map_or(1.0, |w| w[j]);
        objective.gradient(&margins[j * k..(j + 1) * k], labels[j], w, &mut g, &mut h);
        for c in 0..k {
            row[c] = [g[c], h[c]];
            max[c][0] = max[c][0].max(g[c].abs());
            max[c][1] = max[c][1].max(h[c]);
        }
    }
}

/// Each group's larger |g| and h of two tasks' maxima.
pub fn larger_of(a: Vec<[f32; 2]>, b: Vec<[f32; 2]>) -> Vec<[f32; 2]> {
    a.iter()
        .zip(&b)
        .map(|(x, y)| [x[0].max(y[0]), x[1].max(y[1])])
        .collect()
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

/// Every row's [`crate::quantise::square_term`] of the gradients of the tree's group (`grad`,
/// one (g, h) pair a row) with `factor` = 2^shift, for [`square_sum`]: at most 2^30, so 4
/// bytes a row.
pub fn square_terms(grad: &[[f32; 2]], factor: f64) -> Vec<u32> {
    let mut terms = vec![0u32; grad.len()];
    terms
        .par_chunks_mut(ROWS_PER_TASK)
        .zip(grad.par_chunks(ROWS_PER_TASK))
        .for_each(|(t, g)| crate::quantise::square_terms_into(g, factor, t));
    terms
}

/// Σ of `terms` ([`square_terms`]) over `rows`: one node's sum of squares on the CPU (the
/// GPU backends' `square_sums` kernel computes the same integers on the device).
pub fn square_sum(rows: &[u32], terms: &[u32]) -> i64 {
    let sum = |rows: &[u32]| rows.iter().map(|&r| terms[r as usize] as u64).sum::<u64>();
    if rows.len() <= ROWS_PER_TASK {
        return sum(rows) as i64;
    }
    rows.par_chunks(ROWS_PER_TASK).map(sum).sum::<u64>() as i64
}
