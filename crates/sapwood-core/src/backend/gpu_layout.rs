//! The data layouts GPU kernels read (WGSL and CUDA alike): bins packed into u32 words,
//! splits, trees, categorical bin sets, and the tiling of features into shared memory.

use super::shard::Span;
use super::NodeSplit;
use crate::data::binned::{BinnedMatrix, BinsRef, HeldRows, RowMajor};
use crate::split::{BinSet, SplitRule};
use crate::tree::Tree;

/// How rows of bins are laid out in u32 words: each row starts on a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinLayout {
    /// Bits per bin: 8 or 16.
    pub bits: u32,
    /// Words per row.
    pub row_words: usize,
}

impl BinLayout {
    /// The layout of `binned`.
    pub fn of(binned: &BinnedMatrix) -> Self {
        let nf = binned.n_features();
        let bits = match binned.bins() {
            BinsRef::U8(_) => 8,
            BinsRef::U16(_) => 16,
            BinsRef::Sparse(s) if s.wide() => 16,
            BinsRef::Sparse(_) => 8,
        };
        let per_word = (32 / bits) as usize;
        BinLayout {
            bits,
            row_words: nf.div_ceil(per_word),
        }
    }

    /// Rows `lo..hi` of `binned`, packed little-end first within each word.
    pub fn pack(&self, binned: &BinnedMatrix, lo: usize, hi: usize) -> Vec<u32> {
        let nf = binned.n_features();
        let mut out = vec![0u32; (hi - lo) * self.row_words];
        let per_word = (32 / self.bits) as usize;
        let rows = out.chunks_exact_mut(self.row_words.max(1));
        // bins held by column are made row-major a piece at a time (the device holds them so)
        let piece = binned.slice_rows(lo..hi);
        let mut held = HeldRows::default();
        match piece.bins().row_major(&mut held) {
            RowMajor::U8(b) => {
                for (r, words) in (0..hi - lo).zip(rows) {
                    for (f, &v) in b[r * nf..(r + 1) * nf].iter().enumerate() {
                        words[f / per_word] |= (v as u32) << ((f % per_word) * 8);
                    }
                }
            }
            RowMajor::U16(b) => {
                for (r, words) in (0..hi - lo).zip(rows) {
                    for (f, &v) in b[r * nf..(r + 1) * nf].iter().enumerate() {
                        words[f / per_word] |= (v as u32) << ((f % per_word) * 16);
                    }
                }
            }
        }
        out
    }
}

/// Appends a bin set's words to `cats`; returns (offset, length) in words.
fn push_set(set: &BinSet, cats: &mut Vec<u32>) -> (u32, u32) {
    let off = cats.len();
    for b in set.iter() {
        let w = off + b as usize / 32;
        if cats.len() <= w {
            cats.resize(w + 1, 0);
        }
        cats[w] |= 1 << (b % 32);
    }
    (off as u32, (cats.len() - off) as u32)
}

/// (kind, bin, cat_off, cat_len) of a rule: kind 0 numeric, 1 categorical.
pub fn rule_words(rule: &SplitRule, cats: &mut Vec<u32>) -> [u32; 4] {
    match rule {
        SplitRule::Numeric { bin } => [0, *bin as u32, 0, 0],
        SplitRule::Categorical { left } => {
            let (off, len) = push_set(left, cats);
            [1, 0, off, len]
        }
    }
}

/// A batch of splits as the partition kernel reads it: 8 words per split (start, len,
/// feature, then the rule's kind, default_left, bin, set offset, set length), and the words
/// of the categorical bin sets.
pub fn encode_splits(splits: &[NodeSplit], spans: &[Span]) -> (Vec<u32>, Vec<u32>) {
    let mut cats = Vec::new();
    let mut words = Vec::with_capacity(splits.len() * 8);
    for (s, span) in splits.iter().zip(spans) {
        let [kind, bin, off, len] = rule_words(&s.rule, &mut cats);
        words.extend_from_slice(&[
            span.start,
            span.len,
            s.feature as u32,
            kind,
            s.default_left as u32,
            bin,
            off,
            len,
        ]);
    }
    (words, cats)
}

/// A tree as the prediction kernels read it: 8 words per node, the values, the categorical sets.
pub fn encode_tree(tree: &Tree) -> (Vec<u32>, Vec<f32>, Vec<u32>) {
    let mut words = Vec::with_capacity(tree.nodes.len() * 8);
    let mut cats = Vec::new();
    for node in &tree.nodes {
        match &node.split {
            None => words.extend_from_slice(&[0, 2, 0, 0, 0, 0, 0, 0]),
            Some(s) => {
                let [kind, bin, off, len] = rule_words(&s.rule, &mut cats);
                words.extend_from_slice(&[
                    s.feature as u32,
                    kind,
                    s.default_left as u32,
                    s.left.0,
                    s.right.0,
                    bin,
                    off,
                    len,
                ]);
            }
        }
    }
    let values = tree.nodes.iter().map(|n| n.value).collect();
    (words, values, cats)
}

// ---- feature tiles: runs of consecutive features whose bins fit one block's shared
// histogram; a feature wider than a tile gets a tile of its own in global memory

/// Bytes of shared (workgroup) memory per histogram bin: (Σg, Σh) as two 64-bit integers.
pub const BYTES_PER_BIN: u32 = 16;

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

/// The tiling of a shard's features for a block (workgroup) that holds `capacity` bins.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Node, NodeId, Split};

    #[test]
    fn packed_bins_read_back_as_the_kernels_read_them() {
        for wide in [false, true] {
            let (n, nf) = (7usize, 5usize);
            let vals: Vec<u16> = (0..n * nf).map(|i| (i * 37 % 251) as u16).collect();
            let bins = if wide {
                crate::data::Bins::U16(vals.iter().map(|&v| v * 200).collect())
            } else {
                crate::data::Bins::U8(vals.iter().map(|&v| v as u8).collect())
            };
            let m = BinnedMatrix::from_bins(n, nf, bins).unwrap();
            let l = BinLayout::of(&m);
            let words = l.pack(&m, 2, 6);
            let per_word = (32 / l.bits) as usize;
            for r in 2..6 {
                for f in 0..nf {
                    // bin_of in bins.wgsl
                    let w = words[(r - 2) * l.row_words + f / per_word];
                    let b = (w >> ((f % per_word) as u32 * l.bits)) & ((1 << l.bits) - 1);
                    assert_eq!(b as u16, m.bin(r, f));
                }
            }
        }
    }

    /// goes_left in route.cuh and route.wgsl, on the host.
    fn goes_left(cats: &[u32], bin: u32, w: &[u32]) -> bool {
        let (kind, default_left, split_bin, off, len) = (w[0], w[1], w[2], w[3], w[4]);
        if bin == 0 {
            return default_left != 0;
        }
        if kind == 0 {
            return bin <= split_bin;
        }
        let word = bin >> 5;
        word < len && (cats[(off + word) as usize] >> (bin & 31)) & 1 != 0
    }

    #[test]
    fn encoded_rules_route_as_the_core_does() {
        let rules = [
            SplitRule::Numeric { bin: 5 },
            SplitRule::Categorical {
                left: BinSet::from_bins([1u16, 33, 70, 255]),
            },
        ];
        for rule in &rules {
            for default_left in [false, true] {
                let mut cats = vec![0xdead_beef];
                let [kind, bin, off, len] = rule_words(rule, &mut cats);
                for b in 0..300u16 {
                    let w = [kind, default_left as u32, bin, off, len];
                    assert_eq!(
                        goes_left(&cats, b as u32, &w),
                        rule.goes_left(b, default_left),
                        "{rule:?} bin {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn trees_encode_eight_words_per_node() {
        let leaf = |v: f32| Node {
            split: None,
            value: v,
            cover: 1.0,
        };
        let tree = Tree {
            nodes: vec![
                Node {
                    split: Some(Split {
                        feature: 2,
                        rule: SplitRule::Categorical {
                            left: BinSet::from_bins([3u16]),
                        },
                        default_left: true,
                        left: NodeId(1),
                        right: NodeId(2),
                        gain: 1.0,
                    }),
                    value: 0.0,
                    cover: 2.0,
                },
                leaf(0.5),
                leaf(-0.25),
            ],
        };
        let (words, values, cats) = encode_tree(&tree);
        assert_eq!(&words[..8], &[2, 1, 1, 1, 2, 0, 0, 1]);
        assert_eq!(words[9], 2);
        assert_eq!(values, vec![0.0, 0.5, -0.25]);
        assert_eq!(cats, vec![1 << 3]);
    }

    #[test]
    fn bin_sets_become_bit_words() {
        let mut cats = vec![7];
        let rule = SplitRule::Categorical {
            left: BinSet::from_bins([1u16, 33, 70]),
        };
        let [kind, _, off, len] = rule_words(&rule, &mut cats);
        assert_eq!((kind, off, len), (1, 1, 3));
        assert_eq!(&cats[1..], &[1 << 1, 1 << 1, 1 << 6]);
    }
}

#[cfg(test)]
mod tile_tests {
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
    fn no_features_gives_no_tiles() {
        let plan = plan_tiles(&[0], 100);
        assert!(plan.shared.is_empty() && plan.global.is_empty());
        assert_eq!(plan.shared_bytes, BYTES_PER_BIN);
    }
}
