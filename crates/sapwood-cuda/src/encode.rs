//! Host-side encodings the kernels read: shared with the WGSL backend, in sapwood-core.

pub(crate) use sapwood_core::backend::device::{encode_tree, rule_words, BinLayout};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sapwood_core::data::{BinnedMatrix, Bins};
    use sapwood_core::split::{BinSet, SplitRule};
    use sapwood_core::tree::Tree;
    use sapwood_core::tree::{Node, NodeId, Split};

    /// bin_of in bins.cuh, on the host.
    pub(crate) fn bin_of(words: &[u32], l: &BinLayout, r: usize, f: usize) -> u16 {
        let per_word = (32 / l.bits) as usize;
        let w = words[r * l.row_words + f / per_word];
        ((w >> ((f % per_word) as u32 * l.bits)) & ((1 << l.bits) - 1)) as u16
    }

    /// goes_left in route.cuh, on the host.
    pub(crate) fn goes_left(cats: &[u32], bin: u32, w: &[u32]) -> bool {
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
    fn packed_bins_read_back_as_the_kernels_read_them() {
        for wide in [false, true] {
            let (n, nf) = (7usize, 5usize);
            let vals: Vec<u16> = (0..n * nf).map(|i| (i * 37 % 251) as u16).collect();
            let bins = if wide {
                Bins::U16(vals.iter().map(|&v| v * 200).collect())
            } else {
                Bins::U8(vals.iter().map(|&v| v as u8).collect())
            };
            let m = BinnedMatrix::from_bins(n, nf, bins).unwrap();
            let l = BinLayout::of(&m);
            let words = l.pack(&m, 0, n);
            for r in 0..n {
                for f in 0..nf {
                    assert_eq!(bin_of(&words, &l, r, f), m.bin(r, f));
                }
            }
        }
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
}
