#![doc = include_str!("../../../README.md")]

mod booster;
mod dataset;
mod labels;

pub use booster::{Booster, Importance, PredictOptions, Predictions};
pub use dataset::{Dataset, DatasetBuilder, Label};
pub use sapwood_core::data::{Column, FeatureMatrix, MISSING_CATEGORY};
pub use sapwood_core::metric::Metric;
pub use sapwood_core::model::{ClassLabel, Model};
pub use sapwood_core::params::{GrowPolicy, ObjectiveKind, Params, Quantisation};
pub use sapwood_core::train::{Control, EvalResult, Quiet, RoundReport, TrainObserver};
pub use sapwood_core::{Error, Result};

/// Where training runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Device {
    /// The CPU backend (rayon threads).
    #[default]
    Cpu,
}
