//! Path-dependent TreeSHAP (Lundberg et al., "From local explanations to global
//! understanding with explainable AI for trees", 2020, Algorithm 2) for one tree and one row,
//! with the conditioning XGBoost uses for interaction values. Node covers (hessian sums)
//! stand for the training distribution. Written with an explicit stack: a tree may be far
//! deeper than a thread's stack allows recursion, while the path itself never holds more
//! than one element per distinct feature.

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

fn extend(path: &mut Vec<PathElem>, zero: f64, one: f64, feature: usize) {
    let d = path.len();
    path.push(PathElem {
        feature,
        zero,
        one,
        weight: if d == 0 { 1.0 } else { 0.0 },
    });
    for i in (0..d).rev() {
        path[i + 1].weight += one * path[i].weight * (i + 1) as f64 / (d + 1) as f64;
        path[i].weight = zero * path[i].weight * (d - i) as f64 / (d + 1) as f64;
    }
}

fn unwind(path: &mut Vec<PathElem>, i: usize) {
    let d = path.len() - 1;
    let (one, zero) = (path[i].one, path[i].zero);
    let mut next = path[d].weight;
    for j in (0..d).rev() {
        if one != 0.0 {
            let tmp = path[j].weight;
            path[j].weight = next * (d + 1) as f64 / ((j + 1) as f64 * one);
            next = tmp - path[j].weight * zero * (d - j) as f64 / (d + 1) as f64;
        } else {
            path[j].weight = path[j].weight * (d + 1) as f64 / (zero * (d - j) as f64);
        }
    }
    for j in i..d {
        path[j].feature = path[j + 1].feature;
        path[j].zero = path[j + 1].zero;
        path[j].one = path[j + 1].one;
    }
    path.pop();
}

/// The total weight the path would have with element `i` unwound.
fn unwound_sum(path: &[PathElem], i: usize) -> f64 {
    let d = path.len() - 1;
    let (one, zero) = (path[i].one, path[i].zero);
    let mut next = path[d].weight;
    let mut total = 0.0;
    for j in (0..d).rev() {
        if one != 0.0 {
            let tmp = next * (d + 1) as f64 / ((j + 1) as f64 * one);
            total += tmp;
            next = path[j].weight - tmp * zero * (d - j) as f64 / (d + 1) as f64;
        } else if zero != 0.0 {
            total += path[j].weight / zero * (d + 1) as f64 / (d - j) as f64;
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
struct Frame {
    node: NodeId,
    /// the parent's path, after unwinding the split feature if it repeated
    path: Vec<PathElem>,
    zero: f64,
    one: f64,
    feature: usize,
    condition_fraction: f64,
}

/// Adds the SHAP values of `tree` for one row to `phi` (one per feature; the bias is the
/// caller's): `goes_left(node)` says which way the row goes at an internal node.
pub fn tree_shap(
    tree: &Tree,
    goes_left: impl Fn(NodeId) -> bool,
    condition: Condition,
    phi: &mut [f64],
) {
    let cover = |id: NodeId| tree.nodes[id.index()].cover;
    let mut stack = vec![Frame {
        node: NodeId::ROOT,
        path: Vec::new(),
        zero: 1.0,
        one: 1.0,
        feature: usize::MAX,
        condition_fraction: 1.0,
    }];
    while let Some(f) = stack.pop() {
        if f.condition_fraction == 0.0 {
            continue;
        }
        let mut path = f.path;
        // a conditioned feature never enters the path: its effect is in the fractions
        if condition.feature() != Some(f.feature) || f.feature == usize::MAX {
            extend(&mut path, f.zero, f.one, f.feature);
        }
        let node = &tree.nodes[f.node.index()];
        let Some(split) = &node.split else {
            let value = node.value as f64;
            for i in 1..path.len() {
                let w = unwound_sum(&path, i);
                let e = path[i];
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
        if let Some(k) = path.iter().position(|e| e.feature == split.feature) {
            in_zero = path[k].zero;
            in_one = path[k].one;
            unwind(&mut path, k);
        }
        let parent = cover(f.node);
        let share = |c: NodeId| if parent > 0.0 { cover(c) / parent } else { 0.0 };
        let (hot_zero, cold_zero) = (share(hot), share(cold));
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
            path: path.clone(),
            zero: cold_zero * in_zero,
            one: 0.0,
            feature: split.feature,
            condition_fraction: cold_cf,
        });
        stack.push(Frame {
            node: hot,
            path,
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
    // children come after their parents, so one pass in node order suffices
    let mut weight = vec![0.0f64; tree.nodes.len()];
    weight[0] = 1.0;
    let mut e = 0.0;
    for (i, node) in tree.nodes.iter().enumerate() {
        match &node.split {
            None => e += weight[i] * node.value as f64,
            Some(s) => {
                let parent = node.cover;
                let w_parent = weight[i];
                for c in [s.left, s.right] {
                    let share = if parent > 0.0 {
                        tree.nodes[c.index()].cover / parent
                    } else {
                        0.0
                    };
                    if let Some(w) = weight.get_mut(c.index()) {
                        *w = w_parent * share;
                    }
                }
            }
        }
    }
    e
}
