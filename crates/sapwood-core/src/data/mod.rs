//! The data path: raw feature columns, quantile cuts, and the binned matrix.

pub mod bin_search;
pub mod binned;
pub mod cuts;
pub mod matrix;
pub(crate) mod radix;
pub mod sparse_bins;

pub use binned::{BinnedMatrix, Binner, Bins, BinsRef, HeldRows, RowMajor};
pub use cuts::{BinLimits, CutSample, Cuts, FeatureCuts};
pub use matrix::{Column, FeatureMatrix, MISSING_CATEGORY};
pub use sparse_bins::{SparseBins, SparseBinsRef};
