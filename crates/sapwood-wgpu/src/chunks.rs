//! The binned rows on the device, in chunks that each fit one storage binding: a shard larger
//! than the adapter's binding limit is bound chunk by chunk, and the kernels that read bins
//! skip rows outside the bound chunk.

use sapwood_core::data::BinnedMatrix;

use crate::gpu::Gpu;
use crate::layout::BinParams;
use sapwood_core::backend::gpu_layout::BinLayout;

/// Rows `lo..hi` of the bins.
pub(crate) struct Chunk {
    pub lo: u32,
    pub hi: u32,
    pub bins: wgpu::Buffer,
}

/// The binned rows on a device.
pub(crate) struct DeviceBins {
    pub layout: BinLayout,
    pub n_features: usize,
    pub chunks: Vec<Chunk>,
}

impl DeviceBins {
    /// Uploads `binned` in chunks of at most the device's chunk size.
    pub(crate) fn upload(gpu: &Gpu, binned: &BinnedMatrix) -> Self {
        let layout = BinLayout::of(binned);
        let n = binned.n_rows();
        let row_bytes = (layout.row_words.max(1) * 4) as u64;
        let rows_per_chunk = (gpu.max_chunk_bytes / row_bytes).max(1) as usize;
        let mut chunks = Vec::new();
        let mut lo = 0;
        while lo < n {
            let hi = (lo + rows_per_chunk).min(n);
            let packed = layout.pack(binned, lo, hi);
            chunks.push(Chunk {
                lo: lo as u32,
                hi: hi as u32,
                bins: gpu.storage("bins", bytemuck::cast_slice(&packed)),
            });
            lo = hi;
        }
        DeviceBins {
            layout,
            n_features: binned.n_features(),
            chunks,
        }
    }

    /// The parameters of a kernel reading chunk `c`.
    pub(crate) fn params(&self, c: &Chunk, total_bins: usize, k: usize, group: usize) -> BinParams {
        BinParams {
            n_features: self.n_features as u32,
            row_words: self.layout.row_words as u32,
            bin_bits: self.layout.bits,
            total_bins: total_bins as u32,
            chunk_lo: c.lo,
            chunk_hi: c.hi,
            k: k as u32,
            group: group as u32,
        }
    }
}
