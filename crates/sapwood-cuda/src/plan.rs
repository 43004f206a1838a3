//! The launch of each CUDA kernel as data: its entry point, its argument list (parameter
//! blocks, scalars and buffers in the order the `.cu` file declares them) and its grid,
//! derived from the shard driver's [`Call`]. The CUDA runtime and the simulator launch the
//! same plan, so the simulator proves the arguments and geometry the GPU is given.

use sapwood_core::backend::device::{BinScalars, Call, Launch, Scalars};
use sapwood_core::backend::gpu_layout::BinLayout;
use sapwood_core::backend::shard::kernels::{CodecKernel, Kernel};

use sapwood_core::backend::device::DeviceLimits;
use sapwood_core::backend::shard::ShardLimits;

use crate::layout::{BinParams, GradParams, QuantParams, SampleParams};
use crate::tiles::{capacity_for, BYTES_PER_BIN, DEFAULT_SHARED_BYTES};

/// Threads per block of every kernel.
pub const BLOCK: u32 = 256;

/// A by-value argument of a kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Param {
    /// gradients.cu's parameter block.
    Grad(GradParams),
    /// quantise.cu's.
    Quant(QuantParams),
    /// sample_rows.cu's.
    Sample(SampleParams),
    /// The block of the kernels that read bins.
    Bins(BinParams),
    /// A u32 scalar.
    U32(u32),
}

/// One argument of a kernel.
pub(crate) enum Arg<'a, B> {
    /// Passed by value.
    Param(Param),
    /// A device pointer to the start of the buffer.
    Buffer(&'a B),
}

/// A launch: the kernel's entry point, its arguments in order, its grid (blocks of
/// [`BLOCK`] threads) and its dynamic shared memory.
pub(crate) struct Plan<'a, B> {
    /// The kernel.
    pub kernel: Launch,
    /// Its arguments.
    pub args: Vec<Arg<'a, B>>,
    /// Blocks along x, y and z.
    pub grid: (u32, u32, u32),
    /// Dynamic shared memory a block.
    pub shared_bytes: u32,
}

impl From<BinScalars> for BinParams {
    /// CUDA binds the whole shard at once (no chunks), so a chunk is always every row.
    fn from(s: BinScalars) -> Self {
        debug_assert_eq!(
            s.chunk_lo, 0,
            "CUDA kernels read bins from the shard's first row"
        );
        let layout = BinLayout {
            bits: s.bin_bits,
            row_words: s.row_words as usize,
        };
        BinParams::new(&layout, s.chunk_hi - s.chunk_lo, s.total_bins, s.k, s.group)
    }
}

/// Largest histogram buffer of one batch by default (bigger batches are split).
const MAX_HIST_BYTES: u64 = 1 << 30;

/// What a CUDA device (or the simulator acting as one) holds and launches; `tile_bins` caps
/// the bins of a shared-memory histogram tile (default: what 48 KiB of shared memory holds).
pub fn limits(tile_bins: Option<u32>) -> DeviceLimits {
    let shared_bytes = match tile_bins {
        Some(b) => b.max(1).saturating_mul(BYTES_PER_BIN),
        None => DEFAULT_SHARED_BYTES,
    };
    DeviceLimits {
        shard: ShardLimits {
            // the kernels keep row positions below 2^31
            max_rows: (u32::MAX / 2) as usize - 1,
            max_groups: usize::MAX,
        },
        binding_bytes: u64::MAX,
        batch_bytes: MAX_HIST_BYTES,
        // the kernels read bins from the shard's first row: one chunk
        chunk_bytes: u64::MAX,
        tile_bins: capacity_for(shared_bytes),
    }
}

/// Blocks for a grid-stride kernel over `items`, `per_thread` items per thread at least, on
/// a device of `sms` multiprocessors.
pub fn blocks(items: usize, per_thread: usize, sms: u32) -> u32 {
    let want = items.div_ceil(BLOCK as usize * per_thread.max(1)).max(1);
    // a few waves of blocks over every SM are enough for a grid-stride loop
    want.min(sms.max(1) as usize * 32) as u32
}

/// The plan of `call` on a device of `sms` multiprocessors.
pub(crate) fn plan<'a, B>(call: &Call<'a, B>, sms: u32) -> Plan<'a, B> {
    let x = match call.kernel {
        Launch::Kernel(Kernel::HistShared | Kernel::HistGlobal) => {
            // enough blocks to fill the GPU, and no more than the rows keep busy
            let by_rows = call.items.div_ceil(BLOCK as usize * 8).max(1);
            let fill = (sms.max(1) as usize * 8
                / (call.y.max(1) as usize * call.z.max(1) as usize))
                .max(1);
            by_rows.min(fill) as u32
        }
        Launch::Kernel(Kernel::LeafSums | Kernel::SquareSums) => blocks(call.items, 8, sms),
        Launch::Codec(_) => blocks(call.items, 1, sms),
        Launch::Kernel(_) => blocks(call.items, 4, sms),
    };
    let mut args: Vec<Arg<'a, B>> = match call.scalars {
        Scalars::Grad(s) => vec![Arg::Param(Param::Grad(s.into()))],
        Scalars::Quant(s) => vec![Arg::Param(Param::Quant(s.into()))],
        Scalars::Sample(s) => vec![Arg::Param(Param::Sample(s.into()))],
        Scalars::Bins(s) | Scalars::Tree { bins: s, .. } => {
            vec![Arg::Param(Param::Bins(s.into()))]
        }
        Scalars::Codec(c) => match call.kernel {
            Launch::Codec(CodecKernel::Groups) => vec![
                Arg::Param(Param::U32(c.values)),
                Arg::Param(Param::U32(c.groups)),
                Arg::Param(Param::U32(c.write)),
            ],
            _ => vec![Arg::Param(Param::U32(c.values))],
        },
        Scalars::None => Vec::new(),
    };
    args.extend(call.buffers.iter().map(|&b| Arg::Buffer(b)));
    if let Scalars::Tree { nodes, .. } = call.scalars {
        // predict.cu takes the node count before the margins
        let at = args.len().saturating_sub(1);
        args.insert(at, Arg::Param(Param::U32(nodes)));
    }
    Plan {
        kernel: call.kernel,
        args,
        grid: (x, call.y, call.z),
        shared_bytes: call.shared_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(
        kernel: Launch,
        scalars: Scalars,
        buffers: &'a [&'a u8],
        items: usize,
    ) -> Call<'a, u8> {
        Call {
            kernel,
            scalars,
            buffers,
            items,
            y: 3,
            z: 2,
            shared_bytes: 0,
        }
    }

    fn shape(p: &Plan<'_, u8>) -> String {
        p.args
            .iter()
            .map(|a| match a {
                Arg::Buffer(b) => format!("b{b}"),
                Arg::Param(Param::U32(v)) => format!("u{v}"),
                Arg::Param(_) => "p".into(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn arguments_follow_the_kernels_declarations() {
        let (a, b, c, d, e) = (1u8, 2u8, 3u8, 4u8, 5u8);
        let five = [&a, &b, &c, &d, &e];
        let three = [&a, &b, &c];
        let four = [&a, &b, &c, &d];
        let bins = BinScalars {
            n_features: 3,
            row_words: 1,
            bin_bits: 8,
            total_bins: 9,
            chunk_lo: 0,
            chunk_hi: 10,
            k: 1,
            group: 0,
        };
        let tree = call(
            Launch::Kernel(Kernel::Predict),
            Scalars::Tree { bins, nodes: 7 },
            &five,
            10,
        );
        assert_eq!(shape(&plan(&tree, 4)), "p b1 b2 b3 b4 u7 b5");
        let codec = sapwood_core::backend::device::CodecScalars {
            values: 64,
            messages: 2,
            groups: 4,
            write: 1,
        };
        let groups = call(
            Launch::Codec(CodecKernel::Groups),
            Scalars::Codec(codec),
            &three,
            128,
        );
        assert_eq!(shape(&plan(&groups, 4)), "u64 u4 u1 b1 b2 b3");
        let pack = call(
            Launch::Codec(CodecKernel::Pack),
            Scalars::Codec(codec),
            &three,
            128,
        );
        assert_eq!(shape(&plan(&pack, 4)), "u64 b1 b2 b3");
        let sums = call(Launch::Kernel(Kernel::LeafSums), Scalars::None, &four, 5000);
        let p = plan(&sums, 4);
        assert_eq!(shape(&p), "b1 b2 b3 b4");
        assert_eq!(p.grid, (3, 3, 2));
        // square_sums takes quantise's block before its buffers, on leaf_sums' grid
        let quant = Scalars::Quant(Default::default());
        let squares = call(Launch::Kernel(Kernel::SquareSums), quant, &four, 5000);
        let p = plan(&squares, 4);
        assert_eq!(shape(&p), "p b1 b2 b3 b4");
        assert_eq!(p.grid, (3, 3, 2));
    }

    #[test]
    fn grids_stride_and_fill_the_device() {
        assert_eq!(blocks(0, 4, 2), 1);
        assert_eq!(blocks(1024, 4, 2), 1);
        assert_eq!(blocks(1025, 4, 2), 2);
        // at most 32 blocks an SM
        assert_eq!(blocks(1 << 30, 1, 2), 64);
        let (a, b) = (1u8, 2u8);
        let two = [&a, &b];
        let bins = Scalars::Bins(BinScalars {
            n_features: 1,
            row_words: 1,
            bin_bits: 8,
            total_bins: 2,
            chunk_lo: 0,
            chunk_hi: 1 << 20,
            k: 1,
            group: 0,
        });
        // 3 tiles x 2 nodes on 4 SMs: 32 / 6 = 5 blocks fill it, though the rows want 512
        let hist = call(Launch::Kernel(Kernel::HistShared), bins, &two, 1 << 20);
        assert_eq!(plan(&hist, 4).grid, (5, 3, 2));
    }
}
