//! Sapwood's engine: binning, integer histograms, split math, trees, the grower, the model
//! format and the CPU reference backend.
//!
//! Gradients are quantised to integers with a globally agreed scale, so every histogram sum
//! is exact in any order: any backend and any number of workers produce the same model.
//!
//! A histogram's path: [`train`] agrees on cuts and scales and runs the boosting loop;
//! [`grower`] grows each tree from three parts (which nodes expand, the histogram store, the
//! histogram sync between workers); a [`backend`] builds histograms and partitions rows (the
//! CPU backend here, GPU backends on the shared [`backend::shard`] core); [`split`] finds
//! splits with pure functions every backend shares. [`params`] keeps what defines a model
//! ([`params::Params`]) apart from how a job runs ([`params::RunOptions`]); the public crate
//! `sapwood` validates both before they reach this crate.
#![deny(missing_docs)]

pub mod backend;
pub mod collective;
pub mod data;
pub mod detmath;
pub mod error;
pub mod explain;
pub mod export;
pub mod files;
pub mod floats;
pub mod grower;
pub mod hash;
pub mod hist;
pub mod huge_pages;
pub mod link;
pub mod metric;
pub mod model;
pub mod objective;
pub mod occupancy;
pub mod params;
pub mod predict;
pub mod quantise;
pub mod rank;
pub mod simd;
pub mod split;
pub mod survival;
#[cfg(test)]
mod test_rng;
pub mod train;
pub mod tree;
pub mod warm_pool;
pub mod wire;

pub use error::{Error, Result};
