//! Sapwood's engine: binning, integer histograms, split math, trees, the grower, the model
//! format and the CPU reference backend.
//!
//! Gradients are quantised to integers with a globally agreed scale, so every histogram sum
//! is exact in any order: any backend and any number of workers produce the same model.

pub mod backend;
pub mod collective;
pub mod data;
pub mod detmath;
pub mod error;
pub mod files;
pub mod grower;
pub mod hash;
pub mod metric;
pub mod model;
pub mod objective;
pub mod params;
pub mod quantise;
pub mod split;
pub mod train;
pub mod tree;

pub use error::{Error, Result};
