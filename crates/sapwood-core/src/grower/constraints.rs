//! What a tree may do besides the split math: monotone bounds on leaf weights (LightGBM's
//! `basic` and `intermediate` methods), interaction sets, column sampling per level and per
//! node, and extra trees' random thresholds.
//!
//! Every decision here is a pure function of the tree grown so far (identical on every
//! worker: each applies the same agreed splits) and of hashes of (seed, stream, tree, node,
//! feature), never of the number of workers or of the backend.

use crate::data::cuts::Cuts;
use crate::detmath;
use crate::error::{Error, Result};
use crate::hash::HashKey;
use crate::hist::HistBin;
use crate::params::{resolve_interactions, MonotoneMethod, Params};
use crate::split::{BinSet, SplitRule};
use crate::tree::{NodeId, Tree};

/// The rules of every tree of a training run, resolved against its features.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TreeRules {
    /// Direction of each feature (+1, -1, 0); empty when no feature is constrained.
    pub monotone: Vec<i8>,
    /// How monotone bounds are kept.
    pub method: MonotoneMethod,
    /// Sets of features that may share a path (features in no set given are a set of
    /// their own); empty for no constraint.
    pub interactions: Vec<Vec<usize>>,
    /// Fraction of the tree's features sampled per depth level.
    pub bylevel: f64,
    /// Fraction of the level's features sampled per node.
    pub bynode: f64,
    /// Sampling weight of each feature; empty for equal weights.
    pub weights: Vec<f64>,
    /// One random threshold per numeric feature and node.
    pub extra_trees: bool,
}

impl TreeRules {
    /// No rule beyond the split parameters.
    pub fn none() -> Self {
        TreeRules {
            bylevel: 1.0,
            bynode: 1.0,
            ..Default::default()
        }
    }

    /// The rules of `params` for features `names` laid out by `cuts`: a constraint naming a
    /// feature that is not there, or constraining a categorical one, is an error naming it.
    pub fn from_params(params: &Params, names: &[String], cuts: &Cuts) -> Result<Self> {
        let n = cuts.n_features();
        let mut monotone = params.monotone_constraints.resolve(names)?;
        for (f, &d) in monotone.iter().enumerate() {
            if d != 0 && cuts.feature(f).is_categorical() {
                return Err(Error::param(
                    "monotone_constraints",
                    format!(
                        "feature `{}` is categorical: only numeric features can be monotone",
                        names[f]
                    ),
                ));
            }
        }
        if monotone.iter().all(|&d| d == 0) {
            monotone.clear();
        }
        let mut interactions = resolve_interactions(&params.interaction_constraints, names)?;
        if !interactions.is_empty() {
            let mut listed = vec![false; n];
            for f in interactions.iter().flatten() {
                listed[*f] = true;
            }
            interactions.extend((0..n).filter(|&f| !listed[f]).map(|f| vec![f]));
        }
        if !params.feature_weights.is_empty() && params.feature_weights.len() != n {
            return Err(Error::param(
                "feature_weights",
                format!(
                    "{} weights given for {n} features",
                    params.feature_weights.len()
                ),
            ));
        }
        Ok(TreeRules {
            monotone,
            method: params.monotone_constraints_method,
            interactions,
            bylevel: params.colsample_bylevel,
            bynode: params.colsample_bynode,
            weights: params.feature_weights.clone(),
            extra_trees: params.extra_trees,
        })
    }

    /// Whether some feature is monotone.
    pub fn has_monotone(&self) -> bool {
        !self.monotone.is_empty()
    }

    /// Whether leaves are bounded by their adjacent leaves (`intermediate`).
    pub fn intermediate(&self) -> bool {
        self.has_monotone() && self.method == MonotoneMethod::Intermediate
    }

    /// Whether a node's features can differ from the tree's.
    fn per_node_features(&self) -> bool {
        self.bylevel < 1.0 || self.bynode < 1.0 || !self.interactions.is_empty()
    }
}

/// `rate` of `candidates` (at least one), drawn without replacement by hash of
/// (key, salt | feature); with `weights`, each feature's chance follows its weight
/// (Efraimidis–Spirakis keys) and weight-0 features are never drawn. Ascending.
pub fn sample(
    candidates: &[usize],
    rate: f64,
    weights: &[f64],
    key: HashKey,
    salt: u64,
) -> Vec<usize> {
    let n = candidates.len();
    if weights.is_empty() {
        if rate >= 1.0 {
            return candidates.to_vec();
        }
        let k = ((rate * n as f64).round() as usize).clamp(1.min(n), n);
        let mut f = candidates.to_vec();
        f.sort_by_key(|&j| (key.hash32(salt | j as u64), j));
        f.truncate(k);
        f.sort_unstable();
        return f;
    }
    let mut eligible: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&j| weights[j] > 0.0)
        .collect();
    if rate >= 1.0 {
        return eligible;
    }
    let k = ((rate * n as f64).round() as usize)
        .clamp(1, n.max(1))
        .min(eligible.len());
    // u^(1/w) orders like ln(u)/w; the largest k are a weighted draw
    let score = |j: usize| {
        let u = (key.hash32(salt | j as u64) as f64 + 1.0) / 4_294_967_296.0;
        detmath::ln(u) / weights[j]
    };
    eligible.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
    eligible.truncate(k);
    eligible.sort_unstable();
    eligible
}

/// Where a node's rows lie along one feature it descends from a split of.
#[derive(Debug, Clone, PartialEq)]
enum Extent {
    /// Value bins lo..=hi, and whether rows missing the feature may be here.
    Bins(u16, u16, bool),
    /// These level bins (bin 0: rows missing the feature).
    Levels(BinSet),
}

impl Extent {
    /// Whether some value (not a missing one) lies in both.
    fn values_meet(&self, other: &Extent) -> bool {
        match (self, other) {
            (Extent::Bins(a, b, _), Extent::Bins(c, d, _)) => a <= d && c <= b,
            (Extent::Levels(a), Extent::Levels(b)) => a.iter().any(|l| l > 0 && b.contains(l)),
            _ => true,
        }
    }

    /// Whether rows missing the feature may lie in both.
    fn both_missing(&self, other: &Extent) -> bool {
        let missing = |e: &Extent| match e {
            Extent::Bins(_, _, m) => *m,
            Extent::Levels(s) => s.contains(0),
        };
        missing(self) && missing(other)
    }
}

/// A node's extents along the features it descends from splits of, by feature.
type Extents = Vec<(usize, Extent)>;

/// What the rules track of one node.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Depth (the root is 0).
    pub depth: usize,
    /// Global rows.
    pub count: u64,
    /// (Σg, Σh) in histogram units.
    pub sums: HistBin,
    /// Bounds on the weights of this node's children.
    pub bounds: [f64; 2],
    /// The node's weight (before shrinkage).
    pub weight: f64,
    /// Σ of its rows' squared gradients ([`crate::quantise::square_term`]), where
    /// categorical nodes measure their noise; 0 elsewhere.
    pub square_sum: i64,
    /// Features split on from the root to here, ascending.
    used: Vec<usize>,
    /// Extents along the features split on (intermediate method only), by feature.
    extents: Extents,
}

impl NodeInfo {
    /// The root's record.
    pub fn root(count: u64, sums: HistBin, weight: f64) -> Self {
        NodeInfo {
            depth: 0,
            count,
            sums,
            bounds: [f64::NEG_INFINITY, f64::INFINITY],
            weight,
            square_sum: 0,
            used: Vec::new(),
            extents: Vec::new(),
        }
    }
}

/// The rules applied to one tree as it grows.
#[derive(Debug)]
pub struct TreeState<'r> {
    rules: &'r TreeRules,
    /// One record per node of the tree, by id.
    pub info: Vec<NodeInfo>,
    /// the tree's features
    features: Vec<usize>,
    level_key: HashKey,
    node_key: HashKey,
    /// extra trees' key
    pub extra_key: Option<HashKey>,
}

impl<'r> TreeState<'r> {
    /// The state of tree `tree_index` over `features`.
    pub fn new(rules: &'r TreeRules, features: &[usize], seed: u64, tree_index: u32) -> Self {
        use crate::hash::Stream;
        TreeState {
            rules,
            info: Vec::new(),
            features: features.to_vec(),
            level_key: HashKey::new(seed, Stream::ColSampleLevel, tree_index),
            node_key: HashKey::new(seed, Stream::ColSampleNode, tree_index),
            extra_key: rules
                .extra_trees
                .then(|| HashKey::new(seed, Stream::ExtraTrees, tree_index)),
        }
    }

    /// The rules.
    pub fn rules(&self) -> &TreeRules {
        self.rules
    }

    /// The features node `id` may split on, among `evaluable` (those whose histogram sums
    /// are global on this worker): the level's and the node's samples of the tree's
    /// features, within the interaction sets its path allows.
    pub fn node_features(&self, id: NodeId, evaluable: &[usize]) -> Vec<usize> {
        if !self.rules.per_node_features() {
            return evaluable.to_vec();
        }
        let info = &self.info[id.index()];
        let w = &self.rules.weights;
        let level = sample(
            &self.features,
            self.rules.bylevel,
            w,
            self.level_key,
            (info.depth as u64) << 32,
        );
        let node = sample(
            &level,
            self.rules.bynode,
            w,
            self.node_key,
            (id.0 as u64) << 32,
        );
        // the sets that hold every feature of the path so far
        let open: Vec<&Vec<usize>> = self
            .rules
            .interactions
            .iter()
            .filter(|set| info.used.iter().all(|f| set.binary_search(f).is_ok()))
            .collect();
        let allowed = |f: usize| {
            self.rules.interactions.is_empty() || open.iter().any(|s| s.binary_search(&f).is_ok())
        };
        evaluable
            .iter()
            .copied()
            .filter(|&f| allowed(f) && node.binary_search(&f).is_ok())
            .collect()
    }

    /// Records the children of `parent`, split on `feature` by `rule`, with their weights
    /// (already within the parent's bounds and ordered as the feature's direction asks).
    pub fn add_children(
        &mut self,
        cuts: &Cuts,
        parent: NodeId,
        (feature, rule, default_left): (usize, &SplitRule, bool),
        (left_sums, right_sums): (HistBin, HistBin),
        (left_count, right_count): (u64, u64),
        (wl, wr): (f64, f64),
    ) {
        let p = &self.info[parent.index()];
        let mut used = p.used.clone();
        if let Err(i) = used.binary_search(&feature) {
            used.insert(i, feature);
        }
        let sign = self.rules.monotone.get(feature).copied().unwrap_or(0);
        let [lo, hi] = p.bounds;
        // basic: the children of a monotone split part at the midpoint of their weights;
        // intermediate: their bounds are recomputed from their neighbours before use
        let (lb, rb) = if sign == 0 {
            ([lo, hi], [lo, hi])
        } else if self.rules.intermediate() {
            if sign > 0 {
                ([lo, hi.min(wr)], [lo.max(wl), hi])
            } else {
                ([lo.max(wr), hi], [lo, hi.min(wl)])
            }
        } else {
            let mid = (wl + wr) / 2.0;
            if sign > 0 {
                ([lo, hi.min(mid)], [lo.max(mid), hi])
            } else {
                ([lo.max(mid), hi], [lo, hi.min(mid)])
            }
        };
        let (le, re) = if self.rules.intermediate() {
            child_extents(&p.extents, cuts, feature, rule, default_left)
        } else {
            (Vec::new(), Vec::new())
        };
        let depth = p.depth + 1;
        for (sums, count, bounds, weight, extents) in [
            (left_sums, left_count, lb, wl, le),
            (right_sums, right_count, rb, wr, re),
        ] {
            self.info.push(NodeInfo {
                depth,
                count,
                sums,
                bounds,
                weight,
                square_sum: 0,
                used: used.clone(),
                extents,
            });
        }
    }

    /// Intermediate method: the bounds of leaf `id` from the weights of the current leaves
    /// adjacent to it along a monotone feature (`is_leaf` tells which nodes are leaves).
    pub fn adjacent_bounds(&self, id: NodeId, is_leaf: impl Fn(usize) -> bool) -> [f64; 2] {
        let me = &self.info[id.index()];
        let (mut lo, mut hi) = (f64::NEG_INFINITY, f64::INFINITY);
        for (q, other) in self.info.iter().enumerate() {
            if q == id.index() || !is_leaf(q) {
                continue;
            }
            for (f, other_below) in adjacency(&me.extents, &other.extents) {
                let sign = self.rules.monotone[f];
                if sign == 0 {
                    continue;
                }
                // a neighbour below along an increasing feature is a floor, and so on
                if other_below == (sign > 0) {
                    lo = lo.max(other.weight);
                } else {
                    hi = hi.min(other.weight);
                }
            }
        }
        [lo, hi]
    }
}

/// The extents of the two children of a node with `extents`, split on `feature` by `rule`.
fn child_extents(
    extents: &[(usize, Extent)],
    cuts: &Cuts,
    feature: usize,
    rule: &SplitRule,
    default_left: bool,
) -> (Extents, Extents) {
    let own = extents
        .iter()
        .find(|(f, _)| *f == feature)
        .map(|(_, e)| e.clone());
    let (l, r) = match rule {
        SplitRule::Numeric { bin } => {
            let (lo, hi, m) = match own {
                Some(Extent::Bins(lo, hi, m)) => (lo, hi, m),
                _ => (1, u16::MAX, true),
            };
            (
                Extent::Bins(lo, *bin, m && default_left),
                Extent::Bins(bin + 1, hi, m && !default_left),
            )
        }
        SplitRule::Categorical { .. } => {
            let n = cuts.feature(feature).n_bins() as u16;
            let had = |b: u16| match &own {
                Some(Extent::Levels(s)) => s.contains(b),
                _ => true,
            };
            let side = |left: bool| {
                Extent::Levels(BinSet::from_bins(
                    (0..n).filter(|&b| had(b) && rule.goes_left(b, default_left) == left),
                ))
            };
            (side(true), side(false))
        }
    };
    let with = |e: Extent| {
        let mut v: Extents = extents
            .iter()
            .filter(|(f, _)| *f != feature)
            .cloned()
            .collect();
        let i = v.partition_point(|(f, _)| *f < feature);
        v.insert(i, (feature, e));
        v
    };
    (with(l), with(r))
}

/// The numeric features along which two leaves face each other: a row of `a` and a row of
/// `b` differ in that feature's value only (every other feature shares a value or is
/// missing in both). Each comes with whether `b` lies below `a` along it.
fn adjacency(a: &[(usize, Extent)], b: &[(usize, Extent)]) -> Vec<(usize, bool)> {
    // features whose values are apart; `hard`: apart even counting missing values
    let mut apart: Vec<(usize, bool)> = Vec::new();
    let mut hard: Option<usize> = None;
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (fa, ea) = &a[i];
        let (fb, eb) = &b[j];
        if fa < fb {
            i += 1;
            continue;
        }
        if fb < fa {
            j += 1;
            continue;
        }
        if !ea.values_meet(eb) {
            if !ea.both_missing(eb) {
                if hard.is_some() {
                    return Vec::new();
                }
                hard = Some(*fa);
            }
            match (ea, eb) {
                (Extent::Bins(lo, ..), Extent::Bins(_, bhi, _)) => apart.push((*fa, bhi < lo)),
                // apart along a categorical feature: never comparable
                _ if !ea.both_missing(eb) => return Vec::new(),
                _ => {}
            }
        }
        i += 1;
        j += 1;
    }
    match hard {
        // the one feature apart for every row decides; the others meet through missing
        Some(f) => apart.into_iter().filter(|(g, _)| *g == f).collect(),
        None => apart,
    }
}

/// Makes the leaf values of `tree` monotone again after they were refit (from exact sums
/// after low-bit histograms, or to quantiles of residuals): the splits are replayed in the
/// order they were made, each child's value held within the bounds the method gives it and,
/// where a constrained pair came out of order, both set to their midpoint.
pub fn enforce_monotone(tree: &mut Tree, cuts: &Cuts, rules: &TreeRules) {
    if !rules.has_monotone() || tree.nodes.len() < 3 {
        return;
    }
    let mut state = TreeState::new(rules, &[], 0, 0);
    let root = &tree.nodes[0];
    state.info = vec![NodeInfo::root(0, [0, 0], root.value as f64)];
    // children are numbered when their parent splits: ascending left-child order is the
    // order the splits were made in
    let mut order: Vec<NodeId> = (0..tree.nodes.len() as u32)
        .map(NodeId)
        .filter(|id| tree.nodes[id.index()].split.is_some())
        .collect();
    order.sort_by_key(|id| tree.nodes[id.index()].split.as_ref().map(|s| s.left));
    let mut slot = vec![usize::MAX; tree.nodes.len()];
    slot[0] = 0;
    let mut leaf = vec![true];
    for id in order {
        let s = tree.nodes[id.index()].split.clone().expect("internal node");
        let p = slot[id.index()];
        if rules.intermediate() {
            let b = state.adjacent_bounds(NodeId(p as u32), |q| leaf[q]);
            state.info[p].bounds = b;
        }
        let b = state.info[p].bounds;
        let mut wl = crate::split::bounded(tree.nodes[s.left.index()].value as f64, b);
        let mut wr = crate::split::bounded(tree.nodes[s.right.index()].value as f64, b);
        let sign = rules.monotone.get(s.feature).copied().unwrap_or(0);
        if (sign > 0 && wl > wr) || (sign < 0 && wl < wr) {
            let mid = (wl + wr) / 2.0;
            (wl, wr) = (mid, mid);
        }
        state.add_children(
            cuts,
            NodeId(p as u32),
            (s.feature, &s.rule, s.default_left),
            ([0, 0], [0, 0]),
            (0, 0),
            (wl, wr),
        );
        leaf[p] = false;
        leaf.extend([true, true]);
        slot[s.left.index()] = state.info.len() - 2;
        slot[s.right.index()] = state.info.len() - 1;
    }
    for (i, node) in tree.nodes.iter_mut().enumerate() {
        if node.split.is_none() {
            node.value = state.info[slot[i]].weight as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::Stream;

    #[test]
    fn weighted_draws_follow_the_weights_and_never_take_weight_zero() {
        let weights = [1.0, 1.0, 2.0, 0.0];
        let mut seen = [0usize; 4];
        let n = 20_000;
        for t in 0..n {
            let key = HashKey::new(7, Stream::ColSampleNode, t);
            for f in sample(&[0, 1, 2, 3], 0.25, &weights, key, 0) {
                seen[f] += 1;
            }
        }
        assert_eq!(seen.iter().sum::<usize>(), n as usize);
        assert_eq!(seen[3], 0);
        for (f, want) in [(0, 0.25), (1, 0.25), (2, 0.5)] {
            let got = seen[f] as f64 / n as f64;
            assert!((got - want).abs() < 0.015, "feature {f}: {got} vs {want}");
        }
        // a fraction of 1 keeps every feature of positive weight
        let key = HashKey::new(7, Stream::ColSampleNode, 0);
        assert_eq!(sample(&[0, 1, 2, 3], 1.0, &weights, key, 0), [0, 1, 2]);
        assert_eq!(sample(&[0, 1, 2, 3], 1.0, &[], key, 0), [0, 1, 2, 3]);
    }

    #[test]
    fn leaves_face_each_other_only_along_one_feature() {
        let bins = |lo, hi, m| Extent::Bins(lo, hi, m);
        // apart along feature 0 only: adjacent, b below a
        let a = vec![(0, bins(5, 9, false)), (1, bins(1, 4, false))];
        let b = vec![(0, bins(1, 4, false)), (1, bins(3, 8, false))];
        assert_eq!(adjacency(&a, &b), [(0, true)]);
        assert_eq!(adjacency(&b, &a), [(0, false)]);
        // apart along two features: no row of one differs from a row of the other in one
        let c = vec![(0, bins(1, 4, false)), (1, bins(6, 8, false))];
        assert!(adjacency(&a, &c).is_empty());
        // ... unless both hold the rows missing the second feature
        let a_missing = vec![(0, bins(5, 9, false)), (1, bins(1, 4, true))];
        let c_missing = vec![(0, bins(1, 4, false)), (1, bins(6, 8, true))];
        assert_eq!(adjacency(&a_missing, &c_missing), [(0, true)]);
        // a feature only one of them was split on overlaps everything
        let d = vec![(1, bins(1, 2, false))];
        let e = vec![(0, bins(3, 3, false))];
        assert!(adjacency(&d, &e).is_empty());
        // apart along a categorical feature: never comparable
        let f = vec![
            (0, bins(5, 9, false)),
            (2, Extent::Levels(BinSet::from_bins([1]))),
        ];
        let g = vec![
            (0, bins(1, 4, false)),
            (2, Extent::Levels(BinSet::from_bins([2]))),
        ];
        assert!(adjacency(&f, &g).is_empty());
    }
}
