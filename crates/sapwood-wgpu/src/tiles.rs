//! Feature tiles: runs of consecutive features whose bins fit one workgroup's shared
//! histogram; a feature too wide for any tile gets a tile of its own in global memory.

/// Consecutive features `features` whose histogram entries are `bins`.
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
    pub(crate) fn words(&self) -> [u32; 4] {
        [
            self.first_feature,
            self.end_feature,
            self.first_bin,
            self.end_bin,
        ]
    }
}

/// Shared-memory tiles of at most `capacity` bins, and global-memory tiles for features wider
/// than that, from the histogram `offsets` (one per feature, plus the end).
pub fn plan_tiles(offsets: &[u32], capacity: u32) -> (Vec<Tile>, Vec<Tile>) {
    let mut shared = Vec::new();
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
        match &mut open {
            // consecutive features only: the kernel walks features first..end
            Some(t) if t.end_feature == f && hi - t.first_bin <= capacity => {
                t.end_feature = f + 1;
                t.end_bin = hi;
            }
            _ => {
                if let Some(t) = open.take() {
                    shared.push(t);
                }
                open = Some(one);
            }
        }
    }
    shared.extend(open);
    (shared, global)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_every_feature_once_within_capacity() {
        let widths = [3u32, 5, 2, 9, 1, 4, 4, 12, 1];
        let mut offsets = vec![0u32];
        for w in widths {
            offsets.push(offsets.last().unwrap() + w);
        }
        let (shared, global) = plan_tiles(&offsets, 8);
        let mut seen = vec![0; widths.len()];
        for t in shared.iter().chain(&global) {
            for f in t.first_feature..t.end_feature {
                seen[f as usize] += 1;
            }
            assert_eq!(t.first_bin, offsets[t.first_feature as usize]);
            assert_eq!(t.end_bin, offsets[t.end_feature as usize]);
        }
        assert!(seen.iter().all(|&s| s == 1), "{seen:?}");
        assert!(shared.iter().all(|t| t.end_bin - t.first_bin <= 8));
        assert_eq!(
            global.iter().map(|t| t.first_feature).collect::<Vec<_>>(),
            vec![3, 7]
        );
    }
}
