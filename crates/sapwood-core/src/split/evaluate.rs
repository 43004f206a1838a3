//! The best split of one node from its integer histogram.

use super::gain::{leaf_gain, leaf_gain_at, leaf_weight, CatNoise, SplitParams, MIN_SPLIT_GAIN};
use super::screen::{self, Screen};
use super::{pick, BinSet, SplitCandidate, SplitRule};
use crate::data::cuts::{Cuts, FeatureCuts};
use crate::hash::HashKey;
use crate::hist::{add, HistBin};
use crate::occupancy;

/// Factors from histogram integers to real gradient and hessian units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Units {
    /// Real value of one gradient unit.
    pub grad: f64,
    /// Real value of one hessian unit.
    pub hess: f64,
}

/// What split finding knows about a node.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    /// The node's histogram over all features.
    pub hist: &'a [HistBin],
    /// The node's (Σg, Σh).
    pub sums: [i64; 2],
    /// Global rows in the node.
    pub count: u64,
    /// A bit per bin of `hist`, set wherever a bin may be other than [0, 0]
    /// ([`crate::occupancy`]): the scans then pass over the others unread. `None`: read
    /// every bin.
    pub occupied: Option<&'a [u64]>,
    /// What the node measured of the noise within its categorical levels
    /// ([`CatNoise::Measured`]); `None`: the fitted estimate.
    pub noise: Option<LevelNoise<'a>>,
}

/// What a node measured of the noise within its categorical levels.
#[derive(Debug, Clone, Copy)]
pub struct LevelNoise<'a> {
    /// Σg² over the node's rows, in real units.
    pub square_sum: f64,
    /// Each feature's noise per hessian unit measured at the root ([`within_variance`];
    /// NaN where not measured): a node's own is at least [`ROOT_NOISE_FLOOR`] of it.
    pub root: &'a [f64],
}

/// What constrains one node's split besides the parameters: monotone bounds and
/// directions, and extra trees' random thresholds.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeRules<'a> {
    /// Bounds [lo, hi] on the children's weights; `None` when no feature is monotone.
    pub bounds: Option<[f64; 2]>,
    /// Direction of each feature (+1 increasing, -1 decreasing, 0 free); empty for none.
    pub monotone: &'a [i8],
    /// Extra trees: the tree's hash key and the node's id, which draw one threshold per
    /// numeric feature.
    pub extra: Option<(HashKey, u32)>,
}

/// A weight held within `[lo, hi]` (`max` then `min`: never panics on a NaN bound).
#[inline]
pub(crate) fn bounded(w: f64, [lo, hi]: [f64; 2]) -> f64 {
    w.max(lo).min(hi)
}

struct Ctx<'a> {
    p: &'a SplitParams,
    bounds: Option<[f64; 2]>,
    units: Units,
    total: [i64; 2],
    parent_gain: f64,
    /// rows per hessian unit, for LightGBM-style row-count estimates
    count_factor: f64,
    /// global rows
    count: u64,
    noise: Option<LevelNoise<'a>>,
}

impl Ctx<'_> {
    fn real(&self, s: [i64; 2]) -> (f64, f64) {
        (s[0] as f64 * self.units.grad, s[1] as f64 * self.units.hess)
    }

    fn est_count(&self, h_units: i64) -> f64 {
        (h_units as f64 * self.count_factor).round()
    }

    /// Loss reduction of sending `left` left (the rest right), if the split is allowed; a
    /// split of a feature with direction `sign` must order its children's weights so.
    fn gain(&self, left: [i64; 2], lambda_children: f64, sign: i8) -> Option<(f64, [i64; 2])> {
        self.gain_scored(left, None, lambda_children, sign)
    }

    /// As `gain`, with the left child's gradient sum for scoring replaced by `score_gl` (a
    /// shrunk estimate; the right child's is then the node's total minus it). The limits
    /// (hessians, row counts) always apply to the true sums.
    fn gain_scored(
        &self,
        left: [i64; 2],
        score_gl: Option<f64>,
        lambda_children: f64,
        sign: i8,
    ) -> Option<(f64, [i64; 2])> {
        let right = [self.total[0] - left[0], self.total[1] - left[1]];
        if left[1] <= 0 || right[1] <= 0 {
            return None;
        }
        let (mut gl, hl) = self.real(left);
        let (mut gr, hr) = self.real(right);
        if let Some(s) = score_gl {
            gr = self.real(self.total).0 - s;
            gl = s;
        }
        if hl < self.p.min_child_weight || hr < self.p.min_child_weight {
            return None;
        }
        if self.p.min_data_in_leaf > 0 {
            let m = self.p.min_data_in_leaf as f64;
            if self.est_count(left[1]) < m || self.est_count(right[1]) < m {
                return None;
            }
        }
        let g = match self.bounds {
            None => {
                leaf_gain(gl, hl, self.p, lambda_children)
                    + leaf_gain(gr, hr, self.p, lambda_children)
                    - self.parent_gain
            }
            Some(b) => {
                // XGBoost's and LightGBM's rule: gains at the bounded weights, and a split
                // that orders its children against the constraint is no split
                let wl = bounded(leaf_weight(gl, hl, self.p, lambda_children), b);
                let wr = bounded(leaf_weight(gr, hr, self.p, lambda_children), b);
                if (sign > 0 && wl > wr) || (sign < 0 && wl < wr) {
                    return None;
                }
                leaf_gain_at(gl, hl, wl, self.p, lambda_children)
                    + leaf_gain_at(gr, hr, wr, self.p, lambda_children)
                    - self.parent_gain
            }
        };
        Some((g, right))
    }
}

/// Extra trees' one threshold: a bin drawn uniformly between the node's first and last
/// occupied bins (so both sides hold rows); `None` when the node has one value at most.
fn random_threshold(h: &[HistBin], (key, node): (HashKey, u32), feature: usize) -> Option<usize> {
    let first = (1..h.len()).find(|&b| h[b] != [0, 0])?;
    let last = (1..h.len()).rev().find(|&b| h[b] != [0, 0])?;
    let span = (last - first) as u64;
    (span > 0).then(|| {
        let draw = key.hash32(((node as u64) << 32) | feature as u64) as u64;
        first + ((draw * span) >> 32) as usize
    })
}

fn numeric(
    feature: usize,
    h: &[HistBin],
    ctx: &Ctx<'_>,
    sign: i8,
    extra: Option<(HashKey, u32)>,
) -> Option<SplitCandidate> {
    let nb = h.len();
    let miss = h[0];
    let has_missing = miss != [0, 0];
    let only = match extra {
        Some(e) => Some(random_threshold(h, e, feature)?),
        None => None,
    };
    let mut best: Option<SplitCandidate> = None;
    let mut acc = [0i64; 2];
    for (b, &bin) in h.iter().enumerate().skip(1) {
        acc = add(acc, bin);
        if only.is_some_and(|o| o != b) {
            continue;
        }
        let all_values = b == nb - 1;
        for default_left in [false, true] {
            if (default_left && !has_missing) || (all_values && (default_left || !has_missing)) {
                continue;
            }
            let left = if default_left {
                [acc[0] + miss[0], acc[1] + miss[1]]
            } else {
                acc
            };
            if let Some((gain, right)) = ctx.gain(left, ctx.p.lambda, sign) {
                if best.as_ref().is_none_or(|c| gain > c.gain) {
                    best = Some(SplitCandidate {
                        feature,
                        rule: SplitRule::Numeric { bin: b as u16 },
                        default_left,
                        gain,
                        left,
                        right,
                    });
                }
            }
        }
    }
    best
}

/// [`numeric`] without monotone bounds, random thresholds, L1, a weight clip or a row
/// minimum: the common case, in one tight loop that gives the same candidate to the bit.
/// The gain is [`leaf_gain`]'s arithmetic with those terms at zero (T(g, 0)² = g² for the
/// finite sums here). A bin past the first that holds no rows leaves the left sums as they
/// were, so its candidates repeat earlier ones exactly and can never win (a later equal
/// gain loses to the earlier): it is skipped.
///
/// Candidates surely below `floor` (> 0: the gain a split must beat, or the best found so
/// far in other features) cannot be chosen and are passed over without their two divisions
/// ([`Screen::below`]): first a block of bins at a time against the floor at the block's
/// start ([`Screen`]), then each remaining one against the floor as it has risen. So is
/// every candidate of a feature whose best is below it, which then returns none or a
/// candidate below `floor`. A candidate at or above `floor` is always computed: the
/// result above `floor` is [`numeric`]'s to the bit.
fn numeric_plain(
    feature: usize,
    h: &[HistBin],
    ctx: &Ctx<'_>,
    floor: f64,
    occupied: Option<(&[u64], usize)>,
) -> Option<SplitCandidate> {
    let nb = h.len();
    let miss = h[0];
    let base = Screen {
        total: ctx.total,
        units: [ctx.units.grad, ctx.units.hess],
        lambda: ctx.p.lambda,
        floor,
        parent: ctx.parent_gain,
    };
    let mut scan = PlainScan {
        base,
        mcw: ctx.p.min_child_weight,
        miss,
        has_missing: miss != [0, 0],
        nb,
        best: None,
        floor,
        acc: [0, 0],
        lg: [0; screen::BLOCK],
        lh: [0; screen::BLOCK],
        visit: [0; screen::BLOCK],
    };
    match occupied {
        None => {
            for first in (1..nb).step_by(screen::BLOCK) {
                scan.block(&h[first..nb.min(first + screen::BLOCK)], |j| first + j);
            }
        }
        Some((bits, offset)) => {
            // bin 1 and the occupied bins past it: the others hold no rows, and the scan
            // below passes over a bin of no rows past the first anyway
            let (mut at, mut bins) = ([0usize; screen::BLOCK], [[0i64; 2]; screen::BLOCK]);
            let mut m = 0;
            let mut take = |b: usize, scan: &mut PlainScan| {
                at[m] = b;
                bins[m] = h[b];
                m += 1;
                if m == screen::BLOCK {
                    scan.block(&bins, |j| at[j]);
                    m = 0;
                }
            };
            if nb > 1 {
                take(1, &mut scan);
            }
            occupancy::each_set(bits, offset + 2, offset + nb, |b| {
                take(b - offset, &mut scan)
            });
            if m > 0 {
                scan.block(&bins[..m], |j| at[j]);
            }
        }
    }
    let total = ctx.total;
    scan.best
        .map(|(gain, b, default_left, left)| SplitCandidate {
            feature,
            rule: SplitRule::Numeric { bin: b as u16 },
            default_left,
            gain,
            left,
            right: [total[0] - left[0], total[1] - left[1]],
        })
}

/// [`numeric_plain`]'s state over a feature's candidates, taken a block at a time.
struct PlainScan {
    base: Screen,
    mcw: f64,
    miss: HistBin,
    has_missing: bool,
    nb: usize,
    /// (gain, bin, default_left, left sums) of the best so far: the first allowed
    /// candidate, then only a strictly larger gain
    best: Option<(f64, usize, bool, [i64; 2])>,
    floor: f64,
    /// the left sums so far
    acc: [i64; 2],
    /// a block's left sums and which of its candidates to visit
    lg: [i64; screen::BLOCK],
    lh: [i64; screen::BLOCK],
    visit: [u8; screen::BLOCK],
}

impl PlainScan {
    #[inline(always)]
    fn gain(&self, left: [i64; 2], floor: f64) -> Option<f64> {
        let (total, lambda) = (self.base.total, self.base.lambda);
        if left[1] <= 0 || total[1] - left[1] <= 0 {
            return None;
        }
        let sides @ [gl, hl, gr, hr] = self.base.sides(left[0], left[1]);
        if hl < self.mcw || hr < self.mcw || self.base.below(sides, floor) {
            return None;
        }
        let half = |g: f64, h: f64| {
            if h + lambda <= 0.0 {
                0.0
            } else {
                g * g / (h + lambda)
            }
        };
        Some(half(gl, hl) + half(gr, hr) - self.base.parent)
    }

    /// The candidates of `block`, the bins at `at(0)`, `at(1)`, … in ascending order with
    /// every bin between them of no rows: their left sums, then which of them the floor at
    /// the block's start does not rule out (screen.rs), then those in order.
    #[inline(always)]
    fn block(&mut self, block: &[HistBin], at: impl Fn(usize) -> usize) {
        let m = block.len();
        for ((g, h), &bin) in self.lg.iter_mut().zip(self.lh.iter_mut()).zip(block) {
            self.acc = add(self.acc, bin);
            [*g, *h] = self.acc;
        }
        let s = Screen {
            floor: self.floor,
            ..self.base
        };
        let miss = self.miss;
        s.mark(&self.lg[..m], &self.lh[..m], miss, &mut self.visit[..m]);
        for (j, &bin) in block.iter().enumerate() {
            let v = self.visit[j];
            let b = at(j);
            if v == 0 || (b > 1 && bin == [0, 0]) {
                continue;
            }
            let acc = [self.lg[j], self.lh[j]];
            let all_values = b == self.nb - 1;
            if v & screen::RIGHT != 0 && (!all_values || self.has_missing) {
                // default right: allowed except for all values left with nothing missing
                if let Some(g) = self.gain(acc, self.floor) {
                    if self.best.is_none_or(|c| g > c.0) {
                        self.best = Some((g, b, false, acc));
                        self.floor = self.floor.max(g);
                    }
                }
            }
            if v & screen::LEFT != 0 && self.has_missing && !all_values {
                let left = [acc[0] + miss[0], acc[1] + miss[1]];
                if let Some(g) = self.gain(left, self.floor) {
                    if self.best.is_none_or(|c| g > c.0) {
                        self.best = Some((g, b, true, left));
                        self.floor = self.floor.max(g);
                    }
                }
            }
        }
    }
}

/// Multiple of the estimated noise-to-signal ratio σ²/τ² that a node's prior weighs.
/// The search keeps the best of many orderings, the luckiest arrangement of noise, so one
/// level's James–Stein prior (1) is too weak for it; 3 kept flights' `tailnum` and `dest`
/// within fold noise of dropping them (bench/categoricals.py) where 1 did not.
const PRIOR_FACTOR: f64 = 3.0;

/// The prior, in hessian units, that shrinks a node's levels toward its mean: an empirical
/// Bayes estimate from the levels themselves, within [min(1, `cat_smooth`), `cat_smooth`].
/// Levels whose rows agree (an institution's earnings over the years) get little, levels
/// that are noise (tail numbers) the most, where one constant must serve both. Where the
/// levels cannot tell (fewer than 3, one hessian for all) the prior is `cat_smooth`.
fn node_prior(h: &[HistBin], ctx: &Ctx<'_>, mean: f64) -> f64 {
    let cap = ctx.p.cat_smooth;
    if cap <= 0.0 {
        return 0.0;
    }
    // A level with hessian H deviates from the node's mean by r = G - mean·H. If level
    // effects spread with variance τ² per hessian unit and each unit adds noise σ²,
    // E[r²/H] = σ² + τ²·H: the least-squares line of r²/H on H over the levels has
    // intercept σ² and slope τ².
    let (mut n, mut sx, mut sy, mut sxx, mut sxy) = (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for &bin in &h[1..] {
        let (g, hh) = ctx.real(bin);
        if hh > 0.0 {
            let r = g - mean * hh;
            let z = r * r / hh;
            n += 1.0;
            sx += hh;
            sy += z;
            sxx += hh * hh;
            sxy += hh * z;
        }
    }
    let spread = sxx / n - (sx / n) * (sx / n);
    if n < 3.0 || spread <= 0.0 {
        return cap;
    }
    let tau2 = (sxy / n - (sx / n) * (sy / n)) / spread;
    let sigma2 = sy / n - tau2 * sx / n;
    let floor = cap.min(1.0);
    if !(tau2.is_finite() && sigma2.is_finite()) || tau2 <= 0.0 {
        cap
    } else if sigma2 <= 0.0 {
        floor
    } else {
        (PRIOR_FACTOR * sigma2 / tau2).clamp(floor, cap)
    }
}

/// A node's noise may not fall below this fraction of the root's: a deep node measures its
/// noise from few rows, and may find almost none. The root's alone for every node cost
/// `inspections` 5% (bench/categorical_suite.py: other features explain much of a deep
/// level's scatter), half the root's for every node took flights' tail numbers 0.043 AUC
/// behind dropping them (bench/categoricals.py); a node's own, floored at a quarter of the
/// root's, keeps both.
pub const ROOT_NOISE_FLOOR: f64 = 0.25;

/// Most levels a measured node scans from either end ([`scanned_levels`]).
const MAX_SCANNED_LEVELS: f64 = 256.0;

/// Most occupied levels a node may have and keep the unshrunk search: a few levels offer
/// little to select from, and few-level columns (diamonds' clarity, chile's region) lost
/// accuracy to the prior. It is apart from `max_cat_threshold`, the levels scanned a side:
/// unshrunk, nodes of 33 to 64 levels over-fit (bench/categorical_suite.py: `hotel` 2.5%
/// and `birds` 1.5% behind the better peer), where scanning 64 a side cost no table more
/// than 0.2% and gained on five.
const UNSHRUNK_LEVELS: usize = 32;

/// The most occupied levels a node may have and keep the unshrunk search:
/// [`UNSHRUNK_LEVELS`], or `max_cat_threshold` where that is lower (as it was before the
/// two were apart).
pub(crate) fn unshrunk_levels(p: &SplitParams) -> usize {
    p.max_cat_threshold.min(UNSHRUNK_LEVELS)
}

/// The noise per hessian unit within the levels of one feature of a node (`h` its
/// histogram, `total` its sums, `count` its rows, `square_sum` its rows' Σg² in real
/// units): the rows' squared gradients less what the levels' means explain, over the
/// rows' degrees of freedom, σ² = (Σg²/h̄ − Σ_l G_l²/H_l) / (rows − levels) with h̄ the
/// node's mean hessian. `None` where the node has no hessian or rows.
pub fn within_variance(
    h: &[HistBin],
    total: [i64; 2],
    count: u64,
    square_sum: f64,
    units: Units,
) -> Option<f64> {
    let h_total = total[1] as f64 * units.hess;
    if count == 0 || h_total <= 0.0 {
        return None;
    }
    let mean_hess = h_total / count as f64;
    let (mut between, mut levels) = (0.0f64, 0.0f64);
    for &bin in &h[1..] {
        let (g, hh) = (bin[0] as f64 * units.grad, bin[1] as f64 * units.hess);
        if hh > 0.0 {
            between += g * g / hh;
            levels += 1.0;
        }
    }
    let v = (square_sum / mean_hess - between) / (count as f64 - levels).max(1.0);
    v.is_finite().then_some(v.max(0.0))
}

/// [`node_prior`] with the noise σ² measured ([`within_variance`], at least
/// [`ROOT_NOISE_FLOOR`] of the root's): only the spread of level effects τ² is fitted,
/// by least squares of r²/H − σ² on H through the origin. Where the levels hold about the
/// same hessian the fitted line cannot tell σ² from τ² (its intercept was 35 times the
/// true within-institution variance of College Scorecard's earnings); the rows can.
fn measured_prior(
    feature: usize,
    h: &[HistBin],
    ctx: &Ctx<'_>,
    mean: f64,
    n: LevelNoise<'_>,
) -> f64 {
    let cap = ctx.p.cat_smooth;
    if cap <= 0.0 {
        return 0.0;
    }
    let Some(own) = within_variance(h, ctx.total, ctx.count, n.square_sum, ctx.units) else {
        return node_prior(h, ctx, mean);
    };
    let root = n.root.get(feature).copied().filter(|r| r.is_finite());
    let sigma2 = root.map_or(own, |r| own.max(ROOT_NOISE_FLOOR * r));
    let (mut a, mut b, mut levels) = (0.0f64, 0.0f64, 0usize);
    for &bin in &h[1..] {
        let (g, hh) = ctx.real(bin);
        if hh > 0.0 {
            let r = g - mean * hh;
            a += r * r - sigma2 * hh;
            b += hh * hh;
            levels += 1;
        }
    }
    if levels < 3 || b <= 0.0 {
        return cap;
    }
    let tau2 = a / b;
    let floor = cap.min(1.0);
    if !tau2.is_finite() || tau2 <= 0.0 {
        cap
    } else if sigma2 <= 0.0 {
        floor
    } else {
        (PRIOR_FACTOR * sigma2 / tau2).clamp(floor, cap)
    }
}

/// Levels a node whose prior is `prior` scans from either end: `max_cat_threshold`, and
/// where its noise was measured, as many more as `cat_smooth` exceeds the prior (at most
/// [`MAX_SCANNED_LEVELS`]). A small prior says the levels differ far beyond their noise:
/// an ID-like column's best partition then sends hundreds of levels one way, and 20 from
/// either end cut College Scorecard's institutions too coarsely.
fn scanned_levels(ctx: &Ctx<'_>, prior: f64) -> usize {
    let base = ctx.p.max_cat_threshold;
    if ctx.noise.is_none() || prior <= 0.0 {
        return base;
    }
    let wider = (base as f64 * ctx.p.cat_smooth / prior).min(MAX_SCANNED_LEVELS);
    base.max(wider as usize)
}

fn categorical(feature: usize, h: &[HistBin], ctx: &Ctx<'_>) -> Option<SplitCandidate> {
    let nb = h.len();
    let levels = nb - 1;
    let mut best: Option<SplitCandidate> = None;
    let mut consider = |left_bins: &[u16], left: [i64; 2], lambda: f64| {
        if let Some((gain, right)) = ctx.gain(left, lambda, 0) {
            if best.as_ref().is_none_or(|c| gain > c.gain) {
                best = Some(SplitCandidate {
                    feature,
                    rule: SplitRule::Categorical {
                        left: BinSet::from_bins(left_bins.iter().copied()),
                    },
                    default_left: false,
                    gain,
                    left,
                    right,
                });
            }
        }
    };
    if levels <= ctx.p.max_cat_to_onehot {
        for (b, &bin) in h.iter().enumerate().skip(1) {
            if bin[1] > 0 {
                consider(&[b as u16], bin, ctx.p.lambda);
            }
        }
        return best;
    }
    // LightGBM's many-vs-many search: order levels by smoothed mean gradient, then scan
    // prefixes from both ends. Ordering and scoring on the same rows is optimistic: among
    // thousands of levels with a few rows each, some look extreme by chance, and the sorted
    // prefix collects them. So each level's deviation from the node's mean gradient is
    // shrunk by h / (h + prior) (an empirical-Bayes prior worth `prior` of hessian at the
    // node's mean, estimated per node by node_prior) both for the order and for the gain a
    // partition is scored with; a level with much more hessian than the prior keeps its own
    // statistics. With `cat_smooth` = 0 this is the unshrunk search. The children keep
    // their true sums. LightGBM also leaves levels with fewer than `cat_smooth` rows out of
    // the scan; here every level is scanned, the shrinkage doing that job: a cut of levels
    // under 10 rows hid ID-like columns whose levels have a few rows each (scorecard's
    // 6,247 institutions, about five years each).
    // A node with at most `unshrunk_levels` occupied levels offers little to select from
    // (and few-level columns such as diamonds' clarity or chile's region lost accuracy
    // to the prior): there the search is LightGBM's unshrunk one.
    let occupied = h[1..].iter().filter(|b| b[1] > 0).count();
    let (g_total, h_total) = ctx.real(ctx.total);
    let mean = if h_total > 0.0 {
        g_total / h_total
    } else {
        0.0
    };
    let smooth = if occupied <= unshrunk_levels(ctx.p) {
        0.0
    } else if let Some(n) = ctx.noise {
        measured_prior(feature, h, ctx, mean, n)
    } else {
        node_prior(h, ctx, mean)
    };
    let mut dev = vec![0.0f64; nb];
    let mut dev_sum = 0.0;
    for (b, &bin) in h.iter().enumerate() {
        let (g, hh) = ctx.real(bin);
        if hh > 0.0 {
            dev[b] = (g - mean * hh) * hh / (hh + smooth);
            dev_sum += dev[b];
        }
    }
    // re-centre so the shrunk deviations of all bins sum to zero, as the true ones do
    if smooth > 0.0 && h_total > 0.0 {
        for (b, &bin) in h.iter().enumerate() {
            dev[b] -= dev_sum * ctx.real(bin).1 / h_total;
        }
    }
    let ratio = |b: usize| {
        let (g, hh) = ctx.real(h[b]);
        if smooth > 0.0 {
            mean + (g - mean * hh) / (hh + smooth)
        } else {
            g / hh
        }
    };
    let mut keyed: Vec<(f64, usize)> = (1..nb)
        .filter(|&b| h[b][1] > 0)
        .map(|b| (ratio(b), b))
        .collect();
    let by_ratio = |x: &(f64, usize), y: &(f64, usize)| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1));
    // at most `max_cat_threshold` levels (and at most half of them, and never all) from
    // either end are scanned: select them, and sort only them (the order is total, so the
    // selected levels are the same on every backend)
    let n_keyed = keyed.len();
    let take = scanned_levels(ctx, smooth)
        .min(n_keyed.div_ceil(2))
        .min(n_keyed.saturating_sub(1))
        .max(1);
    let (low, high): (Vec<usize>, Vec<usize>) = if 2 * take < n_keyed {
        keyed.select_nth_unstable_by(take, by_ratio);
        let mut low = keyed[..take].to_vec();
        low.sort_unstable_by(by_ratio);
        keyed.select_nth_unstable_by(n_keyed - take - 1, by_ratio);
        let mut high = keyed[n_keyed - take..].to_vec();
        high.sort_unstable_by(|x, y| by_ratio(y, x));
        (
            low.iter().map(|k| k.1).collect(),
            high.iter().map(|k| k.1).collect(),
        )
    } else {
        keyed.sort_unstable_by(by_ratio);
        let order: Vec<usize> = keyed.iter().map(|k| k.1).collect();
        let high = order.iter().rev().take(take).copied().collect();
        (order.into_iter().take(take).collect(), high)
    };
    let lambda = ctx.p.lambda + ctx.p.cat_l2;
    let min_group = ctx.p.min_data_per_group as f64;
    for order in [low, high] {
        let mut left = [0i64; 2];
        let mut left_dev = 0.0;
        let mut group = 0.0;
        let mut bins: Vec<u16> = Vec::new();
        for &b in &order {
            left = add(left, h[b]);
            left_dev += dev[b];
            group += ctx.est_count(h[b][1]);
            bins.push(b as u16);
            if group < min_group {
                continue;
            }
            group = 0.0;
            let right_h = ctx.total[1] - left[1];
            if ctx.est_count(right_h) < min_group {
                break;
            }
            let scored = (smooth > 0.0).then(|| mean * ctx.real(left).1 + left_dev);
            if let Some((gain, right)) = ctx.gain_scored(left, scored, lambda, 0) {
                if best.as_ref().is_none_or(|c| gain > c.gain) {
                    let mut sorted = bins.clone();
                    sorted.sort_unstable();
                    best = Some(SplitCandidate {
                        feature,
                        rule: SplitRule::Categorical {
                            left: BinSet::from_bins(sorted),
                        },
                        default_left: false,
                        gain,
                        left,
                        right,
                    });
                }
            }
        }
    }
    best
}

/// Whether at most one bin of a feature's histogram `h` has a hessian sum: every candidate
/// then has a side whose hessian is zero or not positive, which every scan refuses, so the
/// feature has no split (in a sparse shard's deep nodes, most features).
fn one_bin_holds_the_hessian(h: &[HistBin], occupied: Option<(&[u64], usize)>) -> bool {
    match occupied {
        None => {
            let mut held = h.iter().filter(|b| b[1] != 0);
            held.next().is_none() || held.next().is_none()
        }
        Some((bits, offset)) => {
            let mut held = 0;
            occupancy::while_set(bits, offset, offset + h.len(), |b| {
                held += (h[b - offset][1] != 0) as usize;
                held < 2
            });
            held <= 1
        }
    }
}

/// The best allowed split of `node` over the features in `features`, or None.
pub fn best_split(
    node: NodeView<'_>,
    cuts: &Cuts,
    features: &[usize],
    units: Units,
    p: &SplitParams,
) -> Option<SplitCandidate> {
    best_split_with(node, cuts, features, units, p, &NodeRules::default())
}

/// The best split of `node` over `features` that keeps to `rules`, or None.
pub fn best_split_with(
    node: NodeView<'_>,
    cuts: &Cuts,
    features: &[usize],
    units: Units,
    p: &SplitParams,
    rules: &NodeRules<'_>,
) -> Option<SplitCandidate> {
    let total = node.sums;
    let (g, hh) = (total[0] as f64 * units.grad, total[1] as f64 * units.hess);
    let parent_gain = match rules.bounds {
        None => leaf_gain(g, hh, p, p.lambda),
        Some(b) => leaf_gain_at(
            g,
            hh,
            bounded(leaf_weight(g, hh, p, p.lambda), b),
            p,
            p.lambda,
        ),
    };
    let ctx = Ctx {
        p,
        bounds: rules.bounds,
        units,
        total,
        parent_gain,
        count_factor: if total[1] > 0 {
            node.count as f64 / total[1] as f64
        } else {
            0.0
        },
        count: node.count,
        noise: node.noise.filter(|_| p.cat_noise == CatNoise::Measured),
    };
    let offsets = cuts.offsets();
    let plain = rules.bounds.is_none()
        && rules.extra.is_none()
        && p.alpha == 0.0
        && p.max_delta_step == 0.0
        && p.min_data_in_leaf == 0;
    // a split must beat this; numeric_plain passes over candidates surely below it
    let threshold = p.gamma.max(MIN_SPLIT_GAIN);
    let mut best: Option<SplitCandidate> = None;
    for &f in features {
        let h = &node.hist[offsets[f] as usize..offsets[f + 1] as usize];
        let occupied = node.occupied.map(|bits| (bits, offsets[f] as usize));
        if one_bin_holds_the_hessian(h, occupied) {
            continue;
        }
        let floor = best.as_ref().map_or(threshold, |b| threshold.max(b.gain));
        let cand = match cuts.feature(f) {
            FeatureCuts::Numeric { .. } if plain => numeric_plain(f, h, &ctx, floor, occupied),
            FeatureCuts::Numeric { .. } => numeric(
                f,
                h,
                &ctx,
                rules.monotone.get(f).copied().unwrap_or(0),
                rules.extra,
            ),
            FeatureCuts::Categorical { .. } => categorical(f, h, &ctx),
        };
        best = pick(best, cand);
    }
    best.filter(|c| c.gain > threshold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;
    use proptest::prelude::*;

    /// Brute force: every threshold and both missing directions, from raw rows.
    fn brute_numeric(
        bins: &[u16],
        gh: &[(i64, i64)],
        nb: usize,
        p: &SplitParams,
        units: Units,
    ) -> Option<(f64, u16, bool)> {
        let total = gh.iter().fold((0, 0), |a, &(g, h)| (a.0 + g, a.1 + h));
        let parent = leaf_gain(
            total.0 as f64 * units.grad,
            total.1 as f64 * units.hess,
            p,
            p.lambda,
        );
        let mut best: Option<(f64, u16, bool)> = None;
        for b in 1..nb as u16 {
            for dl in [false, true] {
                let rule = SplitRule::Numeric { bin: b };
                let (mut l, mut r) = ((0i64, 0i64), (0i64, 0i64));
                for (&bin, &(g, h)) in bins.iter().zip(gh) {
                    if rule.goes_left(bin, dl) {
                        l = (l.0 + g, l.1 + h);
                    } else {
                        r = (r.0 + g, r.1 + h);
                    }
                }
                if l.1 <= 0 || r.1 <= 0 {
                    continue;
                }
                let (hl, hr) = (l.1 as f64 * units.hess, r.1 as f64 * units.hess);
                if hl < p.min_child_weight || hr < p.min_child_weight {
                    continue;
                }
                let gain = leaf_gain(l.0 as f64 * units.grad, hl, p, p.lambda)
                    + leaf_gain(r.0 as f64 * units.grad, hr, p, p.lambda)
                    - parent;
                if best.is_none_or(|(bg, _, _)| gain > bg) {
                    best = Some((gain, b, dl));
                }
            }
        }
        best.filter(|b| b.0 > p.gamma.max(MIN_SPLIT_GAIN))
    }

    proptest! {
        #[test]
        fn numeric_split_matches_exhaustive_search(
            rows in proptest::collection::vec((0u16..6, -50i64..50, 1i64..20), 2..60),
            lambda in 0.0f64..3.0,
            mcw in 0.0f64..5.0,
        ) {
            let nb = 6;
            let cuts = Cuts::new(vec![FeatureCuts::Numeric { thresholds: vec![1.0, 2.0, 3.0, 4.0] }]);
            let mut hist = vec![[0i64; 2]; nb];
            for &(b, g, h) in &rows {
                hist[b as usize] = add(hist[b as usize], [g, h]);
            }
            let sums = rows.iter().fold([0, 0], |a, &(_, g, h)| [a[0] + g, a[1] + h]);
            let p = SplitParams { lambda, min_child_weight: mcw, ..SplitParams::from_params(&Params::default()) };
            let units = Units { grad: 0.25, hess: 0.5 };
            let node = NodeView { hist: &hist, sums, count: rows.len() as u64, occupied: None, noise: None };
            let got = best_split(node, &cuts, &[0], units, &p);
            let bins: Vec<u16> = rows.iter().map(|r| r.0).collect();
            let gh: Vec<(i64, i64)> = rows.iter().map(|r| (r.1, r.2)).collect();
            let want = brute_numeric(&bins, &gh, nb, &p, units);
            match (got, want) {
                (None, None) => {}
                (Some(c), Some((g, _, _))) => {
                    prop_assert!((c.gain - g).abs() <= 1e-9 * g.abs().max(1.0), "{} vs {}", c.gain, g);
                    // the candidate's sums are those of the rows it routes left
                    let mut l = [0i64; 2];
                    for &(b, g, h) in &rows {
                        if c.rule.goes_left(b, c.default_left) { l[0] += g; l[1] += h; }
                    }
                    prop_assert_eq!(l, c.left);
                }
                (a, b) => prop_assert!(false, "{:?} vs {:?}", a, b),
            }
        }

        #[test]
        fn the_plain_numeric_scan_gives_the_general_scans_candidate_to_the_bit(
            bins in proptest::collection::vec(
                prop_oneof![Just([0i64, 0]), (-1i64 << 40..1i64 << 40, 0i64..1 << 40).prop_map(|(g, h)| [g, h])],
                // past a screen block too: a scan in several blocks
                2..200,
            ),
            lambda in prop_oneof![Just(0.0f64), 0.0f64..3.0],
            mcw in prop_oneof![Just(0.0f64), 0.0f64..1e-9],
            // mirror-image candidates tie exactly: the earlier must win in both scans
            mirror in any::<bool>(),
            floor_pick in 1e-6f64..50.0,
            // where the feature's bins start among the occupancy bits, and which bins of no
            // rows have their bit set anyway
            offset in 0usize..130,
            spare in any::<u64>(),
        ) {
            let mut h = bins.clone();
            if mirror && h.len() > 3 {
                // bin 1 empty: "missing left, every value right" there mirrors "every value
                // left, missing right" at the last bin
                h = vec![[0, 0]; h.len()];
                h[0] = [7 << 30, 3 << 30];
                h[2] = [-5 << 30, 2 << 30];
                let last = h.len() - 1;
                h[last] = [-2 << 30, 1 << 30];
            }
            let total = h.iter().fold([0i64, 0], |a, &b| add(a, b));
            let p = SplitParams { lambda, min_child_weight: mcw, ..SplitParams::from_params(&Params::default()) };
            let units = Units { grad: 2f64.powi(-40), hess: 2f64.powi(-41) };
            let (g, hh) = (total[0] as f64 * units.grad, total[1] as f64 * units.hess);
            let ctx = Ctx { p: &p, bounds: None, units, total, parent_gain: leaf_gain(g, hh, &p, p.lambda), count_factor: 0.0, count: 0, noise: None };
            let general = numeric(3, &h, &ctx, 0, None);
            // floors: the smallest a split must beat, any other, and at and around the best
            // gain (a floor equal to the best must not pass it over)
            let mut floors = vec![MIN_SPLIT_GAIN, floor_pick];
            if let Some(g) = general.as_ref().map(|c| c.gain).filter(|&g| g > 0.0) {
                floors.extend([g, f64::from_bits(g.to_bits() - 1), f64::from_bits(g.to_bits() + 1), g * (1.0 - 1e-9), g * (1.0 + 1e-9)]);
            }
            for floor in floors {
                let plain = numeric_plain(3, &h, &ctx, floor, None);
                // over occupied bins only: bits set at every bin not [0, 0] and at some that
                // are, the feature's bins `offset` bits in, other features' bits all set
                let mut bits = vec![u64::MAX; occupancy::words_for(offset + h.len() + 64)];
                for (b, bin) in h.iter().enumerate() {
                    let i = offset + b;
                    let keep = *bin != [0, 0] || spare >> (b % 64) & 1 == 1;
                    bits[i / 64] &= !((!keep as u64) << (i % 64));
                }
                let occupied = numeric_plain(3, &h, &ctx, floor, Some((&bits, offset)));
                prop_assert_eq!(occupied.as_ref().map(|c| c.gain.to_bits()), plain.as_ref().map(|c| c.gain.to_bits()));
                prop_assert_eq!(&occupied, &plain, "floor {}", floor);
                prop_assert_eq!(one_bin_holds_the_hessian(&h, Some((&bits, offset))), one_bin_holds_the_hessian(&h, None));
                match &general {
                    // the best is not below the floor: the plain scan finds it, to the bit
                    Some(c) if c.gain >= floor => {
                        prop_assert_eq!(plain.as_ref().map(|c| c.gain.to_bits()), Some(c.gain.to_bits()), "floor {}", floor);
                        prop_assert_eq!(plain.as_ref(), Some(c));
                    }
                    // otherwise nothing it returns can be chosen
                    _ => prop_assert!(plain.as_ref().is_none_or(|c| c.gain < floor), "floor {} gave {:?}", floor, plain),
                }
            }
        }

        #[test]
        fn onehot_categorical_matches_exhaustive_search(
            rows in proptest::collection::vec((0u16..4, -50i64..50, 1i64..20), 2..60),
        ) {
            let cuts = Cuts::new(vec![FeatureCuts::Categorical { levels: vec!["a".into(), "b".into(), "c".into()], level_bins: vec![1, 2, 3], n_bins: 4 }]);
            let mut hist = vec![[0i64; 2]; 4];
            for &(b, g, h) in &rows {
                hist[b as usize] = add(hist[b as usize], [g, h]);
            }
            let sums = rows.iter().fold([0, 0], |a, &(_, g, h)| [a[0] + g, a[1] + h]);
            let p = SplitParams { min_child_weight: 0.0, ..SplitParams::from_params(&Params::default()) };
            let units = Units { grad: 1.0, hess: 1.0 };
            let got = best_split(NodeView { hist: &hist, sums, count: rows.len() as u64, occupied: None, noise: None }, &cuts, &[0], units, &p);
            let parent = leaf_gain(sums[0] as f64, sums[1] as f64, &p, p.lambda);
            let mut want: Option<f64> = None;
            for c in 1..4u16 {
                let (mut l, mut r) = ([0i64; 2], [0i64; 2]);
                for &(b, g, h) in &rows {
                    if b == c { l[0] += g; l[1] += h } else { r[0] += g; r[1] += h }
                }
                if l[1] > 0 && r[1] > 0 {
                    let gain = leaf_gain(l[0] as f64, l[1] as f64, &p, p.lambda) + leaf_gain(r[0] as f64, r[1] as f64, &p, p.lambda) - parent;
                    want = Some(want.map_or(gain, |w: f64| w.max(gain)));
                }
            }
            let want = want.filter(|&g| g > MIN_SPLIT_GAIN);
            prop_assert_eq!(got.map(|c| c.gain), want);
        }
    }

    /// A node's histogram over `levels` levels of 1 to `rows` rows (hessian 1 a row, and
    /// gradients in units of 2^-10): each level's effect drawn with spread `effect`, each
    /// row's noise with spread `noise`.
    fn levels_histogram(
        levels: usize,
        rows: usize,
        effect: f64,
        noise: f64,
        seed: u64,
    ) -> Vec<HistBin> {
        let mut lcg = crate::test_rng::lcg(seed);
        let mut uniform = move || (lcg() >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        // a uniform on [-0.5, 0.5) has variance 1/12
        let scale = 12f64.sqrt();
        let mut h = vec![[0i64; 2]; levels + 1];
        for (i, bin) in h.iter_mut().enumerate().skip(1) {
            let e = effect * scale * uniform();
            for _ in 0..1 + i % rows {
                let g = e + noise * scale * uniform();
                bin[0] += (g * 1024.0).round() as i64;
                bin[1] += 1;
            }
        }
        h
    }

    /// The context a node of levels `h` (a row a hessian unit, gradients in units of
    /// 2^-10) is searched in, with what it measured of its noise.
    fn levels_ctx<'a>(h: &[HistBin], p: &'a SplitParams, noise: Option<LevelNoise<'a>>) -> Ctx<'a> {
        let total = h.iter().fold([0i64; 2], |a, &b| add(a, b));
        Ctx {
            p,
            bounds: None,
            units: Units {
                grad: 1.0 / 1024.0,
                hess: 1.0,
            },
            total,
            parent_gain: 0.0,
            count_factor: 1.0,
            count: total[1] as u64,
            noise,
        }
    }

    fn prior_of(h: &[HistBin], p: &SplitParams) -> f64 {
        let ctx = levels_ctx(h, p, None);
        let (g, hh) = ctx.real(ctx.total);
        node_prior(h, &ctx, g / hh)
    }

    /// `levels` levels of exactly `rows` rows each (an ID-like column), as
    /// [`levels_histogram`], with the rows' Σg² in real units.
    fn equal_levels(
        levels: usize,
        rows: usize,
        effect: f64,
        noise: f64,
        seed: u64,
    ) -> (Vec<HistBin>, f64) {
        let mut lcg = crate::test_rng::lcg(seed);
        let mut uniform = move || (lcg() >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        let scale = 12f64.sqrt();
        let mut h = vec![[0i64; 2]; levels + 1];
        let mut squares = 0.0;
        for bin in h.iter_mut().skip(1) {
            let e = effect * scale * uniform();
            for _ in 0..rows {
                let g = ((e + noise * scale * uniform()) * 1024.0).round();
                bin[0] += g as i64;
                bin[1] += 1;
                squares += (g / 1024.0) * (g / 1024.0);
            }
        }
        (h, squares)
    }

    /// The measured prior of `h` and the levels it scans from either end, its rows'
    /// Σg² `squares`, the root's noise `root`.
    fn measured_of(h: &[HistBin], squares: f64, root: &[f64], p: &SplitParams) -> (f64, usize) {
        let noise = LevelNoise {
            square_sum: squares,
            root,
        };
        let ctx = levels_ctx(h, p, Some(noise));
        let (g, hh) = ctx.real(ctx.total);
        let prior = measured_prior(0, h, &ctx, g / hh, noise);
        (prior, scanned_levels(&ctx, prior))
    }

    #[test]
    fn measured_noise_tells_id_like_levels_from_noise() {
        let p = SplitParams::from_params(&Params::default());
        assert_eq!(p.cat_noise, CatNoise::Measured);
        let units = Units {
            grad: 1.0 / 1024.0,
            hess: 1.0,
        };
        // 2,000 institutions of five years each, far apart, whose years agree: the fitted
        // line cannot tell (the cap), the rows can (the least prior), and the node scans
        // 256 levels from either end rather than max_cat_threshold
        let (signal, signal_squares) = equal_levels(2000, 5, 10.0, 1.0, 1);
        assert_eq!(prior_of(&signal, &p), p.cat_smooth);
        let total = signal.iter().fold([0i64; 2], |a, &b| add(a, b));
        let sigma2 = within_variance(&signal, total, 10_000, signal_squares, units).unwrap();
        assert!((sigma2 - 1.0).abs() < 0.05, "{sigma2}");
        assert_eq!(measured_of(&signal, signal_squares, &[], &p), (1.0, 256));
        // levels that are noise, as many rows each: the cap, and max_cat_threshold a side
        let (noise, squares) = equal_levels(2000, 5, 0.0, 1.0, 2);
        assert_eq!(
            measured_of(&noise, squares, &[], &p),
            (p.cat_smooth, p.max_cat_threshold)
        );
        // effects as large as the noise: σ²/τ² = 1, the prior PRIOR_FACTOR, and
        // cat_smooth / prior times max_cat_threshold levels a side
        let (even, squares) = equal_levels(2000, 5, 1.0, 1.0, 3);
        let (prior, side) = measured_of(&even, squares, &[], &p);
        assert!((prior / PRIOR_FACTOR - 1.0).abs() < 0.3, "{prior}");
        let wider = p.max_cat_threshold as f64 * p.cat_smooth / prior;
        assert_eq!(side, (wider as usize).min(256));
        // the root's noise floors the node's: a node whose rows show no noise, under a
        // root with noise 16, is given 4 (a prior of about 3 · 4 / τ², τ² = 1), not none
        let quiet = equal_levels(2000, 5, 1.0, 0.0, 3).0;
        let loud = [16.0];
        let floored = measured_of(&quiet, 0.0, &loud, &p).0;
        let (unfloored, _) = measured_of(&quiet, 0.0, &[], &p);
        assert_eq!(unfloored, 1.0);
        assert!(floored > 3.0 * PRIOR_FACTOR, "{floored}");
        // the fitted estimate where the parameter says so, whatever the node measured
        let fitted = SplitParams {
            cat_noise: CatNoise::Fitted,
            ..p
        };
        let view = NodeView {
            hist: &signal,
            sums: total,
            count: 10_000,
            occupied: None,
            noise: Some(LevelNoise {
                square_sum: signal_squares,
                root: &[],
            }),
        };
        let cuts = Cuts::new(vec![FeatureCuts::Categorical {
            levels: (0..2000).map(|l| l.to_string()).collect(),
            level_bins: (1..=2000).collect(),
            n_bins: 2001,
        }]);
        let with = |p: &SplitParams| best_split(view, &cuts, &[0], units, p);
        let (a, b) = (with(&p).unwrap(), with(&fitted).unwrap());
        let sent = |c: &SplitCandidate| match &c.rule {
            SplitRule::Categorical { left } => (1..=2000u16).filter(|&b| left.contains(b)).count(),
            _ => unreachable!(),
        };
        // the measured search sends more levels than the fitted one may
        let most = p.max_cat_threshold;
        assert!(sent(&a).min(2000 - sent(&a)) > most, "{}", sent(&a));
        assert!(sent(&b).min(2000 - sent(&b)) <= most, "{}", sent(&b));
    }

    #[test]
    fn each_node_estimates_its_prior_from_how_much_its_levels_differ() {
        let p = SplitParams::from_params(&Params::default());
        // levels far apart, rows that agree (an institution's earnings): the least prior
        let signal = prior_of(&levels_histogram(2000, 5, 10.0, 1.0, 1), &p);
        assert_eq!(signal, 1.0);
        // levels that are noise (tail numbers): the cap
        let noise = prior_of(&levels_histogram(2000, 5, 0.0, 1.0, 2), &p);
        assert_eq!(noise, p.cat_smooth);
        // level effects as large as a row's noise: σ²/τ² = 1, so the prior is PRIOR_FACTOR
        let even = prior_of(&levels_histogram(2000, 40, 1.0, 1.0, 3), &p);
        assert!((even / PRIOR_FACTOR - 1.0).abs() < 0.3, "{even}");
        // levels that all hold the same hessian cannot tell noise from level effects apart
        // (only sums reach the node): the cap
        let mut equal = vec![[0i64; 2]; 2001];
        for (i, bin) in equal.iter_mut().enumerate().skip(1) {
            *bin = [(i as i64 % 7 - 3) * 10_240, 5];
        }
        assert_eq!(prior_of(&equal, &p), p.cat_smooth);
        // the cap bounds it, and 0 turns shrinkage off
        let capped = SplitParams {
            cat_smooth: 2.0,
            ..p
        };
        assert_eq!(
            prior_of(&levels_histogram(2000, 40, 1.0, 1.0, 3), &capped),
            2.0
        );
        let off = SplitParams {
            cat_smooth: 0.0,
            ..p
        };
        assert_eq!(prior_of(&levels_histogram(2000, 5, 0.0, 1.0, 2), &off), 0.0);
        // fewer than 3 levels: the cap
        assert_eq!(
            prior_of(&[[0, 0], [10_240, 2], [-10_240, 3]], &p),
            p.cat_smooth
        );
        // deviations on a line through the origin, no noise (σ² = 0): the floor
        let mut line = vec![[0i64; 2]];
        for hess in 1..=50i64 {
            line.push([hess * 3 * 1024, hess]);
            line.push([-hess * 3 * 1024, hess]);
        }
        assert_eq!(prior_of(&line, &p), 1.0);
    }

    /// The gain and left levels of `categorical` on `h` under `p`.
    fn categorical_split(h: &[HistBin], p: &SplitParams) -> Option<(f64, Vec<u16>)> {
        let total = h.iter().fold([0i64; 2], |a, &b| add(a, b));
        let units = Units {
            grad: 1.0 / 1024.0,
            hess: 1.0,
        };
        let (g, hh) = (total[0] as f64 * units.grad, total[1] as f64);
        let ctx = Ctx {
            p,
            bounds: None,
            units,
            total,
            parent_gain: leaf_gain(g, hh, p, p.lambda),
            count_factor: 1.0,
            count: 0,
            noise: None,
        };
        categorical(0, h, &ctx).map(|c| match c.rule {
            SplitRule::Categorical { left } => (
                c.gain,
                (1..h.len() as u16).filter(|&b| left.contains(b)).collect(),
            ),
            _ => unreachable!(),
        })
    }

    #[test]
    fn the_search_shrinks_by_the_nodes_own_prior() {
        let p = SplitParams::from_params(&Params::default());
        let with_cap = |cat_smooth: f64| SplitParams { cat_smooth, ..p };
        // levels that are the signal: the prior is 1 whatever the cap, so the search is the
        // one a cap of 1 gives (a constant prior of 100 would shrink it to another)
        let signal = levels_histogram(2000, 5, 10.0, 1.0, 1);
        let found = categorical_split(&signal, &with_cap(100.0));
        assert!(found.is_some());
        assert_eq!(found, categorical_split(&signal, &with_cap(1.0)));
        // levels that are noise: the prior is the cap, so the cap matters
        let noise = levels_histogram(2000, 5, 0.0, 1.0, 2);
        assert_ne!(
            categorical_split(&noise, &with_cap(100.0)),
            categorical_split(&noise, &with_cap(1.0))
        );
    }

    #[test]
    fn nodes_of_more_levels_than_the_unshrunk_limit_shrink_whatever_the_levels_scanned() {
        let p = SplitParams::from_params(&Params::default());
        assert!(
            p.max_cat_threshold > UNSHRUNK_LEVELS,
            "the default scans more"
        );
        let unshrunk = SplitParams {
            cat_smooth: 0.0,
            ..p
        };
        // noise levels: shrunk, their best partition gains less than the unshrunk one
        let above = levels_histogram(UNSHRUNK_LEVELS + 8, 5, 0.0, 1.0, 7);
        let (shrunk_gain, _) = categorical_split(&above, &p).unwrap();
        let (raw_gain, _) = categorical_split(&above, &unshrunk).unwrap();
        assert!(shrunk_gain < raw_gain, "{shrunk_gain} {raw_gain}");
        // at the limit the search is the unshrunk one
        let at = levels_histogram(UNSHRUNK_LEVELS, 5, 0.0, 1.0, 7);
        assert_eq!(
            categorical_split(&at, &p),
            categorical_split(&at, &unshrunk)
        );
        // a lower max_cat_threshold lowers the limit with it
        let low = SplitParams {
            max_cat_threshold: 8,
            ..p
        };
        assert_eq!(unshrunk_levels(&low), 8);
        let nine = levels_histogram(9, 5, 0.0, 1.0, 7);
        let low_unshrunk = SplitParams {
            cat_smooth: 0.0,
            ..low
        };
        assert!(
            categorical_split(&nine, &low).unwrap().0
                < categorical_split(&nine, &low_unshrunk).unwrap().0
        );
    }

    proptest! {
        #[test]
        fn the_selected_ends_are_the_ends_of_the_full_order(
            levels in 5usize..120,
            threshold in 1usize..12,
            seed in 0u64..1000,
        ) {
            // unshrunk, so that the reference is short: sort every level by g/h, scan up to
            // `take` levels from each end
            let mut h = levels_histogram(levels, 3, 1.0, 1.0, seed);
            // some levels absent from the node
            for (i, bin) in h.iter_mut().enumerate().skip(1) {
                if (i as u64 + seed).is_multiple_of(5) {
                    *bin = [0, 0];
                }
            }
            let p = SplitParams {
                cat_smooth: 0.0,
                max_cat_threshold: threshold,
                min_child_weight: 0.0,
                ..SplitParams::from_params(&Params::default())
            };
            let total = h.iter().fold([0i64; 2], |a, &b| add(a, b));
            let units = Units { grad: 1.0 / 1024.0, hess: 1.0 };
            let (g, hh) = (total[0] as f64 * units.grad, total[1] as f64);
            let ctx = Ctx { p: &p, bounds: None, units, total, parent_gain: leaf_gain(g, hh, &p, p.lambda), count_factor: 1.0, count: 0, noise: None };
            let got = categorical(0, &h, &ctx);
            let mut order: Vec<usize> = (1..h.len()).filter(|&b| h[b][1] > 0).collect();
            order.sort_by(|&a, &b| {
                let r = |x: usize| h[x][0] as f64 / h[x][1] as f64;
                r(a).total_cmp(&r(b)).then(a.cmp(&b))
            });
            let take = p.max_cat_threshold.min(order.len().div_ceil(2)).min(order.len().saturating_sub(1)).max(1);
            let mut want: Option<(f64, Vec<u16>)> = None;
            for end in [order.clone(), order.iter().rev().copied().collect()] {
                let mut left = [0i64; 2];
                let mut bins = Vec::new();
                for &b in end.iter().take(take) {
                    left = add(left, h[b]);
                    bins.push(b as u16);
                    if let Some((gain, _)) = ctx.gain(left, p.lambda + p.cat_l2, 0) {
                        if want.as_ref().is_none_or(|w| gain > w.0) {
                            let mut sorted = bins.clone();
                            sorted.sort_unstable();
                            want = Some((gain, sorted));
                        }
                    }
                }
            }
            let got = got.map(|c| match c.rule {
                SplitRule::Categorical { left } => (c.gain, (1..h.len() as u16).filter(|&b| left.contains(b)).collect::<Vec<u16>>()),
                _ => unreachable!(),
            });
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn ties_prefer_the_lower_feature() {
        let cuts = Cuts::new(vec![
            FeatureCuts::Numeric {
                thresholds: vec![0.5],
            },
            FeatureCuts::Numeric {
                thresholds: vec![0.5],
            },
        ]);
        // identical histograms for both features
        let f = [[0i64, 0], [-10, 5], [10, 5]];
        let hist: Vec<HistBin> = f.iter().chain(f.iter()).copied().collect();
        let p = SplitParams::from_params(&Params::default());
        let c = best_split(
            NodeView {
                hist: &hist,
                sums: [0, 10],
                count: 10,
                occupied: None,
                noise: None,
            },
            &cuts,
            &[1, 0],
            Units {
                grad: 1.0,
                hess: 1.0,
            },
            &p,
        )
        .unwrap();
        assert_eq!(c.feature, 0);
    }
}
