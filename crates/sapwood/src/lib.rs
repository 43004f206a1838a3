#![doc = include_str!("../../../README.md")]

mod booster;
mod dataset;
mod labels;
mod stream;

pub use booster::{Booster, Importance, PredictOptions, Predictions};
pub use dataset::{Dataset, DatasetBuilder, Label};
pub use labels::{
    encode as encode_labels, encode_with as encode_labels_with, global_classes,
    Encoded as EncodedLabels,
};
pub use sapwood_collective as collective;
pub use sapwood_core::data::{Column, FeatureMatrix, MISSING_CATEGORY};
pub use sapwood_core::metric::Metric;
pub use sapwood_core::model::{ClassLabel, Model};
pub use sapwood_core::params::{
    CommCodec, Device, GrowPolicy, ObjectiveKind, Params, Quantisation, PARAM_NAMES,
};
pub use sapwood_core::train::{Control, EvalResult, Quiet, RoundReport, TrainObserver};
pub use sapwood_core::{Error, Result};
pub use stream::{BinPass, BinnedDataset, CutPass};
