//! Feature tiles: runs of consecutive features whose bins fit one block's shared-memory
//! histogram (16 bytes per bin: two i64); a feature wider than a tile gets a tile of its own
//! in global memory.

/// Bytes of shared memory per histogram bin: (Σg, Σh) as two 64-bit integers.
pub const BYTES_PER_BIN: u32 = 16;

/// Shared memory a block gets without opting in to more (48 KiB on every architecture).
pub const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;

/// Consecutive features whose histogram entries are consecutive bins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tile {
    /// First feature.
    pub first_feature: u32,
    /// One past the last feature.
    pub end_feature: u32,
    /// First histogram bin.
    pub first_bin: u32,
    /// One past the last histogram bin.
    pub end_bin: u32,
}

impl Tile {
    /// The four words the kernels read.
    pub fn words(&self) -> [u32; 4] {
        [
            self.first_feature,
            self.end_feature,
            self.first_bin,
            self.end_bin,
        ]
    }

    /// Bins in the tile.
    pub fn bins(&self) -> u32 {
        self.end_bin - self.first_bin
    }
}

/// The tiling of a shard's features for a block that can hold `capacity` bins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TilePlan {
    /// Tiles summed in shared memory.
    pub shared: Vec<Tile>,
    /// Features too wide for shared memory, summed in global memory.
    pub global: Vec<Tile>,
    /// Dynamic shared memory each shared-tile block needs (the widest shared tile).
    pub shared_bytes: u32,
}

/// Greedy tiling: consecutive features join the open tile while its bins fit `capacity`.
pub fn plan_tiles(offsets: &[u32], capacity: u32) -> TilePlan {
    let mut shared: Vec<Tile> = Vec::new();
    let mut global = Vec::new();
    let mut open: Option<Tile> = None;
    for f in 0..offsets.len().saturating_sub(1) {
        let (lo, hi) = (offsets[f], offsets[f + 1]);
        let f = f as u32;
        let one = Tile {
            first_feature: f,
            end_feature: f + 1,
            first_bin: lo,
            end_bin: hi,
        };
        if hi - lo > capacity {
            global.push(one);
            continue;
        }
        match open.as_mut() {
            Some(t) if t.end_feature == f && hi - t.first_bin <= capacity => {
                t.end_feature = f + 1;
                t.end_bin = hi;
            }
            _ => {
                shared.extend(open.take());
                open = Some(one);
            }
        }
    }
    shared.extend(open);
    let widest = shared.iter().map(Tile::bins).max().unwrap_or(0);
    TilePlan {
        shared_bytes: widest.max(1) * BYTES_PER_BIN,
        shared,
        global,
    }
}

/// Bins a tile may hold given `shared_bytes` of shared memory per block.
pub fn capacity_for(shared_bytes: u32) -> u32 {
    (shared_bytes / BYTES_PER_BIN).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets_of(widths: &[u32]) -> Vec<u32> {
        let mut offsets = vec![0u32];
        for w in widths {
            offsets.push(offsets.last().unwrap() + w);
        }
        offsets
    }

    #[test]
    fn tiles_cover_every_feature_once_within_capacity() {
        let widths = [3u32, 5, 2, 9, 1, 4, 4, 12, 1];
        let offsets = offsets_of(&widths);
        let plan = plan_tiles(&offsets, 8);
        let mut seen = vec![0; widths.len()];
        for t in plan.shared.iter().chain(&plan.global) {
            for f in t.first_feature..t.end_feature {
                seen[f as usize] += 1;
            }
            assert_eq!(t.first_bin, offsets[t.first_feature as usize]);
            assert_eq!(t.end_bin, offsets[t.end_feature as usize]);
        }
        assert!(seen.iter().all(|&s| s == 1), "{seen:?}");
        assert!(plan.shared.iter().all(|t| t.bins() <= 8));
        let wide: Vec<u32> = plan.global.iter().map(|t| t.first_feature).collect();
        assert_eq!(wide, vec![3, 7]);
        assert_eq!(plan.shared_bytes, 8 * BYTES_PER_BIN);
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

    #[test]
    fn no_features_gives_no_tiles() {
        let plan = plan_tiles(&[0], 100);
        assert!(plan.shared.is_empty() && plan.global.is_empty());
        assert_eq!(plan.shared_bytes, BYTES_PER_BIN);
    }
}
