//! Random trees and splits, to drive a backend's partition and margin updates without the
//! grower.

use sapwood_core::backend::NodeSplit;
use sapwood_core::split::{BinSet, SplitRule};
use sapwood_core::tree::{Node, NodeId, Split, Tree};

use crate::rng::Rng;

/// Leaf values that are hard to add exactly: fractions, large, subnormal, negative zero.
pub const ODD_VALUES: [f32; 12] = [
    0.37, -1.25, 31.0, -45.0, 1e-40, -0.0, 7.5e-3, 19.99, -19.999, 0.5, 2.0, -3.75,
];

/// A leaf node with `value`.
pub fn leaf(value: f32) -> Node {
    Node {
        split: None,
        value,
        cover: 0.0,
    }
}

/// An inner node whose children are `l` and `l + 1`.
pub fn inner(feature: usize, rule: SplitRule, default_left: bool, l: u32, value: f32) -> Node {
    Node {
        split: Some(Split {
            feature,
            rule,
            default_left,
            left: NodeId(l),
            right: NodeId(l + 1),
            gain: 1.0,
        }),
        value,
        cover: 0.0,
    }
}

/// A random split over features of `widths`: feature, numeric or categorical rule, default
/// direction.
pub fn random_rule(rng: &mut Rng, widths: &[u32]) -> (usize, SplitRule, bool) {
    let f = rng.below(widths.len() as u64) as usize;
    let w = widths[f] as u64;
    let r = if rng.below(2) == 0 {
        SplitRule::Numeric {
            bin: 1 + rng.below(w.max(2) - 1) as u16,
        }
    } else {
        SplitRule::Categorical {
            left: BinSet::from_bins((1..w as u16).filter(|_| rng.below(2) == 0)),
        }
    };
    (f, r, rng.below(2) == 0)
}

/// A random depth-2 tree over features of `widths` whose leaves take `values`.
pub fn random_tree(rng: &mut Rng, widths: &[u32], values: [f32; 4]) -> Tree {
    let (f0, r0, d0) = random_rule(rng, widths);
    let (f1, r1, d1) = random_rule(rng, widths);
    let (f2, r2, d2) = random_rule(rng, widths);
    Tree {
        nodes: vec![
            inner(f0, r0, d0, 1, 0.0),
            inner(f1, r1, d1, 3, 0.0),
            inner(f2, r2, d2, 5, 0.0),
            leaf(values[0]),
            leaf(values[1]),
            leaf(values[2]),
            leaf(values[3]),
        ],
    }
}

/// Four leaf values drawn from [`ODD_VALUES`].
pub fn odd_values(rng: &mut Rng) -> [f32; 4] {
    [0, 1, 2, 3].map(|_| ODD_VALUES[rng.below(12) as usize])
}

/// A random split of every node of `open`; children are numbered from `*next` on.
pub fn random_splits(
    rng: &mut Rng,
    open: &[NodeId],
    next: &mut u32,
    widths: &[u32],
) -> Vec<NodeSplit> {
    open.iter()
        .map(|&node| {
            let (feature, rule, default_left) = random_rule(rng, widths);
            let left = NodeId(*next);
            *next += 2;
            NodeSplit {
                node,
                left,
                right: NodeId(left.0 + 1),
                feature,
                rule,
                default_left,
            }
        })
        .collect()
}

/// The tree the splits `applied` grew (node ids below `nodes`), every node a leaf of a
/// random value from [`ODD_VALUES`] unless split.
pub fn tree_of(rng: &mut Rng, applied: &[NodeSplit], nodes: u32) -> Tree {
    let mut nodes: Vec<Node> = (0..nodes)
        .map(|_| leaf(ODD_VALUES[rng.below(12) as usize]))
        .collect();
    for s in applied {
        nodes[s.node.index()].split = Some(Split {
            feature: s.feature,
            rule: s.rule.clone(),
            default_left: s.default_left,
            left: s.left,
            right: s.right,
            gain: 1.0,
        });
    }
    Tree { nodes }
}
