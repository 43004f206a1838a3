//! Prediction over binned or raw rows with trees flattened for speed: 16 bytes a node
//! instead of the training tree's ~80, leaf values apart, and the bin storage's width
//! resolved once.
//!
//! Rows are walked in blocks of `BLOCK`, their bins held feature by feature (transposed
//! from a binned matrix, or binned straight from raw columns), so a row's bin is one add
//! away. A tree of numeric splits only is walked by the whole block, level by level: a
//! leaf continues as itself, so every row takes the walk's levels in steps and each step is
//! a load, a compare and a select for each of the block's rows, with no branch to
//! mispredict and the rows' walks overlapping. Trees at most `MAX_HEAP_DEPTH` deep are laid
//! out as complete binary trees, where the next node is computed (2i + 1 or 2i + 2) rather
//! than loaded. The way a missing bin (0) goes is folded into the compare: a node sending
//! missing values left asks `b <= bin`, one sending them right `b - 1 <= bin - 1` in
//! wrapping u16 arithmetic, which 0 fails. Trees with categorical splits walk level by
//! level too, a categorical node testing the row's bin against a bit set of its own (bin
//! 0's bit is the missing values' way), with no branch either. A walk's top levels (up
//! to `WHOLE_LEVELS`, `WORD_WHOLE_LEVELS` where the bins are 16 bits) are taken by the
//! whole block at once, each node of a level testing
//! every row's bin and keeping the way of the rows at its position: loops the compiler
//! vectorises where a node compares, and one table lookup a row for a level's sets. A
//! deeper tree's top levels (`MAX_HEAP_DEPTH` of them, `SET_TOP_LEVELS` where it has
//! sets) are laid out as a complete tree too, and past them only the rows still walking go
//! on, a level at a time. Where the bins are
//! bytes and the CPU has AVX-512 VBMI, complete trees at most 8 deep walk the whole block at
//! once instead, a row a byte lane (`lanes`; 16-bit lanes with AVX-512 BW where the bins
//! are wider), a deeper tree's top 8 levels so. Without those lanes the walks are also
//! compiled for AVX2 and take that compilation where the CPU has it (`Compiled`). Each
//! row's trees are summed in the same order every way, so the margins are the same bits.

use rayon::prelude::*;

mod lanes;

use lanes::{ByteTree, Lane, LaneTree, WordTree};

use crate::backend::BinValue;
use crate::data::binned::{BinnedMatrix, Binner, BinsRef};
use crate::objective::ftz;
use crate::split::SplitRule;
use crate::tree::{Node, Tree};

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

/// One node of a numeric tree walked level by level: a row with bin `b` of the feature
/// goes to `next[0]` when `b.wrapping_sub(shift) <= last`, else to `next[1]`; a leaf's
/// `next` is itself. `column` is where the feature's bins start in a block's columns
/// (feature × [`BLOCK`]), so a row's bin is one add away.
#[derive(Debug, Clone, Copy, Default)]
struct StepNode {
    next: [u32; 2],
    column: u32,
    shift: u16,
    last: u16,
}

/// One node of a tree with categorical splits walked level by level: a categorical node
/// (`set` true) sends a row right when its bin b is not in the bit set at `sets[at..]`
/// (bit b % 64 of word b / 64; words past `top` are empty), a numeric one as a
/// [`StepNode`] does; a leaf's `next` is itself.
#[derive(Debug, Clone, Copy, Default)]
struct SetNode {
    /// the node's ways out and feature, and a numeric node's test
    step: StepNode,
    /// where the node's bit set starts in the walk's words (a numeric node's: word 0)
    at: u32,
    /// the set's last word, counted from `at`
    top: u16,
    set: bool,
}

/// One node of a tree laid out as a complete binary tree of its depth (heap order: the
/// children of `i` are `2i + 1` and `2i + 2`): the row goes right when
/// `b.wrapping_sub(shift) > last`. A leaf above the full depth continues as nodes that
/// always go left (`last` = `u16::MAX`), so it ends in its leftmost slot.
#[derive(Debug, Clone, Copy)]
struct HeapNode {
    column: u32,
    shift: u16,
    last: u16,
}

/// The most levels of a walk with sets laid out as a complete tree: the tables of 8
/// levels' sets of byte bins take at most 64 KiB.
const SET_TOP_LEVELS: usize = 8;

/// The most bytes of set tables a tree's top levels take ([`TopSets`]); past it the
/// tree walks from the root.
const SET_TABLE_BYTES: usize = 1 << 16;

/// A tree's top levels laid out as a complete binary tree ([`FlatTree::complete`]).
struct Complete {
    /// the internal slots in heap order
    nodes: Vec<HeapNode>,
    /// per bottom slot: the value of the leaf ending there
    values: Vec<f32>,
    /// per internal slot: the tree node it holds (`u32::MAX` for a slot under a leaf,
    /// which always goes left)
    held: Vec<u32>,
    /// per bottom slot: the tree node whose rows go on below it, or `u32::MAX` for a leaf
    below: Vec<u32>,
    /// per bottom slot: the tree node its rows are at (a leaf, or the node they go on from)
    at: Vec<u32>,
}

impl Complete {
    /// The layout as the top levels of a walk keep it, without the parts a walk does not
    /// read (a model of many deep trees keeps one of these per tree while it predicts).
    fn walked(mut self) -> Self {
        self.values = Vec::new();
        self.held = Vec::new();
        self
    }
}

/// Trees at most this deep are walked as complete binary trees (2^depth slots).
const MAX_HEAP_DEPTH: usize = 10;

/// How a tree is walked.
enum Walk {
    /// Numeric splits only, shallow: a block's rows step together, `depth` steps, and each
    /// step's next node is computed, not loaded. `values` has one slot per bottom position.
    Heap {
        nodes: Vec<HeapNode>,
        values: Vec<f32>,
        depth: usize,
    },
    /// Numeric splits only, deeper than a complete walk: the top levels are walked as a
    /// complete tree ([`FlatTree::top`]), the rest by the rows still walking.
    Levels { nodes: Vec<StepNode>, depth: usize },
    /// Some categorical split (or a numeric one sending no bin left): the top levels are
    /// walked as a complete tree ([`FlatTree::top`]), the rest by the rows still walking;
    /// `sets` holds the bit sets of the categorical nodes (and
    /// of numeric ones sending no bin left) after a zero word, the one leaves and numeric
    /// nodes read, so that every step's read is in bounds.
    Sets {
        nodes: Vec<SetNode>,
        sets: Vec<u64>,
        depth: usize,
    },
    /// A split on a feature the rows lack, a child past the nodes or sets too large for
    /// the offsets (never in a validated model): row by row, indexing checked.
    Rows { nodes: Vec<FlatNode> },
}

/// A tree flattened for prediction; categorical rules stay in the tree it was made from.
struct FlatTree<'t> {
    walk: Walk,
    values: Vec<f32>,
    tree: &'t Tree,
    /// features of the rows it walks
    nf: usize,
    /// a level-by-level walk's top levels as a complete tree (the first
    /// [`whole_levels`] of them taken by the whole block at once, the rest a complete
    /// walk's steps)
    top: Option<Complete>,
    /// a walk with bit sets: the sets of `top`'s slots that test one
    top_sets: Option<TopSets>,
}

impl<'t> FlatTree<'t> {
    /// The walk of `tree` over rows of `nf` features.
    fn new(tree: &'t Tree, nf: usize) -> Self {
        let values = tree.nodes.iter().map(|n| n.value).collect();
        // a split on a feature the rows lack (never in a validated model) walks row by
        // row, where indexing is checked
        let in_range = tree
            .nodes
            .iter()
            .all(|n| n.split.as_ref().is_none_or(|s| s.feature < nf));
        let walk = in_range
            .then(|| Self::levels(tree).or_else(|| Self::sets(tree)))
            .flatten()
            .unwrap_or_else(|| Walk::Rows {
                nodes: Self::rows(tree),
            });
        let walk = match walk {
            Walk::Levels { nodes, depth } if depth <= MAX_HEAP_DEPTH => {
                Self::heap(tree, &nodes, depth)
            }
            other => other,
        };
        let (top, top_sets) = match &walk {
            // (always deeper than a complete walk)
            Walk::Levels { nodes, depth } => (
                Some(Self::complete(tree, nodes, (*depth).min(MAX_HEAP_DEPTH)).walked()),
                None,
            ),
            Walk::Sets { nodes, sets, depth } if *depth > 0 => {
                let steps: Vec<StepNode> = nodes.iter().map(|n| n.step).collect();
                let mut top = Self::complete(tree, &steps, (*depth).min(SET_TOP_LEVELS));
                // a model of huge sets walks from the root instead (its tables would take
                // 64 bytes a word of its sets)
                match TopSets::new(&mut top, nodes, sets) {
                    Some(sets) => (Some(top.walked()), Some(sets)),
                    None => (None, None),
                }
            }
            _ => (None, None),
        };
        FlatTree {
            walk,
            values,
            tree,
            nf,
            top,
            top_sets,
        }
    }

    /// The complete-tree form of a numeric tree (its level-by-level `nodes`) of `depth`.
    fn heap(tree: &Tree, nodes: &[StepNode], depth: usize) -> Walk {
        let layout = Self::complete(tree, nodes, depth);
        Walk::Heap {
            nodes: layout.nodes,
            values: layout.values,
            depth,
        }
    }

    /// A tree's level-by-level `nodes` laid out as a complete tree of `depth` levels (its
    /// top `depth` levels where it is deeper). A categorical node's slot keeps its feature
    /// and ways but not its set.
    fn complete(tree: &Tree, nodes: &[StepNode], depth: usize) -> Complete {
        let internal = (1usize << depth) - 1;
        let always_left = HeapNode {
            column: 0,
            shift: 0,
            last: u16::MAX,
        };
        let mut out = Complete {
            nodes: vec![always_left; internal],
            values: vec![0.0f32; internal + 1],
            held: vec![u32::MAX; internal],
            below: vec![u32::MAX; internal + 1],
            at: vec![0; internal + 1],
        };
        // (tree node, heap position, level)
        let mut open = vec![(0usize, 0usize, 0usize)];
        while let Some((i, h, level)) = open.pop() {
            let n = nodes[i];
            let is_leaf = n.next == [i as u32; 2];
            if is_leaf || level == depth {
                // always left down to the bottom: the leftmost slot under h
                let bottom = ((h + 1) << (depth - level)) - 1 - internal;
                out.at[bottom] = i as u32;
                if is_leaf {
                    out.values[bottom] = tree.nodes[i].value;
                } else {
                    out.below[bottom] = i as u32;
                }
                continue;
            }
            out.nodes[h] = HeapNode {
                column: n.column,
                shift: n.shift,
                last: n.last,
            };
            out.held[h] = i as u32;
            open.push((n.next[0] as usize, 2 * h + 1, level + 1));
            open.push((n.next[1] as usize, 2 * h + 2, level + 1));
        }
        out
    }

    /// The level-by-level node of tree node `i` (a leaf continues as itself), unless its
    /// split is categorical or numeric sending no bin left, which a compare cannot take.
    fn step_node(i: usize, n: &Node) -> Option<StepNode> {
        let Some(s) = &n.split else {
            return Some(StepNode {
                next: [i as u32; 2],
                ..StepNode::default()
            });
        };
        let SplitRule::Numeric { bin } = s.rule else {
            return None;
        };
        if bin == 0 {
            return None;
        }
        let shift = u16::from(!s.default_left);
        Some(StepNode {
            next: [s.left.0, s.right.0],
            column: (s.feature * BLOCK) as u32,
            shift,
            last: bin - shift,
        })
    }

    /// The level-by-level form, unless a split is categorical (or sends no bin left).
    fn levels(tree: &Tree) -> Option<Walk> {
        let nodes = tree
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| Self::step_node(i, n))
            .collect::<Option<Vec<_>>>()?;
        leads_to_nodes(nodes.iter().map(|n| n.next), nodes.len()).then(|| Walk::Levels {
            nodes,
            depth: tree.depth(),
        })
    }

    /// The level-by-level form with bit sets, for any tree whose ways out of a node all
    /// lead to a node.
    fn sets(tree: &Tree) -> Option<Walk> {
        let mut sets = vec![0u64];
        let mut nodes = Vec::with_capacity(tree.nodes.len());
        for (i, n) in tree.nodes.iter().enumerate() {
            if let Some(step) = Self::step_node(i, n) {
                nodes.push(SetNode {
                    step,
                    ..SetNode::default()
                });
                continue;
            }
            let s = n.split.as_ref()?;
            let left = match &s.rule {
                // no bin but perhaps the missing one goes left
                SplitRule::Numeric { .. } => &[][..],
                SplitRule::Categorical { left } => left.words(),
            };
            let at = sets.len();
            sets.extend_from_slice(left);
            if sets.len() == at {
                sets.push(0);
            }
            // bin 0 (missing) takes the default way
            sets[at] = (sets[at] & !1) | u64::from(s.default_left);
            nodes.push(SetNode {
                step: StepNode {
                    next: [s.left.0, s.right.0],
                    column: (s.feature * BLOCK) as u32,
                    ..StepNode::default()
                },
                at: u32::try_from(at).ok()?,
                top: u16::try_from(sets.len() - at - 1).ok()?,
                set: true,
            });
        }
        leads_to_nodes(nodes.iter().map(|n| n.step.next), nodes.len()).then(|| Walk::Sets {
            nodes,
            sets,
            depth: tree.depth(),
        })
    }

    /// The lane form of the walk in lanes of width `W`: all of it where it is at most
    /// [`lanes::MAX_DEPTH`] deep, else its top levels, each bottom slot of which says
    /// where its rows go on ([`FlatTree::finish`]). `None` for a row-by-row walk, or a rule
    /// or set the lanes cannot take.
    fn lane_tree<W: Lane>(&self) -> Option<LaneTree<W>> {
        let top = lanes::MAX_DEPTH;
        match &self.walk {
            Walk::Heap {
                nodes,
                values,
                depth,
            } if *depth <= top => LaneTree::new(nodes, values, *depth, |_| None, None),
            Walk::Heap { nodes, .. } => {
                // rows go on from their heap position on the level below the lanes'
                let internal = (1u32 << top) - 1;
                let below = (internal..2 * internal + 1).collect();
                let values = vec![0.0; 1 << top];
                LaneTree::new(
                    &nodes[..internal as usize],
                    &values,
                    top,
                    |_| None,
                    Some(below),
                )
            }
            Walk::Levels { nodes, depth } => {
                let layout = Self::complete(self.tree, nodes, top.min(*depth));
                let below = Some(layout.below).filter(|_| *depth > top);
                LaneTree::new(
                    &layout.nodes,
                    &layout.values,
                    top.min(*depth),
                    |_| None,
                    below,
                )
            }
            Walk::Sets { nodes, sets, depth } => {
                let steps: Vec<StepNode> = nodes.iter().map(|n| n.step).collect();
                let layout = Self::complete(self.tree, &steps, top.min(*depth));
                let held = &layout.held;
                let set = |slot: usize| {
                    let n = nodes.get(*held.get(slot)? as usize)?;
                    n.set.then(|| {
                        // the set's bits of bins 0..=255, little-endian: bin b is bit b % 8
                        // of byte b / 8 (words past `top` are empty)
                        let mut bytes = [0u8; 32];
                        let words = &sets[n.at as usize..][..=usize::from(n.top)];
                        for (w, word) in words.iter().take(4).enumerate() {
                            bytes[8 * w..8 * w + 8].copy_from_slice(&word.to_le_bytes());
                        }
                        bytes
                    })
                };
                let below = Some(layout.below.clone()).filter(|_| *depth > top);
                LaneTree::new(&layout.nodes, &layout.values, top.min(*depth), set, below)
            }
            Walk::Rows { .. } => None,
        }
    }

    /// The value of the leaf row `r` of a block reaches from `from` (a heap position of a
    /// complete walk, a node of the others) on, one row at a time: the rest of a walk the
    /// lanes took the top of.
    ///
    /// # Panics
    /// If `columns` is shorter than the features the tree was flattened for.
    fn finish<T: Copy + Into<u16>>(&self, columns: &[T], r: usize, from: u32) -> f32 {
        let end = self.end_of(columns, r, from) as usize;
        match &self.walk {
            Walk::Heap { values, .. } => values[end],
            _ => self.values[end],
        }
    }

    /// Where row `r` of a block ends from `from` (a heap position of a complete walk, a
    /// node of the others) on, one row at a time, stopping at its leaf: a bottom slot of a
    /// complete walk, a leaf node of the others.
    ///
    /// # Panics
    /// If `columns` is shorter than the features the tree was flattened for.
    #[allow(unsafe_code)]
    fn end_of<T: Copy + Into<u16>>(&self, columns: &[T], r: usize, from: u32) -> u32 {
        assert!(r < BLOCK && columns.len() >= self.nf * BLOCK);
        let mut at = from;
        match &self.walk {
            Walk::Heap { nodes, .. } => {
                let internal = nodes.len() as u32;
                while at < internal {
                    // SAFETY: `at` is internal; columns as for `heap_step` (asserted above)
                    let (n, b) = unsafe { node_and_bin(nodes, columns, at, r) };
                    at = 2 * at + 1 + u32::from(b.wrapping_sub(n.shift) > n.last);
                }
                at - internal
            }
            // a step count bound by the nodes: a model whose ways went round (never a
            // validated one) cannot keep the walk here
            Walk::Levels { nodes, .. } => {
                for _ in 0..nodes.len() {
                    // SAFETY: `at` is a node (`from` is one, and so is every `next`: checked
                    // in `levels`); columns as above
                    let (n, b) = unsafe { node_and_bin(nodes, columns, at, r) };
                    if n.next == [at; 2] {
                        break;
                    }
                    at = n.next[usize::from(b.wrapping_sub(n.shift) > n.last)];
                }
                at
            }
            Walk::Sets { nodes, sets, .. } => {
                for _ in 0..nodes.len() {
                    // SAFETY: as for `Levels` (`next` checked in `sets`); every set lies in
                    // `sets`
                    let (n, b) = unsafe { node_and_bin(nodes, columns, at, r) };
                    if n.step.next == [at; 2] {
                        break;
                    }
                    at = unsafe { set_next(&n, sets, b) };
                }
                at
            }
            Walk::Rows { nodes } => Self::leaf_of_row(nodes, self.tree, columns, r) as u32,
        }
    }

    /// The rest of a walk whose rows have taken its top levels together: the rows not yet
    /// at a leaf go on a level at a time, together, until each reaches its leaf.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn finish_rows<T: Copy + Into<u16>>(&self, columns: &[T], leaf: &mut [u32], start: &Walking) {
        assert!(leaf.len() <= BLOCK && columns.len() >= self.nf * BLOCK);
        // a row past the block fails `leaf`'s checked index before its step reads a bin
        debug_assert!(start.rows[..start.live]
            .iter()
            .all(|&r| usize::from(r) < leaf.len()));
        match &self.walk {
            // SAFETY: every `leaf[r]` is a node (the walk's steps so far follow `next`) and
            // so is every `next` (checked in `levels`); a node's column plus a row of the
            // block lies in `columns` (asserted above, features checked in `new`)
            Walk::Levels { nodes, .. } => together(leaf, start, nodes.len(), |r, at| unsafe {
                let (n, b) = node_and_bin(nodes, columns, at, r);
                n.next[usize::from(b.wrapping_sub(n.shift) > n.last)]
            }),
            // SAFETY: as above (`next` checked in `sets`), and every set lies in `sets`
            Walk::Sets { nodes, sets, .. } => together(leaf, start, nodes.len(), |r, at| unsafe {
                let (n, b) = node_and_bin(nodes, columns, at, r);
                set_next(&n, sets, b)
            }),
            Walk::Heap { .. } | Walk::Rows { .. } => {
                unreachable!("only level-by-level walks go on below their top levels")
            }
        }
    }

    /// Adds the value of the leaf each of a block's rows reaches to its margin in `sums`
    /// (`leaf` as many as the block's rows, its scratch): [`FlatTree::leaves`].
    #[inline(always)]
    fn add<T: BinValue + Into<u16>>(
        &self,
        columns: &[T],
        leaf: &mut [u32],
        sums: &mut [f32; BLOCK],
    ) {
        self.leaves(columns, leaf);
        let values = match &self.walk {
            Walk::Heap { values, .. } => values,
            _ => &self.values,
        };
        // the values looked up first, then added in a loop the compiler vectorises
        let mut add = [0f32; BLOCK];
        for (a, &at) in add.iter_mut().zip(leaf.iter()) {
            *a = values[at as usize];
        }
        for (s, &a) in sums.iter_mut().zip(&add).take(leaf.len()) {
            *s = ftz(*s + a);
        }
    }

    /// [`FlatTree::add`] compiled for AVX2: the whole levels' compares of a block take
    /// twice the lanes of SSE2's, with unsigned 16-bit compares of their own (the same
    /// compares on the same bins, so the same leaves).
    ///
    /// # Safety
    /// The CPU must have what [`crate::simd::avx2`] checks.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt,fma")]
    #[allow(unsafe_code)]
    unsafe fn add_avx2<T: BinValue + Into<u16>>(
        &self,
        columns: &[T],
        leaf: &mut [u32],
        sums: &mut [f32; BLOCK],
    ) {
        self.add(columns, leaf, sums)
    }

    fn rows(tree: &Tree) -> Vec<FlatNode> {
        tree.nodes
            .iter()
            .map(|n| match &n.split {
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
            })
            .collect()
    }

    /// The leaf row `r` of a block reaches (its bin of feature f at `columns[f * BLOCK +
    /// r]`), node by node with the training tree's rule (bin 0 is missing and takes the
    /// default way).
    #[inline(always)]
    fn leaf_of_row<T: Copy + Into<u16>>(
        nodes: &[FlatNode],
        tree: &Tree,
        columns: &[T],
        r: usize,
    ) -> usize {
        let mut i = 0usize;
        loop {
            let n = nodes[i];
            if n.flags & LEAF != 0 {
                return i;
            }
            let b: u16 = columns[n.feature as usize * BLOCK + r].into();
            let left = if b == 0 {
                n.flags & DEFAULT_LEFT != 0
            } else if n.flags & CATEGORICAL != 0 {
                let s = tree.nodes[i].split.as_ref().expect("an internal node");
                s.rule.goes_left(b, s.default_left)
            } else {
                b <= n.bin
            };
            i = if left { n.left } else { n.right } as usize;
        }
    }

    /// Moves the block's rows down the walk's top levels together where it has them,
    /// leaving in `leaf` the tree node each reached (else the root); the rows that go on
    /// below them.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn top_levels<T: BinValue + Into<u16>>(&self, columns: &[T], leaf: &mut [u32]) -> Walking {
        assert!(leaf.len() <= BLOCK && columns.len() >= self.nf * BLOCK);
        let Some(top) = &self.top else {
            leaf.fill(0);
            return Walking::all(leaf.len());
        };
        // 2^levels - 1 internal slots
        let levels = (top.nodes.len() + 1).trailing_zeros() as usize;
        let whole = levels.min(whole_levels::<T>());
        top_levels(&top.nodes, whole, columns, leaf, self.top_sets.as_ref());
        for _ in whole..levels {
            // SAFETY: the rows are at heap positions of level `whole` and on of a complete
            // tree of `levels` levels, internal ones; columns as for `leaves`
            unsafe {
                match &self.top_sets {
                    Some(sets) => heap_set_step(&top.nodes, sets, columns, leaf),
                    None => heap_step(&top.nodes, columns, leaf),
                }
            }
        }
        let first = top.nodes.len() as u32;
        let mut walking = Walking {
            rows: [0; BLOCK],
            live: 0,
        };
        for (r, at) in leaf.iter_mut().enumerate() {
            let slot = (*at - first) as usize;
            *at = top.at[slot];
            // kept unless its leaf ends there: branch-free (`live` is at most `r`)
            walking.rows[walking.live % BLOCK] = r as u8;
            walking.live += usize::from(top.below[slot] != u32::MAX);
        }
        walking
    }

    /// Where each of the block's rows ends, into `leaf` (at most [`BLOCK`] rows): a node
    /// of the training tree, or for a complete walk a bottom slot of its `values`.
    /// `columns` holds the block's bins feature by feature ([`BLOCK`] slots for each of
    /// the `nf` features the tree was flattened for; the unchecked steps rely on it).
    ///
    /// # Panics
    /// If `leaf` is longer than a block or `columns` shorter than the features.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn leaves<T: BinValue + Into<u16>>(&self, columns: &[T], leaf: &mut [u32]) {
        assert!(
            leaf.len() <= BLOCK && columns.len() >= self.nf * BLOCK,
            "a block of rows and every feature's column"
        );
        match &self.walk {
            Walk::Heap { nodes, depth, .. } => {
                let top = (*depth).min(whole_levels::<T>());
                top_levels(nodes, top, columns, leaf, None);
                for _ in top..*depth {
                    // SAFETY: levels top..depth of a walk from the root (the top levels
                    // just taken) of a complete tree of `depth` levels; columns are
                    // features below the rows' width (checked in `FlatTree::new`),
                    // `columns` holds `nf * BLOCK` bins and a block at most BLOCK rows
                    unsafe { heap_step(nodes, columns, leaf) };
                }
                let internal = (1u32 << depth) - 1;
                for at in leaf.iter_mut() {
                    *at -= internal;
                }
            }
            Walk::Levels { .. } | Walk::Sets { .. } => {
                let walking = self.top_levels(columns, leaf);
                // exactly the rows not at a leaf, whatever the depth a tree reports
                if walking.live > 0 {
                    self.finish_rows(columns, leaf, &walking);
                }
            }
            Walk::Rows { nodes } => {
                for (r, at) in leaf.iter_mut().enumerate() {
                    *at = Self::leaf_of_row(nodes, self.tree, columns, r) as u32;
                }
            }
        }
    }
}

/// The top levels of a complete walk taken by the whole block at once: a level's every
/// node compares the whole block's bins of its feature and keeps the way of the rows at
/// its position, loops over a block the compiler vectorises (no SIMD instructions of our
/// own: this is the walk of CPUs without the lanes). A level of 2^l nodes costs 2^l
/// compares a row, less than a row-at-a-time step while 2^l is small: up to 5 levels where
/// the bins are bytes.
const WHOLE_LEVELS: usize = 5;
/// [`WHOLE_LEVELS`] where the bins are 16 bits: a vector compares half as many, and past
/// 4 levels the row-at-a-time steps were faster (`max_bin` 1024, depth 8: 4 levels took
/// 8% less time than 5 with AVX2, 10% less on the portable path; 6 took 10% more).
const WORD_WHOLE_LEVELS: usize = 4;

/// The top levels of a complete walk taken whole for bins of type `T`.
#[inline(always)]
fn whole_levels<T: BinValue>() -> usize {
    if T::bytes(&[]).is_some() {
        WHOLE_LEVELS
    } else {
        WORD_WHOLE_LEVELS
    }
}

/// The bit sets of a complete walk's top slots that test one, as tables of the way each
/// bin goes: a level's sets are looked up once a row, whatever their number, rather than
/// once a row for each (a compare vectorises, a set lookup does not).
struct TopSets {
    /// per internal slot: where its table starts in `ways` and its last entry (a bin past
    /// it reads that entry); slots testing no set read entry 0, which is 0
    slots: Vec<SetSlot>,
    /// per slot testing a set: 1 for each bin going right, then 1 for bins past the set
    ways: Vec<u8>,
    /// bit l set where level l has a slot testing a set
    levels: u32,
}

/// Where a slot's set is looked up.
#[derive(Clone, Copy, Default)]
struct SetSlot {
    column: u32,
    from: u32,
    last: u32,
}

impl TopSets {
    /// The tables of the sets of `top`'s slots (holding `nodes` of a walk with sets whose
    /// words are `words`); those slots' compares become always-left, so that only the
    /// table decides. `None` where the tables would take more than [`SET_TABLE_BYTES`].
    fn new(top: &mut Complete, nodes: &[SetNode], words: &[u64]) -> Option<Self> {
        let bytes: usize = top
            .held
            .iter()
            .filter_map(|&i| nodes.get(i as usize).filter(|n| n.set))
            .map(|n| (usize::from(n.top) + 1) * 64 + 1)
            .sum();
        if bytes > SET_TABLE_BYTES {
            return None;
        }
        let mut out = TopSets {
            slots: vec![SetSlot::default(); top.nodes.len()],
            ways: vec![0],
            levels: 0,
        };
        for (slot, &held) in top.held.iter().enumerate() {
            let Some(n) = nodes.get(held as usize).filter(|n| n.set) else {
                continue;
            };
            let set = &words[n.at as usize..=n.at as usize + usize::from(n.top)];
            let from = out.ways.len();
            // bit b % 64 of word b / 64; the entry past the set's words: not in it
            out.ways.extend(
                set.iter()
                    .flat_map(|w| (0..64).map(move |b| (w >> b) as u8 & 1 ^ 1)),
            );
            out.ways.push(1);
            out.slots[slot] = SetSlot {
                column: n.step.column,
                from: from as u32,
                last: (set.len() * 64) as u32,
            };
            top.nodes[slot] = HeapNode {
                column: n.step.column,
                shift: 0,
                last: u16::MAX,
            };
            out.levels |= 1 << (slot + 1).ilog2();
        }
        Some(out)
    }
}

/// Moves each of a block's rows down the top `top` levels of a complete walk (`nodes` in
/// heap order; a slot of `sets` tests its set), leaving its heap position in `leaf`.
///
/// # Panics
/// If `nodes` has fewer than the top levels' slots, a node's column lies past `columns`
/// less a block.
#[inline(always)]
fn top_levels<T: BinValue + Into<u16>>(
    nodes: &[HeapNode],
    top: usize,
    columns: &[T],
    leaf: &mut [u32],
    sets: Option<&TopSets>,
) {
    // a position of the levels taken whole fits a byte
    const _: () = assert!(WHOLE_LEVELS <= 8 && WORD_WHOLE_LEVELS <= 8);
    let mut position = [0u8; BLOCK];
    for level in 0..top {
        let first = (1usize << level) - 1;
        let mut right = [0u8; BLOCK];
        for (p, n) in nodes[first..2 * first + 1].iter().enumerate() {
            if n.shift == 0 && n.last == u16::MAX {
                // always left: a slot under a leaf
                continue;
            }
            let at = n.column as usize..n.column as usize + BLOCK;
            // bytes compare in bytes, twice the lanes of a 16-bit compare
            if let (Some(bytes), Some((shift, last))) =
                (T::bytes(columns), u8::rule(n.shift, n.last))
            {
                let column: &[u8; BLOCK] = bytes[at].try_into().expect("a block's bins");
                for ((way, &b), &at) in right.iter_mut().zip(column).zip(&position) {
                    *way |= u8::from(at == p as u8) & u8::from(b.wrapping_sub(shift) > last);
                }
                continue;
            }
            let column: &[T; BLOCK] = columns[at].try_into().expect("a block's bins");
            for ((way, &b), &at) in right.iter_mut().zip(column).zip(&position) {
                let b: u16 = b.into();
                *way |= u8::from(at == p as u8) & u8::from(b.wrapping_sub(n.shift) > n.last);
            }
        }
        if let Some(sets) = sets.filter(|s| s.levels >> level & 1 == 1) {
            // each row looks up the set of the slot at its position (a slot testing no
            // set reads entry 0, which sends no row right)
            let slots = &sets.slots[first..2 * first + 1];
            for (r, (way, &at)) in right.iter_mut().zip(&position).enumerate() {
                let s = slots[usize::from(at)];
                let b: u16 = columns[s.column as usize + r].into();
                *way |= sets.ways[(s.from + u32::from(b).min(s.last)) as usize];
            }
        }
        for (at, way) in position.iter_mut().zip(right) {
            *at = 2 * *at + way;
        }
    }
    let first = (1u32 << top) - 1;
    for (at, &p) in leaf.iter_mut().zip(&position) {
        *at = first + u32::from(p);
    }
}

/// Whether every way out of a node (`next` of each of `len` nodes) leads to a node, as in
/// a validated model's trees.
fn leads_to_nodes(next: impl Iterator<Item = [u32; 2]>, len: usize) -> bool {
    next.flatten().all(|c| (c as usize) < len)
}

/// Moves every row of a block one level, `leaf[r] = step(r, leaf[r])`, four rows a turn:
/// four independent walks in flight, and a quarter of the loop's own work. The four are a
/// quarter of the block apart: four neighbours' results were packed into a vector by the
/// compiler, which spilled the walk's registers to the stack.
#[inline(always)]
fn four_at_a_turn(leaf: &mut [u32], step: impl Fn(usize, u32) -> u32) {
    let q = leaf.len() / 4;
    let (a, rest) = leaf.split_at_mut(q);
    let (b, rest) = rest.split_at_mut(q);
    let (c, rest) = rest.split_at_mut(q);
    let (d, tail) = rest.split_at_mut(q);
    for (r, (((a, b), c), d)) in a.iter_mut().zip(b).zip(c).zip(d).enumerate() {
        let next = [
            step(r, *a),
            step(r + q, *b),
            step(r + 2 * q, *c),
            step(r + 3 * q, *d),
        ];
        [*a, *b, *c, *d] = next;
    }
    for (r, at) in tail.iter_mut().enumerate() {
        *at = step(4 * q + r, *at);
    }
}

/// The rows of a block not yet at their leaf: the first `live` of `rows`.
struct Walking {
    rows: [u8; BLOCK],
    live: usize,
}

impl Walking {
    /// Every row of a block of `rows`.
    fn all(rows: usize) -> Self {
        Walking {
            rows: std::array::from_fn(|i| i as u8),
            live: rows,
        }
    }
}

/// Moves the `start` rows of a block on, `leaf[r] = step(r, leaf[r])`, a level at a time
/// until each is at a leaf (where `step` keeps it), at most `bound` levels (a model whose
/// ways went round, never a validated one, cannot keep the walk here). Only the rows still walking
/// take a level's step, and they take it together, their walks overlapping: a loss-guided
/// tree's rows end at many depths, and one row's walk alone waits on each load.
#[inline(always)]
fn together(leaf: &mut [u32], start: &Walking, bound: usize, step: impl Fn(usize, u32) -> u32) {
    debug_assert!(leaf.len() <= BLOCK);
    // the rows walking, read from one and the rows kept written to the other
    let mut walking = [start.rows, [0u8; BLOCK]];
    let mut live = start.live;
    for level in 0..bound {
        if live == 0 {
            break;
        }
        let [from, to] = &mut walking;
        let (from, to) = if level % 2 == 0 {
            (from, to)
        } else {
            (to, from)
        };
        let mut kept = 0;
        for &r in &from[..live] {
            let r = usize::from(r);
            let at = leaf[r];
            let next = step(r, at);
            leaf[r] = next;
            // kept unless it stayed: branch-free, the ways are unpredictable (the mask
            // keeps the index in bounds without a check: `kept` is below the row count)
            to[kept % BLOCK] = r as u8;
            kept += usize::from(next != at);
        }
        live = kept;
    }
}

/// A walk's node, which knows where its feature's bins start in a block's columns.
trait Placed: Copy {
    /// The start of the node's feature in a block's columns (feature × [`BLOCK`]).
    fn column(&self) -> u32;
}

impl Placed for HeapNode {
    fn column(&self) -> u32 {
        self.column
    }
}

impl Placed for StepNode {
    fn column(&self) -> u32 {
        self.column
    }
}

impl Placed for SetNode {
    fn column(&self) -> u32 {
        self.step.column
    }
}

/// Node `at` and row `r`'s bin of the node's feature, without bounds checks (checked in
/// debug builds).
///
/// # Safety
/// `at` is below `nodes.len()` and the node's column plus `r` below `columns.len()`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn node_and_bin<N: Placed, T: Copy + Into<u16>>(
    nodes: &[N],
    columns: &[T],
    at: u32,
    r: usize,
) -> (N, u16) {
    debug_assert!((at as usize) < nodes.len());
    // SAFETY: by the function's contract
    unsafe {
        let n = *nodes.get_unchecked(at as usize);
        debug_assert!(n.column() as usize + r < columns.len());
        (n, (*columns.get_unchecked(n.column() as usize + r)).into())
    }
}

/// One level of a complete-tree walk: each of the block's rows at heap position `leaf[r]`
/// moves to the child its bin chooses. Indexing is unchecked (the checks took a quarter of
/// the walk); checked in debug builds.
///
/// # Safety
/// Every `leaf[r]` is an internal position (below `nodes.len()`), as it is at each of the
/// first `depth` levels of a walk from the root of a complete tree of `depth` levels
/// (2^depth - 1 internal slots); every node's column plus [`BLOCK`] is at most
/// `columns.len()`, and `leaf.len() <= BLOCK`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn heap_step<T: Copy + Into<u16>>(nodes: &[HeapNode], columns: &[T], leaf: &mut [u32]) {
    debug_assert!(leaf.len() <= BLOCK);
    let step = |r: usize, at: u32| {
        // SAFETY: by the function's contract `at` indexes an internal node, and the node's
        // column plus `r` lies inside `columns`.
        let (n, b) = unsafe { node_and_bin(nodes, columns, at, r) };
        2 * at + 1 + u32::from(b.wrapping_sub(n.shift) > n.last)
    };
    four_at_a_turn(leaf, step);
}

/// One level of a complete-tree walk whose slots may test sets: as [`heap_step`], a slot
/// of `sets` sending the row right where its table says (its compare never does, and a
/// slot testing no set reads a table entry that never does), so that a row's way is the
/// or of the two, never a branch.
///
/// # Safety
/// As [`heap_step`].
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn heap_set_step<T: Copy + Into<u16>>(
    nodes: &[HeapNode],
    sets: &TopSets,
    columns: &[T],
    leaf: &mut [u32],
) {
    debug_assert!(leaf.len() <= BLOCK);
    let step = |r: usize, at: u32| {
        // SAFETY: by the function's contract `at` indexes an internal node, and the node's
        // column plus `r` lies inside `columns`.
        let (n, b) = unsafe { node_and_bin(nodes, columns, at, r) };
        let s = sets.slots[at as usize];
        let set_right = sets.ways[(s.from + u32::from(b).min(s.last)) as usize];
        2 * at + 1 + (u32::from(b.wrapping_sub(n.shift) > n.last) | u32::from(set_right))
    };
    four_at_a_turn(leaf, step);
}

/// Where node `n` of a walk with bit sets sends bin `b`: a categorical node tests the
/// bin's bit in its set (a bin past the set's last word is not in it), a numeric one
/// compares. Both tests are computed and one is selected, so that a row's way is never a
/// branch (branching took twice the time).
///
/// # Safety
/// `n.at + n.top` is below `sets.len()`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn set_next(n: &SetNode, sets: &[u64], b: u16) -> u32 {
    let w = b >> 6;
    let word_at = n.at as usize + usize::from(w.min(n.top));
    debug_assert!(word_at < sets.len());
    // SAFETY: the word read is at most `n.at + n.top`, inside `sets` (the contract)
    let word = unsafe { *sets.get_unchecked(word_at) };
    // bits, not branches: a row's way is unpredictable
    let in_set = (word >> (b & 63)) as u32 & u32::from(w <= n.top) & 1;
    let numeric_right = u32::from(b.wrapping_sub(n.step.shift) > n.step.last);
    let right = numeric_right ^ (u32::from(n.set) & (numeric_right ^ in_set ^ 1));
    n.step.next[right as usize]
}

/// Rows per block: a block walks one tree at a time, so the tree stays in cache, and its
/// rows' steps overlap.
const BLOCK: usize = 64;

/// Which compilation of the walks a block's trees take (the lanes aside): the same code,
/// compiled for the baseline CPU or for AVX2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compiled {
    /// For every CPU of the target (SSE2 on x86-64).
    Baseline,
    /// For AVX2 (x86-64-v3), made only where the CPU has it.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Compiled {
    /// The compilation this process takes: for AVX2 where it is allowed and the CPU has
    /// it ([`crate::simd::avx2`]).
    fn taken() -> Self {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx2() {
            return Compiled::Avx2;
        }
        Compiled::Baseline
    }
}

/// Adds `trees` to `out` (`k` margins a row) block by block: `fill(first, rows, columns)`
/// writes the bins of rows `first..first + rows` feature by feature (row r's bin of
/// feature f at `columns[f * BLOCK + r]`, `nf` features); the trees the lanes do not take
/// walk as `compiled`.
#[allow(unsafe_code)]
fn add_trees<T: BinValue + Default + Into<u16>>(
    nf: usize,
    fill: impl Fn(usize, usize, &mut [T]) + Sync,
    trees: &[FlatTree<'_>],
    (lanes, compiled): (&[Option<Lanes>], Compiled),
    k: usize,
    out: &mut [f32],
) {
    out.par_chunks_mut(k * BLOCK).enumerate().for_each_init(
        || (vec![T::default(); nf * BLOCK], vec![0f32; k * BLOCK]),
        |(columns, acc), (block, m)| {
            let rows = m.len() / k;
            fill(block * BLOCK, rows, columns);
            // the block's margins group by group, so a tree adds to 64 in a row
            for (r, row) in m.chunks_exact(k).enumerate() {
                for (g, &v) in row.iter().enumerate() {
                    acc[g * BLOCK + r] = v;
                }
            }
            let mut leaf = [0u32; BLOCK];
            let leaf = &mut leaf[..rows];
            for (t, tree) in trees.iter().enumerate() {
                let g = t % k;
                let sums: &mut [f32; BLOCK] = (&mut acc[g * BLOCK..(g + 1) * BLOCK])
                    .try_into()
                    .expect("a block of margins");
                // SAFETY: `lanes` is only filled where the CPU walks in those lanes (see
                // add_walks); the tree's columns are features below `nf` (checked in
                // FlatTree::new) and `columns` holds nf * BLOCK bins
                if let Some(Some(lane)) = lanes.get(t) {
                    if unsafe { lane.add(tree, columns, rows, sums) } {
                        continue;
                    }
                }
                match compiled {
                    Compiled::Baseline => tree.add(columns, leaf, sums),
                    #[cfg(target_arch = "x86_64")]
                    Compiled::Avx2 => {
                        debug_assert!(crate::simd::avx2());
                        // SAFETY: the CPU has what the AVX2 compilation is for (it is made
                        // only so: `Compiled::taken`)
                        unsafe { tree.add_avx2(columns, leaf, sums) }
                    }
                }
            }
            for (r, row) in m.chunks_exact_mut(k).enumerate() {
                for (g, v) in row.iter_mut().enumerate() {
                    *v = acc[g * BLOCK + r];
                }
            }
        },
    );
}

/// A tree's top levels in SIMD lanes of the bins' width.
enum Lanes {
    /// Byte bins (AVX-512 VBMI).
    Bytes(ByteTree),
    /// 16-bit bins (AVX-512 BW).
    Words(WordTree),
}

impl Lanes {
    /// Adds `tree`'s leaf values to a block's margins `sums` (`rows` of them), the top
    /// levels in lanes and a deeper tree's rest row by row from where each row ended;
    /// false (nothing added) where `columns` are not of the lanes' width.
    ///
    /// # Safety
    /// The CPU walks in these lanes ([`lanes::available`], [`lanes::words_available`]);
    /// `columns` holds every feature's [`BLOCK`] bins, and the tree splits on no other.
    #[allow(unsafe_code)]
    unsafe fn add<T: BinValue + Into<u16>>(
        &self,
        tree: &FlatTree<'_>,
        columns: &[T],
        rows: usize,
        sums: &mut [f32; BLOCK],
    ) -> bool {
        // SAFETY: by the function's contract
        let ends: [u16; BLOCK] = match (self, T::bytes(columns), T::words(columns)) {
            (Lanes::Bytes(b), Some(c), _) if !b.partial() => {
                unsafe { lanes::add_tree(b, c, sums) };
                return true;
            }
            (Lanes::Bytes(b), Some(c), _) => unsafe { lanes::positions(b, c) }.map(u16::from),
            (Lanes::Words(w), _, Some(c)) if !w.partial() => {
                unsafe { lanes::add_words(w, c, sums) };
                return true;
            }
            (Lanes::Words(w), _, Some(c)) => unsafe { lanes::word_positions(w, c) },
            _ => return false,
        };
        // the rest row by row from where each ended
        for (r, (s, &p)) in sums.iter_mut().zip(&ends).take(rows).enumerate() {
            let end = match self {
                Lanes::Bytes(b) => b.end(usize::from(p)),
                Lanes::Words(w) => w.end(usize::from(p)),
            };
            *s = ftz(*s + end.unwrap_or_else(|from| tree.finish(columns, r, from)));
        }
        true
    }
}

/// [`add_trees`] with `trees` flattened, in SIMD lanes where the CPU can.
fn add_walks<T: BinValue + Default + Into<u16>>(
    nf: usize,
    fill: impl Fn(usize, usize, &mut [T]) + Sync,
    trees: &[Tree],
    k: usize,
    out: &mut [f32],
) {
    let flat: Vec<FlatTree<'_>> = trees.iter().map(|t| FlatTree::new(t, nf)).collect();
    let lanes: Vec<Option<Lanes>> = if T::bytes(&[]).is_some() && lanes::available() {
        flat.iter()
            .map(|t| t.lane_tree().map(Lanes::Bytes))
            .collect()
    } else if T::words(&[]).is_some() && lanes::words_available() {
        flat.iter()
            .map(|t| t.lane_tree().map(Lanes::Words))
            .collect()
    } else {
        Vec::new()
    };
    add_trees(nf, fill, &flat, (&lanes, Compiled::taken()), k, out);
}

/// The rows `first..first + rows` of row-major `bins` (`nf` a row) into a block's columns.
fn transpose<T: Copy>(bins: &[T], nf: usize, first: usize, rows: usize, columns: &mut [T]) {
    for (r, row) in bins[first * nf..(first + rows) * nf]
        .chunks_exact(nf)
        .enumerate()
    {
        for (f, &b) in row.iter().enumerate() {
            columns[f * BLOCK + r] = b;
        }
    }
}

/// Adds `trees` (round-major, `k` per round) to `out` (`k` margins per row of `binned`),
/// each row's trees in order.
pub fn add_to_margins(binned: &BinnedMatrix, trees: &[Tree], k: usize, out: &mut [f32]) {
    let nf = binned.n_features();
    match binned.bins() {
        BinsRef::U8(b) => add_walks(nf, |f, r, c| transpose(b, nf, f, r, c), trees, k, out),
        BinsRef::U16(b) => add_walks(nf, |f, r, c| transpose(b, nf, f, r, c), trees, k, out),
        // bins held by column fill each block's columns from their entries
        BinsRef::Sparse(s) if s.wide() => add_walks(
            nf,
            |f, r, c: &mut [u16]| s.fill(f, r, c, 1, BLOCK),
            trees,
            k,
            out,
        ),
        BinsRef::Sparse(s) => add_walks(
            nf,
            |f, r, c: &mut [u8]| s.fill(f, r, c, 1, BLOCK),
            trees,
            k,
            out,
        ),
    }
}

/// [`add_to_margins`] for raw rows: each block of rows is binned as it is walked, straight
/// into the block's columns (the same bins [`BinnedMatrix::new`] gives them), so no binned
/// matrix is held.
pub fn add_raw_to_margins(binner: &Binner<'_>, trees: &[Tree], k: usize, out: &mut [f32]) {
    if binner.wide() {
        add_raw::<u16>(binner, trees, k, out)
    } else {
        add_raw::<u8>(binner, trees, k, out)
    }
}

/// [`add_raw_to_margins`] with bins of type `T`.
fn add_raw<T>(binner: &Binner<'_>, trees: &[Tree], k: usize, out: &mut [f32])
where
    T: BinValue + Default + Into<u16> + TryFrom<u16>,
    <T as TryFrom<u16>>::Error: std::fmt::Debug,
{
    // the raw values this many blocks ahead are asked for as each block is binned (blocks
    // of one task follow each other)
    const AHEAD: usize = 2;
    let fill = |first: usize, rows: usize, columns: &mut [T]| {
        binner.prefetch(first + AHEAD * BLOCK, BLOCK);
        binner.bin_into(first, rows, columns, 1, BLOCK)
    };
    add_walks(binner.n_features(), fill, trees, k, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::BinSet;
    use crate::tree::{Node, NodeId, Split};

    /// A small deterministic stream (splitmix64).
    struct Stream(u64);

    impl Stream {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % n
        }
    }

    /// A random tree over `nf` features of `nb` bins: unbalanced (a node splits with
    /// chance 3/4 until `max_depth`), both missing directions, the extreme bins 1 and
    /// nb - 1, and categorical splits on feature 0 (and numeric ones sending no bin left)
    /// when `categorical`.
    fn random_tree(
        s: &mut Stream,
        nf: usize,
        nb: u16,
        categorical: bool,
        max_depth: usize,
    ) -> Tree {
        let mut nodes = vec![Node {
            split: None,
            value: 0.0,
            cover: 1.0,
        }];
        let mut open = vec![(0usize, 0usize)];
        while let Some((i, depth)) = open.pop() {
            nodes[i].value = s.next(1000) as f32 / 7.0 - 70.0;
            if depth >= max_depth || s.next(4) == 0 {
                continue;
            }
            let feature = s.next(nf as u64) as usize;
            let rule = if categorical && feature == 0 {
                // a third of the sets end by bin 40, so that rows' bins lie past their words
                let end = if s.next(3) == 0 { nb.min(40) } else { nb };
                SplitRule::Categorical {
                    // bin 0 in the set or not: the node's missing way decides
                    left: BinSet::from_bins((0..end).filter(|_| s.next(2) == 0)),
                }
            } else if categorical && s.next(10) == 0 {
                // sends no bin left: only the missing values, where they go left
                SplitRule::Numeric { bin: 0 }
            } else {
                let bin = match s.next(5) {
                    0 => 1,
                    1 => nb - 1,
                    _ => 1 + s.next(u64::from(nb) - 1) as u16,
                };
                SplitRule::Numeric { bin }
            };
            let (l, r) = (nodes.len(), nodes.len() + 1);
            for _ in 0..2 {
                nodes.push(Node {
                    split: None,
                    value: 0.0,
                    cover: 1.0,
                });
            }
            nodes[i].split = Some(Split {
                feature,
                rule,
                default_left: s.next(2) == 0,
                left: NodeId(l as u32),
                right: NodeId(r as u32),
                gain: 1.0,
            });
            open.push((l, depth + 1));
            open.push((r, depth + 1));
        }
        Tree { nodes }
    }

    #[test]
    fn four_at_a_turn_steps_every_row_once_with_its_own_index() {
        for len in 0..=BLOCK {
            let mut leaf: Vec<u32> = (0..len as u32).map(|r| 1000 + r).collect();
            let seen = std::cell::RefCell::new(vec![0u32; len]);
            four_at_a_turn(&mut leaf, |r, at| {
                seen.borrow_mut()[r] += 1;
                // each row's own position comes with its index
                assert_eq!(at, 1000 + r as u32, "{len} rows");
                2 * at
            });
            assert!(seen.into_inner().iter().all(|&n| n == 1), "{len} rows");
            let want: Vec<u32> = (0..len as u32).map(|r| 2 * (1000 + r)).collect();
            assert_eq!(leaf, want, "{len} rows");
        }
    }

    #[test]
    fn every_walk_reaches_the_leaf_of_the_training_rule() {
        let mut s = Stream(3);
        // rows not a multiple of four: the walks' last turn takes one row at a time
        let (rows, nf) = (1003, 5);
        for (nb, categorical) in [
            (8u16, false),
            (255, false),
            (256, false),
            (300, false),
            (255, true),
            (300, true),
            // sets whose tables pass the budget: such trees walk from the root
            (20_000, true),
        ] {
            // a fifth of the bins missing; rows not a multiple of the block
            let bins: Vec<u16> = (0..rows * nf)
                .map(|_| {
                    if s.next(5) == 0 {
                        0
                    } else {
                        1 + s.next(u64::from(nb) - 1) as u16
                    }
                })
                .collect();
            let matrix = if nb <= 256 {
                let narrow = bins.iter().map(|&b| b as u8).collect();
                BinnedMatrix::from_bins(rows, nf, crate::data::Bins::U8(narrow)).unwrap()
            } else {
                BinnedMatrix::from_bins(rows, nf, crate::data::Bins::U16(bins)).unwrap()
            };
            let k = 2;
            // lone leaves, complete-tree walks (depth <= 10) and pointer walks (deeper)
            let trees: Vec<Tree> = [0, 1, 3, 8, 10, 12, 16, 8]
                .into_iter()
                .map(|d| random_tree(&mut s, nf, nb, categorical, d))
                .collect();
            for tree in &trees {
                let walk = &FlatTree::new(tree, nf).walk;
                let numeric = tree.nodes.iter().all(|n| {
                    n.split
                        .as_ref()
                        .is_none_or(|s| matches!(s.rule, SplitRule::Numeric { bin } if bin > 0))
                });
                // trees with bit sets walk with them, not row by row
                assert_eq!(matches!(walk, Walk::Sets { .. }), !numeric);
            }
            let from_root = trees.iter().filter(|t| {
                let flat = FlatTree::new(t, nf);
                matches!(flat.walk, Walk::Sets { depth, .. } if depth > 0) && flat.top.is_none()
            });
            assert_eq!(from_root.count() > 0, nb == 20_000, "{nb} bins");
            let mut got = vec![0.0f32; rows * k];
            add_to_margins(&matrix, &trees, k, &mut got);
            // the walks of CPUs without the lanes, here too, in each compilation this CPU
            // runs
            let baseline = margins_without_lanes(&matrix, &trees, k, Compiled::Baseline);
            let taken = margins_without_lanes(&matrix, &trees, k, Compiled::taken());
            // a CPU with AVX-512 has AVX2 too (scripts/test.sh sets the variable where
            // /proc/cpuinfo lists AVX-512 and no limit is asked for)
            #[cfg(target_arch = "x86_64")]
            if std::env::var_os("SAPWOOD_REQUIRE_AVX512").is_some() {
                assert_eq!(Compiled::taken(), Compiled::Avx2);
            }
            for r in 0..rows {
                let mut want = [0.0f32; 2];
                for (t, tree) in trees.iter().enumerate() {
                    let leaf = tree.leaf_of_binned(&matrix, r);
                    want[t % k] = ftz(want[t % k] + tree.value(leaf));
                }
                for g in 0..k {
                    for (how, got) in [
                        ("", &got),
                        (" without lanes", &baseline),
                        (" without lanes, as taken", &taken),
                    ] {
                        assert_eq!(
                            got[r * k + g].to_bits(),
                            want[g].to_bits(),
                            "{nb} bins, categorical {categorical}{how}: row {r}, group {g}"
                        );
                    }
                }
            }
        }
    }

    /// [`add_to_margins`] from zero margins with no tree in SIMD lanes.
    fn margins_without_lanes(
        binned: &BinnedMatrix,
        trees: &[Tree],
        k: usize,
        compiled: Compiled,
    ) -> Vec<f32> {
        let nf = binned.n_features();
        let flat: Vec<FlatTree<'_>> = trees.iter().map(|t| FlatTree::new(t, nf)).collect();
        let mut out = vec![0.0f32; binned.n_rows() * k];
        match binned.bins() {
            BinsRef::U8(b) => add_trees(
                nf,
                |f, r, c| transpose(b, nf, f, r, c),
                &flat,
                (&[], compiled),
                k,
                &mut out,
            ),
            BinsRef::U16(b) => add_trees(
                nf,
                |f, r, c| transpose(b, nf, f, r, c),
                &flat,
                (&[], compiled),
                k,
                &mut out,
            ),
            BinsRef::Sparse(_) => panic!("the tests' matrices are row-major"),
        }
        out
    }

    /// A block's margins from the byte lanes and from the complete-tree walk (or the walk
    /// with bit sets), for random trees of every depth the lanes take (exactly that deep:
    /// level 7 is the two-table permute) over 40 features (up to 40 masked loads at a deep
    /// level), bins up to 255, both missing-value directions, numeric trees and trees with
    /// categorical sets (ending below a word, and past bin 64, 128 and 192) and numeric
    /// rules sending no bin left, starting from margins that cross the subnormal range.
    #[test]
    fn byte_lanes_add_the_complete_walks_leaves() {
        let mut s = Stream(11);
        let nf = 40;
        let tiny = f32::MIN_POSITIVE;
        let mut with_sets = 0;
        for (depth, categorical) in (0..=8).flat_map(|d| [(d, false), (d, true)]) {
            for nb in [2u16, 8, 256] {
                let mut tree = random_tree(&mut s, nf, nb, categorical, depth);
                while tree.depth() != depth {
                    tree = random_tree(&mut s, nf, nb, categorical, depth);
                }
                // leaves whose sums with the starting margins below fall under the
                // smallest normal (flushed to +0 by ftz, as training does)
                for (i, n) in tree.nodes.iter_mut().enumerate() {
                    if n.split.is_none() && i % 3 == 0 {
                        n.value = if i % 2 == 0 { -tiny } else { tiny };
                    }
                }
                let flat = FlatTree::new(&tree, nf);
                let Some(bytes) = flat.lane_tree::<u8>() else {
                    panic!("depth {depth}, {nb} bins: a walk the lanes should take");
                };
                with_sets += usize::from(matches!(flat.walk, Walk::Sets { .. }));
                if !lanes::available() {
                    // scripts/test.sh sets it where /proc/cpuinfo lists AVX-512 VBMI
                    assert!(
                        std::env::var_os("SAPWOOD_REQUIRE_AVX512").is_none(),
                        "SAPWOOD_REQUIRE_AVX512 is set but the byte lanes are unavailable"
                    );
                    continue;
                }
                for block in 0..20 {
                    let columns: Vec<u8> = (0..nf * BLOCK)
                        .map(|_| match s.next(6) {
                            0 => 0,
                            1 => (nb - 1) as u8,
                            _ => s.next(u64::from(nb)) as u8,
                        })
                        .collect();
                    let start: [f32; BLOCK] = std::array::from_fn(|r| match (block + r) % 4 {
                        0 => 1.5 * tiny,
                        1 => -1.5 * tiny,
                        _ => s.next(1000) as f32 / 3.0 - 100.0,
                    });
                    let mut leaf = [0u32; BLOCK];
                    flat.leaves(&columns, &mut leaf);
                    let values = match &flat.walk {
                        Walk::Heap { values, .. } => values,
                        Walk::Sets { .. } => &flat.values,
                        _ => panic!("a complete walk or one with sets"),
                    };
                    let mut got = start;
                    // SAFETY: available() (checked above); the columns hold nf * BLOCK bins
                    #[allow(unsafe_code)]
                    unsafe {
                        lanes::add_tree(&bytes, &columns, &mut got)
                    };
                    for r in 0..BLOCK {
                        let want = ftz(start[r] + values[leaf[r] as usize]);
                        assert_eq!(
                            got[r].to_bits(),
                            want.to_bits(),
                            "depth {depth}, {nb} bins, categorical {categorical}, block \
                             {block}, row {r}"
                        );
                    }
                }
            }
        }
        // trees with bit sets were among them
        assert!(with_sets >= 10, "{with_sets} trees with sets");
    }

    /// A block's margins from the 16-bit lanes and from the complete-tree walk, for random
    /// numeric trees of every depth the lanes take (levels 6 and 7 read two and four
    /// tables) over 40 features, bins up to 1,024 and up to 65,535 (a rule's last bin at the
    /// top of the width), both missing-value directions; trees with bit sets are left to
    /// the walk with sets.
    #[test]
    fn word_lanes_add_the_complete_walks_leaves() {
        let mut s = Stream(29);
        let nf = 40;
        for depth in 0..=8 {
            for nb in [300u16, 1024, u16::MAX] {
                let mut tree = random_tree(&mut s, nf, nb, false, depth);
                while tree.depth() != depth {
                    tree = random_tree(&mut s, nf, nb, false, depth);
                }
                let flat = FlatTree::new(&tree, nf);
                let Some(words) = flat.lane_tree::<u16>() else {
                    panic!("depth {depth}, {nb} bins: a walk the lanes should take");
                };
                let mut categorical = random_tree(&mut s, nf, nb, true, 8);
                while !matches!(FlatTree::new(&categorical, nf).walk, Walk::Sets { .. }) {
                    categorical = random_tree(&mut s, nf, nb, true, 8);
                }
                assert!(FlatTree::new(&categorical, nf).lane_tree::<u16>().is_none());
                if !lanes::words_available() {
                    assert!(
                        std::env::var_os("SAPWOOD_REQUIRE_AVX512").is_none(),
                        "SAPWOOD_REQUIRE_AVX512 is set but the 16-bit lanes are unavailable"
                    );
                    continue;
                }
                let Walk::Heap { values, .. } = &flat.walk else {
                    panic!("a complete walk");
                };
                for block in 0..20 {
                    let columns: Vec<u16> = (0..nf * BLOCK)
                        .map(|_| match s.next(6) {
                            0 => 0,
                            1 => nb - 1,
                            _ => s.next(u64::from(nb)) as u16,
                        })
                        .collect();
                    let start: [f32; BLOCK] =
                        std::array::from_fn(|r| (block * 64 + r) as f32 / 3.0 - 100.0);
                    let mut leaf = [0u32; BLOCK];
                    flat.leaves(&columns, &mut leaf);
                    let mut got = start;
                    // SAFETY: words_available() (checked above); nf * BLOCK bins
                    #[allow(unsafe_code)]
                    unsafe {
                        lanes::add_words(&words, &columns, &mut got)
                    };
                    for r in 0..BLOCK {
                        let want = ftz(start[r] + values[leaf[r] as usize]);
                        assert_eq!(
                            got[r].to_bits(),
                            want.to_bits(),
                            "depth {depth}, {nb} bins, block {block}, row {r}"
                        );
                    }
                }
            }
        }
    }

    /// Rules the lanes cannot compare in 8 bits (a hostile model's bin past the bytes,
    /// missing values going right) walk the 16-bit way, and every walk still reaches the
    /// training rule's leaf.
    #[test]
    fn rules_past_a_byte_and_deep_trees_leave_the_lanes() {
        let mut s = Stream(5);
        let nf = 3;
        // bin 256 with missing values right is `b - 1 > 255`: never true of a byte but of
        // the missing bin in 16 bits
        let rules = [
            (300u16, false, false),
            (300, true, true),
            (256, false, false),
            (256, true, true),
            (255, false, true),
        ];
        for (bin, default_left, lanes) in rules {
            let mut tree = random_tree(&mut s, nf, 200, false, 0);
            tree.nodes[0].split = Some(Split {
                feature: 1,
                rule: SplitRule::Numeric { bin },
                default_left,
                left: NodeId(1),
                right: NodeId(2),
                gain: 1.0,
            });
            for v in [1.0, 2.0] {
                tree.nodes.push(Node {
                    split: None,
                    value: v,
                    cover: 1.0,
                });
            }
            let flat = FlatTree::new(&tree, nf);
            assert_eq!(
                flat.lane_tree::<u8>().is_some(),
                lanes,
                "bin {bin}, default_left {default_left}"
            );
            let rows = 300;
            let bins: Vec<u8> = (0..rows * nf).map(|i| (i * 37 % 256) as u8).collect();
            let matrix = BinnedMatrix::from_bins(rows, nf, crate::data::Bins::U8(bins)).unwrap();
            let mut got = vec![0.0f32; rows];
            add_to_margins(&matrix, std::slice::from_ref(&tree), 1, &mut got);
            for (r, g) in got.iter().enumerate() {
                let want = tree.value(tree.leaf_of_binned(&matrix, r));
                assert_eq!(*g, want, "bin {bin}, default_left {default_left}, row {r}");
            }
        }
    }

    /// Trees deeper than the lanes' 8 levels (complete walks 9 and 10 deep, level-by-level
    /// walks deeper, walks with bit sets) take their top 8 levels in lanes and the rest row
    /// by row from where each row ended, and every row reaches the training rule's leaf.
    #[test]
    fn deep_trees_take_their_top_levels_in_lanes() {
        let mut s = Stream(23);
        for nb in [256u16, 1024] {
            deep_trees_in_lanes(&mut s, nb);
        }
    }

    /// [`deep_trees_take_their_top_levels_in_lanes`] over bins `0..nb` (16-bit past 256:
    /// no bit sets in lanes).
    fn deep_trees_in_lanes(s: &mut Stream, nb: u16) {
        let (rows, nf) = (1003, 6);
        let bins: Vec<u16> = (0..rows * nf)
            .map(|_| match s.next(6) {
                0 => 0,
                _ => s.next(u64::from(nb)) as u16,
            })
            .collect();
        let bins = if nb <= 256 {
            crate::data::Bins::U8(bins.iter().map(|&b| b as u8).collect())
        } else {
            crate::data::Bins::U16(bins)
        };
        let matrix = BinnedMatrix::from_bins(rows, nf, bins).unwrap();
        let mut kinds = [0usize; 3];
        let mut trees = Vec::new();
        // walks with sets only over byte bins
        let sets = if nb <= 256 { 3 } else { 0 };
        while kinds[0] < 3 || kinds[1] < 3 || kinds[2] < sets {
            let categorical = nb <= 256 && s.next(2) == 0;
            let max_depth = if s.next(2) == 0 { 10 } else { 20 };
            let tree = random_tree(s, nf, nb, categorical, max_depth);
            if tree.depth() <= lanes::MAX_DEPTH {
                continue;
            }
            let flat = FlatTree::new(&tree, nf);
            let kind = match flat.walk {
                Walk::Heap { .. } => 0,
                Walk::Levels { .. } => 1,
                Walk::Sets { .. } => 2,
                Walk::Rows { .. } => panic!("a walk of in-range features"),
            };
            kinds[kind] += 1;
            let partial = if nb <= 256 {
                flat.lane_tree::<u8>()
                    .as_ref()
                    .is_some_and(ByteTree::partial)
            } else {
                flat.lane_tree::<u16>()
                    .as_ref()
                    .is_some_and(WordTree::partial)
            };
            assert!(
                partial,
                "depth {}: the lanes take the top levels",
                tree.depth()
            );
            trees.push(tree);
        }
        let k = 3;
        let mut got = vec![0.0f32; rows * k];
        add_to_margins(&matrix, &trees, k, &mut got);
        let baseline = margins_without_lanes(&matrix, &trees, k, Compiled::Baseline);
        let taken = margins_without_lanes(&matrix, &trees, k, Compiled::taken());
        for r in 0..rows {
            let mut want = [0.0f32; 3];
            for (t, tree) in trees.iter().enumerate() {
                want[t % k] = ftz(want[t % k] + tree.value(tree.leaf_of_binned(&matrix, r)));
            }
            for g in 0..k {
                for (how, got) in [
                    ("", &got),
                    (" without lanes", &baseline),
                    (" without lanes, as taken", &taken),
                ] {
                    assert_eq!(
                        got[r * k + g].to_bits(),
                        want[g].to_bits(),
                        "{nb} bins{how}: row {r}, group {g}"
                    );
                }
            }
        }
    }

    /// Raw rows binned block by block as they are walked give the margins of rows binned
    /// one value at a time by the cuts' own rules (`bin_value`, `bin_code`): a categorical
    /// column whose levels are in another order than the cuts' (matched by name, an
    /// unknown level missing), numeric features of 0 to 256 thresholds (the lanes' search)
    /// and one of 300 (16-bit bins, the search in parts), thresholds that do not increase
    /// (the binary search), NaN, infinities and the thresholds themselves, rows not a
    /// multiple of the block, and trees with categorical splits, complete walks and deep
    /// ones.
    #[test]
    fn raw_rows_binned_in_blocks_give_the_binned_matrixs_margins() {
        use crate::data::{Column, Cuts, FeatureCuts, FeatureMatrix};
        let mut s = Stream(17);
        let rows = 1000;
        for widest in [254usize, 300] {
            let mut features = vec![FeatureCuts::Categorical {
                levels: vec!["a".into(), "b".into(), "c".into()],
                level_bins: vec![1, 2, 0],
                n_bins: 3,
            }];
            let mut columns = vec![Column::Categorical {
                codes: (0..rows)
                    .map(|_| match s.next(5) {
                        4 => crate::data::MISSING_CATEGORY,
                        c => c as u32,
                    })
                    .collect::<Vec<u32>>()
                    .into(),
                levels: vec!["c".into(), "zz".into(), "a".into(), "b".into()],
            }];
            let sizes: &[usize] = if widest > 254 {
                &[0, 1, 16, 17, 255, 256, widest]
            } else {
                &[0, 1, 16, 17, widest]
            };
            for &n in sizes {
                let thresholds: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 10.0).collect();
                columns.push(Column::Numeric(
                    (0..rows)
                        .map(|_| match s.next(12) {
                            0 => f32::NAN,
                            1 => f32::INFINITY,
                            2 => f32::NEG_INFINITY,
                            3 if n > 0 => thresholds[s.next(n as u64) as usize],
                            _ => s.next(100_000) as f32 / 1000.0 - 50.0,
                        })
                        .collect::<Vec<f32>>()
                        .into(),
                ));
                features.push(FeatureCuts::Numeric { thresholds });
            }
            features.push(FeatureCuts::Numeric {
                thresholds: vec![1.0, 1.0, 0.5],
            });
            columns.push(Column::Numeric(
                (0..rows)
                    .map(|_| s.next(40) as f32 / 10.0 - 1.0)
                    .collect::<Vec<f32>>()
                    .into(),
            ));
            let nf = features.len();
            let names = (0..nf).map(|f| format!("f{f}")).collect();
            let matrix = FeatureMatrix::new(names, columns).unwrap();
            let cuts = Cuts::new(features);
            // the data's codes c, zz, a, b are the cuts' bins 0 (level c), 0 (unknown), 1, 2
            let by_code = [0u16, 0, 1, 2];
            let reference: Vec<u16> = (0..rows)
                .flat_map(|r| {
                    let by_code = &by_code;
                    matrix
                        .columns()
                        .iter()
                        .zip(cuts.features())
                        .map(move |(c, fc)| match (c, fc) {
                            (Column::Numeric(v), FeatureCuts::Numeric { thresholds }) => {
                                FeatureCuts::bin_value(thresholds, v[r])
                            }
                            (Column::Categorical { codes, .. }, _) => {
                                FeatureCuts::bin_code(by_code, codes[r])
                            }
                            _ => unreachable!("kinds match"),
                        })
                })
                .collect();
            let bins = if widest > 254 {
                crate::data::Bins::U16(reference)
            } else {
                crate::data::Bins::U8(reference.iter().map(|&b| b as u8).collect())
            };
            let binned = BinnedMatrix::from_bins(rows, nf, bins).unwrap();
            let binner = Binner::new(&matrix, &cuts).unwrap();
            assert_eq!(binner.wide(), widest > 254);
            let nb = if widest > 254 { 302 } else { 256 };
            let trees: Vec<Tree> = [(0, false), (3, false), (8, false), (8, true), (12, false)]
                .into_iter()
                .map(|(d, categorical)| random_tree(&mut s, nf, nb, categorical, d))
                .collect();
            let k = 2;
            let start: Vec<f32> = (0..rows * k).map(|i| i as f32 / 7.0).collect();
            let mut want = start.clone();
            add_to_margins(&binned, &trees, k, &mut want);
            let mut got = start;
            add_raw_to_margins(&binner, &trees, k, &mut got);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{widest} thresholds: row {}",
                    i / k
                );
            }
        }
    }
}
