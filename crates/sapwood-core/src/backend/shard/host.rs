//! Gradients computed on the host: the CPU backend's, and a GPU backend's for a loss without
//! a kernel ([`Objective::has_kernel`]), which reads its margins back and uploads these.

use rayon::prelude::*;

use crate::objective::Objective;

/// Rows per parallel task.
const ROWS_PER_TASK: usize = 16_384;

/// The labels and weights a GPU backend keeps on the host for host-computed gradients.
#[derive(Debug, Clone)]
pub struct HostRows {
    /// Labels.
    pub labels: Vec<f32>,
    /// Optional weights.
    pub weights: Option<Vec<f32>>,
}

impl HostRows {
    /// The gradients of every row and group (interleaved as the kernels write them) and the
    /// largest |g| and h per group.
    pub fn gradients(
        &self,
        objective: &Objective,
        margins: &[f32],
    ) -> (Vec<[f32; 2]>, Vec<[f32; 2]>) {
        let mut out = vec![[0.0f32; 2]; margins.len()];
        let max = gradients_into(
            objective,
            &self.labels,
            self.weights.as_deref(),
            margins,
            &mut out,
        );
        (out, max)
    }
}

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
    out.par_chunks_mut(ROWS_PER_TASK * k)
        .enumerate()
        .map(|(task, chunk)| {
            let mut max = vec![[0.0f32; 2]; k];
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
