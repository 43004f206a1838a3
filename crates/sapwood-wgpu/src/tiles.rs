//! Feature tiles for workgroups: shared with the CUDA backend, in sapwood-core.

pub use sapwood_core::backend::device::{plan_tiles, Tile};
