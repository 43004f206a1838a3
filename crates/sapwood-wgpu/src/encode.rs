//! Host-side encodings the kernels read: shared with the CUDA backend, in sapwood-core.

pub(crate) use sapwood_core::backend::device::{encode_tree, rule_words, BinLayout};
