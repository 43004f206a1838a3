//! The GPU kernels every device backend implements (one file per kernel in each shader
//! language, named by [`Kernel::stem`]), the helpers each one includes, and the scalars each
//! is launched with, computed once from the shard and the tree so that every backend passes
//! the same values, whatever its parameter-block layout.

use super::ShardShape;
use crate::backend::TreeSetup;
use crate::hash::{HashKey, Stream};
use crate::objective::{exp_table, sigmoid_table, Objective, ObjectiveKind};

/// A compute kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Gradients and hessians from margins, with per-group maxima.
    Gradients,
    /// Fixed-point (and low-bit) histogram values.
    Quantise,
    /// In-bag rows of a tree.
    SampleRows,
    /// Histograms in shared memory, one feature tile per block row.
    HistShared,
    /// Histograms in global memory for features wider than a tile.
    HistGlobal,
    /// Row partition of a batch of splits.
    Partition,
    /// Exact (Σg, Σh) per node.
    LeafSums,
    /// Σ of the rows' squared gradients per node, at the squares' shift.
    SquareSums,
    /// Adds a tree's leaf values to the margins.
    Predict,
}

/// The histogram encoders: kernels of the GPU backends alone (the CPU backend encodes on
/// the host), each composed with the common and codec helpers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodecKernel {
    /// Packed lanes of whole messages (`codec::pack`).
    Pack,
    /// The group encoding of whole messages, in two passes (sizes, then bytes).
    Groups,
}

impl CodecKernel {
    /// Every encoder, in the order they are compiled and loaded.
    pub const ALL: [CodecKernel; 2] = [CodecKernel::Pack, CodecKernel::Groups];

    /// The file stem in every shader language (and the CUDA entry point).
    pub fn stem(self) -> &'static str {
        match self {
            CodecKernel::Pack => "pack",
            CodecKernel::Groups => "groups",
        }
    }
}

/// A helper file kernels include, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Helper {
    /// Integer and bit helpers, 64-bit pair arithmetic, hashing.
    Common,
    /// The parameter blocks.
    Params,
    /// Reading a row's bin of a feature.
    Bins,
    /// Routing a bin through a split.
    Route,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 9] = [
        Kernel::Gradients,
        Kernel::Quantise,
        Kernel::SampleRows,
        Kernel::HistShared,
        Kernel::HistGlobal,
        Kernel::Partition,
        Kernel::LeafSums,
        Kernel::SquareSums,
        Kernel::Predict,
    ];

    /// The file stem in every shader language (and the CUDA entry point).
    pub fn stem(self) -> &'static str {
        match self {
            Kernel::Gradients => "gradients",
            Kernel::Quantise => "quantise",
            Kernel::SampleRows => "sample_rows",
            Kernel::HistShared => "hist_shared",
            Kernel::HistGlobal => "hist_global",
            Kernel::Partition => "partition",
            Kernel::LeafSums => "leaf_sums",
            Kernel::SquareSums => "square_sums",
            Kernel::Predict => "predict",
        }
    }

    /// The helpers the kernel includes, in order.
    pub fn helpers(self) -> &'static [Helper] {
        use Helper::*;
        match self {
            Kernel::HistShared | Kernel::HistGlobal => &[Common, Params, Bins],
            Kernel::Partition | Kernel::Predict => &[Common, Params, Bins, Route],
            Kernel::LeafSums => &[Common],
            _ => &[Common, Params],
        }
    }
}

/// The objective's code in the gradient kernels; `None` for a loss whose gradients GPU
/// backends take from the host ([`Objective::has_kernel`]).
pub fn objective_code(kind: ObjectiveKind) -> Option<u32> {
    Some(match kind {
        ObjectiveKind::SquaredError => 0,
        ObjectiveKind::Logistic | ObjectiveKind::LogitRaw => 1,
        ObjectiveKind::Softprob | ObjectiveKind::Softmax => 2,
        ObjectiveKind::AbsoluteError => 3,
        ObjectiveKind::QuantileError => 4,
        ObjectiveKind::Huber => 5,
        ObjectiveKind::Poisson => 6,
        ObjectiveKind::Gamma => 7,
        ObjectiveKind::Tweedie => 8,
        ObjectiveKind::PseudoHuber
        | ObjectiveKind::Cox
        | ObjectiveKind::Custom
        | ObjectiveKind::RankNdcg
        | ObjectiveKind::RankMap
        | ObjectiveKind::RankPairwise => return None,
    })
}

/// Scalars of the gradient kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GradScalars {
    /// Rows.
    pub n: u32,
    /// Groups.
    pub k: u32,
    /// [`objective_code`].
    pub kind: u32,
    /// 1 when rows carry weights.
    pub has_weights: u32,
    /// Entries of the logistic table.
    pub sigmoid_len: u32,
    /// Entries of the exponential table (the base-2 table follows it in the same buffer).
    pub exp_len: u32,
    /// The loss's first constant, as f32 bits ([`Objective::constant_bits`]).
    pub c0: u32,
    /// Its second constant.
    pub c1: u32,
}

impl GradScalars {
    /// The gradient kernel's scalars for a shard.
    pub fn of(shape: &ShardShape, objective: &Objective, has_weights: bool) -> Self {
        GradScalars {
            n: shape.n as u32,
            k: shape.k as u32,
            // a host-computed loss never launches the kernel; any code will do
            kind: objective_code(objective.kind()).unwrap_or(u32::MAX),
            has_weights: has_weights as u32,
            sigmoid_len: sigmoid_table().len() as u32,
            exp_len: exp_table().len() as u32,
            c0: objective.constant_bits()[0],
            c1: objective.constant_bits()[1],
        }
    }
}

/// Scalars of the quantisation kernel for one tree (and of the square sums, with the
/// squares' shift as `g_shift`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QuantScalars {
    /// Rows.
    pub n: u32,
    /// Groups.
    pub k: u32,
    /// The tree's group.
    pub group: u32,
    /// 1 in low-bit mode (an exact copy is kept for leaf refits).
    pub lowbit: u32,
    /// Fixed-point shift of gradients.
    pub g_shift: i32,
    /// Fixed-point shift of hessians.
    pub h_shift: i32,
    /// Low bits dropped from gradients (low-bit mode).
    pub g_drop: u32,
    /// Low bits dropped from hessians (low-bit mode).
    pub h_drop: u32,
    /// Key of the gradients' rounding noise.
    pub g_key: u32,
    /// Key of the hessians' rounding noise.
    pub h_key: u32,
    /// Global index of the shard's first row.
    pub row_offset: u64,
}

impl QuantScalars {
    /// The quantisation kernel's scalars for tree `s`.
    pub fn of(shape: &ShardShape, s: &TreeSetup, row_offset: u64) -> Self {
        QuantScalars {
            n: shape.n as u32,
            k: shape.k as u32,
            group: s.group as u32,
            lowbit: s.scales.grad.drop.is_some() as u32,
            g_shift: s.scales.grad.shift,
            h_shift: s.scales.hess.shift,
            g_drop: s.scales.grad.drop.unwrap_or(0),
            h_drop: s.scales.hess.drop.unwrap_or(0),
            g_key: HashKey::new(s.seed, Stream::GradNoise, s.tree_index).0,
            h_key: HashKey::new(s.seed, Stream::HessNoise, s.tree_index).0,
            row_offset,
        }
    }
}

/// Scalars of the row-sampling kernel for one tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleScalars {
    /// Rows.
    pub n: u32,
    /// Key of the sampling hash.
    pub key: u32,
    /// A row is kept when its hash is below this.
    pub threshold: u32,
    /// 1 when every row is kept (no hashing).
    pub keep_all: u32,
    /// Global index of the shard's first row.
    pub row_offset: u64,
}

impl SampleScalars {
    /// The sampling kernel's scalars for tree `s`.
    pub fn of(shape: &ShardShape, s: &TreeSetup, row_offset: u64) -> Self {
        SampleScalars {
            n: shape.n as u32,
            key: HashKey::new(s.seed, Stream::RowSample, s.tree_index).0,
            threshold: s.row_sample.threshold().min(u32::MAX as u64) as u32,
            keep_all: s.row_sample.keeps_all() as u32,
            row_offset,
        }
    }
}

/// The gradient kernel's per-group maxima, read back as (|g|, h) f32 bit patterns.
pub fn maxima_from_bits(words: &[u32]) -> Vec<[f32; 2]> {
    words
        .chunks_exact(2)
        .map(|m| [f32::from_bits(m[0]), f32::from_bits(m[1])])
        .collect()
}
