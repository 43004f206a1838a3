#![doc = include_str!("../../../README.md")]
#![deny(missing_docs)]

mod batches;
mod booster;
mod checks;
mod dataset;
mod fit;
mod in_process;
mod job;
mod labels;
mod pool;
mod rank;
mod schema;
mod stream;

pub use batches::{RowBatch, RowSource};
pub use booster::ExportFormat;
pub use booster::{Booster, Importance, Output, PredictOptions, Predictions, RunRecord};
pub use dataset::{Dataset, DatasetBuilder, Label};
pub use job::{Rows, TrainJob, Workers};
pub use labels::{
    encode as encode_labels, encode_with as encode_labels_with, global_classes,
    Encoded as EncodedLabels,
};
pub use sapwood_collective as collective;
pub use sapwood_core::collective::{BlockCounts, Collective, CommStats, SingleWorker};
pub use sapwood_core::data::{BinnedMatrix, Column, FeatureCuts, FeatureMatrix, MISSING_CATEGORY};
pub use sapwood_core::explain;
pub use sapwood_core::export;
pub use sapwood_core::files::{
    check_writable, output_target, remove_stale_temporaries, write_atomic, OutputTarget,
};
pub use sapwood_core::huge_pages;
pub use sapwood_core::metric::{argmax, Metric};
pub use sapwood_core::model::{ClassLabel, InputType, Model};
pub use sapwood_core::objective::ObjectiveKind;
pub use sapwood_core::params::{aliases, canonical_name, param_doc, ParamDoc, PARAM_DOCS};
pub use sapwood_core::params::{
    Check, Checked, CheckedSettings, CollectiveKind, CommCodec, Device, DeviceIndices, GrowPolicy,
    Params, Quantisation, RunOptions, Settings, PARAM_NAMES, RUN_OPTION_NAMES,
};
pub use sapwood_core::rank::Queries;
pub use sapwood_core::simd;
pub use sapwood_core::split::{BinSet, SplitRule};
pub use sapwood_core::train::{
    agree_job, Checkpoint, Control, CustomEval, EvalMargins, EvalResult, JobFacts, Quiet,
    RoundReport, TrainObserver,
};
pub use sapwood_core::tree::{Node, NodeId, Split, Tree};
pub use sapwood_core::{Error, Result};
pub use schema::{check_categorical_levels, check_categorical_types};
pub use stream::{BinPass, BinnedDataset, CutPass};
