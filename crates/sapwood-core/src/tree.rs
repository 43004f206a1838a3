//! Decision trees: nodes addressed by [`NodeId`], routed by bins.

use rayon::prelude::*;

use crate::data::binned::{BinnedMatrix, BinsRef};
use crate::split::SplitRule;

/// Index of a node within its tree; the root is 0 and children come after parents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The root.
    pub const ROOT: NodeId = NodeId(0);

    /// As an index into node arrays.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A split: feature, rule, default direction and children.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Feature index.
    pub feature: usize,
    /// How bins of the feature route rows.
    pub rule: SplitRule,
    /// Whether missing (and unseen) values go left.
    pub default_left: bool,
    /// Left child.
    pub left: NodeId,
    /// Right child.
    pub right: NodeId,
    /// Loss reduction of the split (for importance).
    pub gain: f64,
}

/// A node: a split, or a leaf when `split` is None.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The split of an internal node.
    pub split: Option<Split>,
    /// The value added to the margin (learning rate applied) if this node were a leaf.
    pub value: f32,
    /// Hessian sum of the training rows in the node.
    pub cover: f64,
}

/// One regression tree for one output group.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    /// Nodes; `nodes[0]` is the root.
    pub nodes: Vec<Node>,
}

impl Tree {
    /// A tree that is a single leaf.
    pub fn leaf(value: f32, cover: f64) -> Self {
        Tree {
            nodes: vec![Node {
                split: None,
                value,
                cover,
            }],
        }
    }

    /// The leaf reached by a row, given a function returning the row's bin of a feature.
    #[inline]
    pub fn leaf_by(&self, bin_of: impl Fn(usize) -> u16) -> NodeId {
        let mut id = NodeId::ROOT;
        while let Some(s) = &self.nodes[id.index()].split {
            id = if s.rule.goes_left(bin_of(s.feature), s.default_left) {
                s.left
            } else {
                s.right
            };
        }
        id
    }

    /// The leaf reached by row `row` of a binned matrix.
    #[inline]
    pub fn leaf_of_binned(&self, binned: &BinnedMatrix, row: usize) -> NodeId {
        self.leaf_by(|f| binned.bin(row, f))
    }

    /// The leaf of every row of `binned`, or none where its bins are row-major (a row's
    /// walk, [`Tree::leaf_of_binned`], is then the fast way). Bins held by column route
    /// blocks of rows node by node instead: a node's rows come in order, so each is a step
    /// of a cursor along its split feature's entries, where a row's walk would search the
    /// column at every node.
    pub fn leaves_of_columns(&self, binned: &BinnedMatrix) -> Option<Vec<NodeId>> {
        const ROWS_PER_TASK: usize = 8192;
        let BinsRef::Sparse(bins) = binned.bins() else {
            return None;
        };
        let mut out = vec![NodeId::ROOT; binned.n_rows()];
        out.par_chunks_mut(ROWS_PER_TASK)
            .enumerate()
            .for_each(|(t, out)| {
                let first = (t * ROWS_PER_TASK) as u32;
                let rows: Vec<u32> = (first..first + out.len() as u32).collect();
                let mut open = vec![(NodeId::ROOT, rows)];
                while let Some((id, rows)) = open.pop() {
                    match &self.nodes[id.index()].split {
                        None => {
                            for r in rows {
                                out[(r - first) as usize] = id;
                            }
                        }
                        Some(s) => {
                            let mut cursor = bins.column(s.feature).cursor();
                            let (left, right): (Vec<u32>, Vec<u32>) =
                                rows.into_iter().partition(|&r| {
                                    s.rule.goes_left(cursor.bin(r as usize), s.default_left)
                                });
                            open.push((s.left, left));
                            open.push((s.right, right));
                        }
                    }
                }
            });
        Some(out)
    }

    /// The value of node `id`.
    #[inline]
    pub fn value(&self, id: NodeId) -> f32 {
        self.nodes[id.index()].value
    }

    /// Leaves in the tree.
    pub fn num_leaves(&self) -> usize {
        self.nodes.iter().filter(|n| n.split.is_none()).count()
    }

    /// Depth of the deepest leaf (a lone root has depth 0).
    pub fn depth(&self) -> usize {
        let mut depth = vec![0usize; self.nodes.len()];
        let mut max = 0;
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(s) = &n.split {
                let child_depth = depth[i] + 1;
                for c in [s.left, s.right] {
                    if let Some(d) = depth.get_mut(c.index()) {
                        *d = child_depth;
                        max = max.max(child_depth);
                    }
                }
            }
        }
        max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Bins, SparseBins};
    use crate::test_rng::lcg;

    /// A complete tree of depth 4 over `nf` features, splits at varied bins and missing
    /// directions.
    fn tree(nf: usize) -> Tree {
        let mut nodes = Vec::new();
        for i in 0..31u32 {
            let split = (i < 15).then(|| Split {
                feature: (i as usize * 7) % nf,
                rule: SplitRule::Numeric {
                    bin: (i % 5) as u16,
                },
                default_left: i % 3 == 0,
                left: NodeId(2 * i + 1),
                right: NodeId(2 * i + 2),
                gain: 1.0,
            });
            nodes.push(Node {
                split,
                value: i as f32,
                cover: 1.0,
            });
        }
        Tree { nodes }
    }

    #[test]
    fn rows_routed_node_by_node_reach_the_leaves_of_their_walks() {
        let (n, nf) = (20_000, 6);
        let mut next = lcg(5);
        let columns = (0..nf)
            .map(|_| {
                let (mut rows, mut bins) = (Vec::new(), Vec::new());
                for r in 0..n as u32 {
                    let u = next() >> 40;
                    if u.is_multiple_of(9) {
                        rows.push(r);
                        bins.push((u / 9 % 6) as u16);
                    }
                }
                (rows, bins)
            })
            .collect();
        let sparse = SparseBins::from_columns(n, false, columns, vec![0, 1, 0, 2, 0, 0]).unwrap();
        let m = BinnedMatrix::from_bins(n, nf, Bins::Sparse(sparse)).unwrap();
        let t = tree(nf);
        // three tasks of rows, and a view whose rows start past the storage's first
        for view in [m.clone(), m.slice_rows(1_234..n - 77)] {
            let got = t.leaves_of_columns(&view).expect("bins held by column");
            let want: Vec<NodeId> = (0..view.n_rows())
                .map(|r| t.leaf_of_binned(&view, r))
                .collect();
            assert_eq!(got, want);
            assert!(want.iter().collect::<std::collections::HashSet<_>>().len() > 8);
        }
        let dense = BinnedMatrix::from_bins(2, 1, Bins::U8(vec![0, 1])).unwrap();
        assert!(
            t.leaves_of_columns(&dense).is_none(),
            "row-major bins walk row by row"
        );
    }
}
