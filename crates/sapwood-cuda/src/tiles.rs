//! Feature tiles for CUDA blocks: the tiling itself is shared with the WGSL backend, in
//! sapwood-core; this file holds what is particular to CUDA's shared memory.

pub use sapwood_core::backend::gpu_layout::BYTES_PER_BIN;

/// Shared memory a block gets without opting in to more (48 KiB on every architecture).
pub const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;

/// Bins a tile may hold given `shared_bytes` of shared memory per block.
pub fn capacity_for(shared_bytes: u32) -> u32 {
    (shared_bytes / BYTES_PER_BIN).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sapwood_core::backend::gpu_layout::plan_tiles;

    fn offsets_of(widths: &[u32]) -> Vec<u32> {
        let mut offsets = vec![0u32];
        for w in widths {
            offsets.push(offsets.last().unwrap() + w);
        }
        offsets
    }

    #[test]
    fn the_benchmark_shape_fits_the_default_shared_memory_in_three_tiles() {
        // 28 features of 256 bins (the 1M/10M x 28 benchmark) with 48 KiB per block
        let offsets = offsets_of(&[256; 28]);
        let cap = capacity_for(DEFAULT_SHARED_BYTES);
        assert_eq!(cap, 3072);
        let plan = plan_tiles(&offsets, cap);
        assert_eq!(plan.shared.len(), 3);
        assert!(plan.global.is_empty());
        assert!(plan.shared_bytes <= DEFAULT_SHARED_BYTES);
        assert_eq!(plan.shared[0].end_feature, 12);
    }
}
