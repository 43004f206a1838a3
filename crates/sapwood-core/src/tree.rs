//! Decision trees: nodes addressed by [`NodeId`], routed by bins.

use crate::data::binned::BinnedMatrix;
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
