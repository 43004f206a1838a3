//! Prediction over binned rows with trees flattened for speed: 16 bytes a node instead of
//! the training tree's ~80, leaf values apart, and the bin storage's width resolved once,
//! so a row's walk down a tree touches few cache lines. The walk and the order of the sums
//! are the training tree's, so the margins are the same bits.

use rayon::prelude::*;

use crate::data::binned::{BinnedMatrix, Bins};
use crate::objective::ftz;
use crate::split::SplitRule;
use crate::tree::Tree;

const LEAF: u8 = 1;
const DEFAULT_LEFT: u8 = 2;
const CATEGORICAL: u8 = 4;

/// One node of a flattened tree.
#[derive(Debug, Clone, Copy, Default)]
struct FlatNode {
    left: u32,
    right: u32,
    feature: u32,
    /// the numeric rule's last bin that goes left
    bin: u16,
    flags: u8,
}

/// A tree flattened for prediction; categorical rules stay in the tree it was made from.
struct FlatTree<'t> {
    nodes: Vec<FlatNode>,
    values: Vec<f32>,
    tree: &'t Tree,
}

impl<'t> FlatTree<'t> {
    fn new(tree: &'t Tree) -> Self {
        let mut nodes = Vec::with_capacity(tree.nodes.len());
        let mut values = Vec::with_capacity(tree.nodes.len());
        for n in &tree.nodes {
            values.push(n.value);
            nodes.push(match &n.split {
                None => FlatNode {
                    flags: LEAF,
                    ..FlatNode::default()
                },
                Some(s) => {
                    let (bin, kind) = match &s.rule {
                        SplitRule::Numeric { bin } => (*bin, 0),
                        SplitRule::Categorical { .. } => (0, CATEGORICAL),
                    };
                    FlatNode {
                        left: s.left.0,
                        right: s.right.0,
                        feature: s.feature as u32,
                        bin,
                        flags: kind | if s.default_left { DEFAULT_LEFT } else { 0 },
                    }
                }
            });
        }
        FlatTree {
            nodes,
            values,
            tree,
        }
    }

    /// The value of the leaf a row (its bins) reaches: the training tree's rule, node by
    /// node (bin 0 is missing and takes the default way).
    #[inline]
    fn value<T: Copy + Into<u16>>(&self, row: &[T]) -> f32 {
        let mut i = 0usize;
        loop {
            let n = self.nodes[i];
            if n.flags & LEAF != 0 {
                return self.values[i];
            }
            let b: u16 = row[n.feature as usize].into();
            let left = if b == 0 {
                n.flags & DEFAULT_LEFT != 0
            } else if n.flags & CATEGORICAL != 0 {
                let s = self.tree.nodes[i].split.as_ref().expect("an internal node");
                s.rule.goes_left(b, s.default_left)
            } else {
                b <= n.bin
            };
            i = if left { n.left } else { n.right } as usize;
        }
    }
}

/// Rows per block: a block walks one tree at a time, so the tree stays in cache.
const BLOCK: usize = 64;

fn add_trees<T: Copy + Into<u16> + Sync>(
    bins: &[T],
    nf: usize,
    trees: &[FlatTree<'_>],
    k: usize,
    out: &mut [f32],
) {
    out.par_chunks_mut(k * BLOCK)
        .enumerate()
        .for_each(|(block, m)| {
            let first = block * BLOCK;
            let rows = m.len() / k;
            for (t, tree) in trees.iter().enumerate() {
                let g = t % k;
                for r in 0..rows {
                    let row = &bins[(first + r) * nf..(first + r + 1) * nf];
                    m[r * k + g] = ftz(m[r * k + g] + tree.value(row));
                }
            }
        });
}

/// Adds `trees` (round-major, `k` per round) to `out` (`k` margins per row of `binned`),
/// each row's trees in order.
pub fn add_to_margins(binned: &BinnedMatrix, trees: &[Tree], k: usize, out: &mut [f32]) {
    let flat: Vec<FlatTree<'_>> = trees.iter().map(FlatTree::new).collect();
    let nf = binned.n_features();
    match binned.bins() {
        Bins::U8(b) => add_trees(b, nf, &flat, k, out),
        Bins::U16(b) => add_trees(b, nf, &flat, k, out),
    }
}
