//! Building a worker's backend from its shard.

use std::sync::Arc;

use super::HistBackend;
use crate::data::binned::BinnedMatrix;
use crate::error::{Error, Result};
use crate::objective::{ftz, Objective};

/// Everything a backend is built from.
pub struct ShardData {
    /// Binned rows of the shard.
    pub binned: Arc<BinnedMatrix>,
    /// Histogram offsets of the features (from the cuts).
    pub offsets: Vec<u32>,
    /// Labels.
    pub labels: Vec<f32>,
    /// Weights.
    pub weights: Option<Vec<f32>>,
    /// The loss.
    pub objective: Objective,
    /// Initial margins, one per group.
    pub base_margin: Vec<f32>,
    /// Per-row initial margins (`groups` per row, row-major) replacing `base_margin` for
    /// every row: a base margin given with the data (XGBoost's `base_margin`).
    pub initial_margins: Option<Vec<f32>>,
    /// Global index of the first row.
    pub row_offset: u64,
}

impl ShardData {
    /// Every row's starting margins, `groups` per row: the per-row ones when given, else
    /// each group's base margin. Subnormals are flushed to zero, as every margin update
    /// does, so the GPU kernels (which flush them) start from the same bits as the CPU.
    pub fn starting_margins(&self) -> Result<Vec<f32>> {
        let (n, k) = (self.binned.n_rows(), self.base_margin.len());
        match &self.initial_margins {
            Some(m) if m.len() != n * k => Err(Error::LengthMismatch {
                column: "base margin".into(),
                got: m.len(),
                expected: n * k,
            }),
            Some(m) => Ok(m.iter().map(|&v| ftz(v)).collect()),
            None => Ok((0..n)
                .flat_map(|_| self.base_margin.iter().copied())
                .collect()),
        }
    }
}

/// Creates the histogram backend of one worker.
pub trait BackendFactory: Send + Sync {
    /// A backend holding `shard`.
    fn create(&self, shard: ShardData) -> Result<Box<dyn HistBackend>>;
}
