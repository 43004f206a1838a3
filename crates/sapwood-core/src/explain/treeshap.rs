//! Path-dependent TreeSHAP (Lundberg et al., "From local explanations to global
//! understanding with explainable AI for trees", 2020, Algorithm 2) for one tree and one row,
//! with the conditioning XGBoost uses for interaction values. Node covers (hessian sums)
//! stand for the training distribution. Written with an explicit stack: a tree may be far
//! deeper than a thread's stack allows recursion, while the path itself never holds more
//! than one element per distinct feature. Paths live in one buffer reused for every tree
//! and row ([`Scratch`]), so explaining allocates nothing per node.

use crate::tree::{NodeId, Tree};

/// One element of the path of distinct features from the root to the current node.
#[derive(Debug, Clone, Copy)]
struct PathElem {
    /// The feature, or `usize::MAX` for the path's root element.
    feature: usize,
    /// Fraction of the training rows (by cover) that the path keeps when the feature is
    /// left out.
    zero: f64,
    /// Whether the row itself follows this path (1) or not (0).
    one: f64,
    /// The permutation weight.
    weight: f64,
}

/// 1 / n for the small integers of path lengths, read from a table: explaining spends most
/// of its time in these loops, and a multiplication costs a fraction of a division.
#[inline]
fn recip(n: usize) -> f64 {
    const N: usize = 128;
    static TABLE: std::sync::LazyLock<[f64; N]> = std::sync::LazyLock::new(|| {
        let mut t = [0.0; N];
        for (i, v) in t.iter_mut().enumerate().skip(1) {
            *v = 1.0 / i as f64;
        }
        t
    });
    if n < N {
        TABLE[n]
    } else {
        1.0 / n as f64
    }
}

/// Extends the path held in `path[..d]` by one element, written at `path[d]`.
fn extend(path: &mut [PathElem], d: usize, zero: f64, one: f64, feature: usize) {
    path[d] = PathElem {
        feature,
        zero,
        one,
        weight: if d == 0 { 1.0 } else { 0.0 },
    };
    let inv = recip(d + 1);
    for i in (0..d).rev() {
        path[i + 1].weight += one * path[i].weight * ((i + 1) as f64 * inv);
        path[i].weight = zero * path[i].weight * ((d - i) as f64 * inv);
    }
}

/// Removes element `i` from the path `path` (its whole length); the path is one shorter.
fn unwind(path: &mut [PathElem], i: usize) {
    let d = path.len() - 1;
    let (one, zero) = (path[i].one, path[i].zero);
    let scale = (d + 1) as f64;
    let inv = recip(d + 1);
    let mut next = path[d].weight;
    if one != 0.0 {
        let inv_one = 1.0 / one;
        for j in (0..d).rev() {
            let tmp = path[j].weight;
            path[j].weight = next * scale * inv_one * recip(j + 1);
            next = tmp - path[j].weight * zero * ((d - j) as f64 * inv);
        }
    } else {
        let inv_zero = 1.0 / zero;
        for j in (0..d).rev() {
            path[j].weight = path[j].weight * scale * inv_zero * recip(d - j);
        }
    }
    for j in i..d {
        path[j].feature = path[j + 1].feature;
        path[j].zero = path[j + 1].zero;
        path[j].one = path[j + 1].one;
    }
}

/// The total weight the path would have with element `i` unwound.
fn unwound_sum(path: &[PathElem], i: usize) -> f64 {
    let d = path.len() - 1;
    let (one, zero) = (path[i].one, path[i].zero);
    let scale = (d + 1) as f64;
    let mut total = 0.0;
    if one != 0.0 {
        let inv = recip(d + 1);
        let inv_one = 1.0 / one;
        let mut next = path[d].weight;
        for j in (0..d).rev() {
            let tmp = next * scale * inv_one * recip(j + 1);
            total += tmp;
            next = path[j].weight - tmp * zero * ((d - j) as f64 * inv);
        }
    } else if zero != 0.0 {
        let inv_zero = 1.0 / zero;
        for j in (0..d).rev() {
            total += path[j].weight * inv_zero * scale * recip(d - j);
        }
    }
    total
}

/// How one feature is conditioned for interaction values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Plain SHAP values.
    None,
    /// The feature is known (its split follows the row).
    On(usize),
    /// The feature is unknown (its split follows the covers).
    Off(usize),
}

impl Condition {
    fn feature(self) -> Option<usize> {
        match self {
            Condition::None => None,
            Condition::On(f) | Condition::Off(f) => Some(f),
        }
    }
}

/// A pending visit of a node.
#[derive(Debug, Clone, Copy)]
struct Frame {
    node: NodeId,
    /// where the parent's path (after unwinding the split feature if it repeated) lies in
    /// the scratch buffer, and its length; the node's own path goes right after it
    parent: usize,
    parent_len: usize,
    zero: f64,
    one: f64,
    feature: usize,
    condition_fraction: f64,
}

/// Buffers one thread reuses for every tree and row: the paths of the nodes on the way to
/// the current one, back to back (a node's children copy its path after it, and a subtree
/// only writes past its root's path, so a sibling waiting on the stack finds its parent's
/// path intact), and the stack of pending visits.
#[derive(Debug, Default)]
pub struct Scratch {
    path: Vec<PathElem>,
    stack: Vec<Frame>,
}

/// Each node's share of its parent's cover (the root's is 1; 0 under a parent without
/// cover): computed once per tree, not once per row.
pub fn cover_shares(tree: &Tree) -> Vec<f64> {
    let mut shares = vec![1.0f64; tree.nodes.len()];
    for node in &tree.nodes {
        if let Some(s) = &node.split {
            let parent = node.cover;
            for c in [s.left, s.right] {
                let share = if parent > 0.0 {
                    tree.nodes[c.index()].cover / parent
                } else {
                    0.0
                };
                if let Some(v) = shares.get_mut(c.index()) {
                    *v = share;
                }
            }
        }
    }
    shares
}

/// Adds the SHAP values of `tree` for one row to `phi` (one per feature; the bias is the
/// caller's): `goes_left(node)` says which way the row goes at an internal node, `shares`
/// are the tree's [`cover_shares`].
pub fn tree_shap(
    tree: &Tree,
    shares: &[f64],
    goes_left: impl Fn(NodeId) -> bool,
    condition: Condition,
    phi: &mut [f64],
    scratch: &mut Scratch,
) {
    let Scratch { path, stack } = scratch;
    stack.clear();
    stack.push(Frame {
        node: NodeId::ROOT,
        parent: 0,
        parent_len: 0,
        zero: 1.0,
        one: 1.0,
        feature: usize::MAX,
        condition_fraction: 1.0,
    });
    let blank = PathElem {
        feature: usize::MAX,
        zero: 0.0,
        one: 0.0,
        weight: 0.0,
    };
    while let Some(f) = stack.pop() {
        if f.condition_fraction == 0.0 {
            continue;
        }
        let start = f.parent + f.parent_len;
        if path.len() < start + f.parent_len + 1 {
            path.resize(start + f.parent_len + 1, blank);
        }
        path.copy_within(f.parent..start, start);
        let mut len = f.parent_len;
        // a conditioned feature never enters the path: its effect is in the fractions
        if condition.feature() != Some(f.feature) || f.feature == usize::MAX {
            extend(&mut path[start..], len, f.zero, f.one, f.feature);
            len += 1;
        }
        let here = &mut path[start..start + len];
        let node = &tree.nodes[f.node.index()];
        let Some(split) = &node.split else {
            let value = node.value as f64;
            for i in 1..here.len() {
                let w = unwound_sum(here, i);
                let e = here[i];
                phi[e.feature] += w * (e.one - e.zero) * value * f.condition_fraction;
            }
            continue;
        };
        let (hot, cold) = if goes_left(f.node) {
            (split.left, split.right)
        } else {
            (split.right, split.left)
        };
        let (mut in_zero, mut in_one) = (1.0, 1.0);
        if let Some(k) = here.iter().position(|e| e.feature == split.feature) {
            in_zero = here[k].zero;
            in_one = here[k].one;
            unwind(here, k);
            len -= 1;
        }
        let (hot_zero, cold_zero) = (shares[hot.index()], shares[cold.index()]);
        let (mut hot_cf, mut cold_cf) = (f.condition_fraction, f.condition_fraction);
        match condition {
            Condition::On(c) if c == split.feature => cold_cf = 0.0,
            Condition::Off(c) if c == split.feature => {
                hot_cf *= hot_zero;
                cold_cf *= cold_zero;
            }
            _ => {}
        }
        stack.push(Frame {
            node: cold,
            parent: start,
            parent_len: len,
            zero: cold_zero * in_zero,
            one: 0.0,
            feature: split.feature,
            condition_fraction: cold_cf,
        });
        stack.push(Frame {
            node: hot,
            parent: start,
            parent_len: len,
            zero: hot_zero * in_zero,
            one: in_one,
            feature: split.feature,
            condition_fraction: hot_cf,
        });
    }
}

/// The tree's expected value over the training rows: each leaf weighted by the product of
/// the cover shares on its path (the same shares the SHAP values use, so the values add up
/// to the prediction even where a child's cover is not exactly its part of the parent's).
pub fn expected_value(tree: &Tree) -> f64 {
    let shares = cover_shares(tree);
    // children come after their parents, so one pass in node order suffices
    let mut weight = vec![0.0f64; tree.nodes.len()];
    weight[0] = 1.0;
    let mut e = 0.0;
    for (i, node) in tree.nodes.iter().enumerate() {
        match &node.split {
            None => e += weight[i] * node.value as f64,
            Some(s) => {
                let w_parent = weight[i];
                for c in [s.left, s.right] {
                    if let Some(w) = weight.get_mut(c.index()) {
                        *w = w_parent * shares[c.index()];
                    }
                }
            }
        }
    }
    e
}
