//! Building a worker's backend from its shard.

use std::sync::Arc;

use super::{CpuBackend, HistBackend};
use crate::data::binned::BinnedMatrix;
use crate::error::Result;
use crate::objective::Objective;

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
    /// Global index of the first row.
    pub row_offset: u64,
}

/// Creates the histogram backend of one worker.
pub trait BackendFactory: Send + Sync {
    /// A backend holding `shard`.
    fn create(&self, shard: ShardData) -> Result<Box<dyn HistBackend>>;
}

/// Builds CPU backends.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuFactory;

impl BackendFactory for CpuFactory {
    fn create(&self, s: ShardData) -> Result<Box<dyn HistBackend>> {
        Ok(Box::new(CpuBackend::new(s)?))
    }
}
