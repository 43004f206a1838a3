//! One shard driver for every device backend, over a small runtime trait.
//!
//! [`DeviceShard`] implements [`crate::backend::HistBackend`] once: the shard's buffers, the
//! node row spans, batching under the device's limits, every check, the diagnostics
//! read-backs, tree uploads and the host steps of the histogram encoders. A device
//! ([`ShardDevice`]) is what is left: allocation, upload, the launch of a named kernel with
//! its scalars, buffers and work, copies, clears and read-backs — the way cubecl reduces a
//! runtime to create, empty, execute and read. The WGSL backend (wgpu), the CUDA backend
//! (cudarc) and the CUDA simulator implement it, each mapping a [`Call`] to its own launch
//! geometry and parameter layout; so what one of them proves of the driver holds for all.

mod driver;
mod encoders;
mod predict;

pub use driver::DeviceShard;
pub use encoders::{encode_groups, pack_values, Runs};
pub use predict::predict_binned;

use super::shard::kernels::{CodecKernel, GradScalars, Kernel, QuantScalars, SampleScalars};
use super::shard::ShardLimits;
use crate::error::Result;

/// What a device can hold and launch, as the driver plans batches and chunks by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Rows and output groups the device's kernels can address.
    pub shard: ShardLimits,
    /// Largest buffer one kernel may bind (wgpu's storage binding limit; CUDA has none).
    pub binding_bytes: u64,
    /// Largest histogram buffer of one batch of nodes (bigger batches are split).
    pub batch_bytes: u64,
    /// Largest chunk of the binned rows bound at once; kernels that read bins run once a
    /// chunk. A device whose kernels cannot skip rows outside a chunk says `u64::MAX`.
    pub chunk_bytes: u64,
    /// Bins a shared-memory histogram tile holds.
    pub tile_bins: u32,
}

/// A kernel a device runs: the core's list, or a histogram encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Launch {
    /// One of [`Kernel::ALL`].
    Kernel(Kernel),
    /// One of [`CodecKernel::ALL`].
    Codec(CodecKernel),
}

impl Launch {
    /// The file stem (and CUDA entry point).
    pub fn stem(self) -> &'static str {
        match self {
            Launch::Kernel(k) => k.stem(),
            Launch::Codec(c) => c.stem(),
        }
    }
}

/// Scalars of the kernels that read bins, for one chunk of rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinScalars {
    /// Features of a row.
    pub n_features: u32,
    /// u32 words a row of bins takes.
    pub row_words: u32,
    /// Bits a bin: 8 or 16.
    pub bin_bits: u32,
    /// Histogram bins a node.
    pub total_bins: u32,
    /// First row of the chunk bound.
    pub chunk_lo: u32,
    /// End of the chunk's rows.
    pub chunk_hi: u32,
    /// Output groups (margins a row).
    pub k: u32,
    /// The group a tree adds to.
    pub group: u32,
}

/// Scalars of the histogram encoders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CodecScalars {
    /// Values a message.
    pub values: u32,
    /// Messages.
    pub messages: u32,
    /// Groups of 32 values over every message (the group encoder).
    pub groups: u32,
    /// 0: measure each group's size; 1: write the groups at their offsets.
    pub write: u32,
}

/// The scalars a kernel is launched with, before a device lays them out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalars {
    /// gradients.
    Grad(GradScalars),
    /// quantise, square_sums.
    Quant(QuantScalars),
    /// sample_rows.
    Sample(SampleScalars),
    /// hist_shared, hist_global, partition.
    Bins(BinScalars),
    /// predict: the bins and the tree's node count.
    Tree {
        /// The chunk's scalars.
        bins: BinScalars,
        /// Nodes of the tree (bounds a walk through a malformed tree).
        nodes: u32,
    },
    /// pack, groups.
    Codec(CodecScalars),
    /// leaf_sums.
    None,
}

/// One launch: a kernel, its scalars, its buffers in binding order, and its work. `items`
/// is the work along x that the kernel strides over (rows, words or values); `y` and `z`
/// count the blocks along y and z (tiles, nodes, splits, messages). A device chooses the
/// blocks along x itself.
pub struct Call<'a, B> {
    /// The kernel.
    pub kernel: Launch,
    /// Its scalars.
    pub scalars: Scalars,
    /// Its buffers, in the order the kernel declares them.
    pub buffers: &'a [&'a B],
    /// Work along x.
    pub items: usize,
    /// Blocks along y.
    pub y: u32,
    /// Blocks along z.
    pub z: u32,
    /// Dynamic shared memory a block uses (hist_shared's tile), in bytes.
    pub shared_bytes: u32,
}

/// A region of a buffer to read back: (buffer, byte offset, bytes).
pub type Region<'a, B> = (&'a B, usize, usize);

/// A device the shard driver runs on: a logical device (a queue or stream of its own)
/// whose work runs in the order it is given, and whose reads wait for everything before
/// them. Buffers are byte buffers; none is ever empty (a device may round sizes up).
pub trait ShardDevice: Send {
    /// A buffer on the device.
    type Buffer: Send;

    /// What ran, e.g. `"wgpu: <adapter>"` or `"cuda: <GPU>"`.
    fn name(&self) -> String;

    /// The device's limits.
    fn limits(&self) -> DeviceLimits;

    /// A buffer holding `bytes` (`what` names it in errors).
    fn upload(&self, bytes: &[u8], what: &str) -> Result<Self::Buffer>;

    /// A zeroed buffer of at least `bytes` bytes.
    fn zeroed(&self, bytes: usize, what: &str) -> Result<Self::Buffer>;

    /// Overwrites the start of `buffer` with `bytes`, after the work queued before (`what`
    /// names them in errors).
    fn write(&self, buffer: &Self::Buffer, bytes: &[u8], what: &str) -> Result<()>;

    /// Queues a kernel launch.
    fn launch(&self, call: &Call<'_, Self::Buffer>) -> Result<()>;

    /// Queues the copy of `bytes` bytes from `src` at `from` to `dst` at `to`.
    fn copy(
        &self,
        src: &Self::Buffer,
        from: usize,
        dst: &Self::Buffer,
        to: usize,
        bytes: usize,
    ) -> Result<()>;

    /// Queues the copy of the runs `r` (in bytes) from `src` to `dst`; a device with a
    /// strided copy does it in one call.
    fn copy_runs(&self, src: &Self::Buffer, dst: &Self::Buffer, r: Runs) -> Result<()> {
        for (from, to) in r.each() {
            self.copy(src, from.start, dst, to.start, r.run)?;
        }
        Ok(())
    }

    /// Queues the zeroing of the first `bytes` bytes of `buffer`.
    fn clear(&self, buffer: &Self::Buffer, bytes: usize) -> Result<()>;

    /// Runs everything queued and reads each region back.
    fn read(&self, regions: &[Region<'_, Self::Buffer>]) -> Result<Vec<Vec<u8>>>;

    /// Runs everything queued (without reading), surfacing any device error.
    fn flush(&self) -> Result<()> {
        self.read(&[]).map(drop)
    }
}

/// Little-endian u32 words as bytes.
pub fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Little-endian f32 values as bytes.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Bytes as little-endian u32 words (a trailing partial word is dropped).
pub fn bytes_u32(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Bytes as little-endian f32 values.
pub fn bytes_f32(b: &[u8]) -> Vec<f32> {
    bytes_u32(b).into_iter().map(f32::from_bits).collect()
}

/// Bytes as little-endian i64 values.
pub fn bytes_i64(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}
