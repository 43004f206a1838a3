//! Learning to rank: query groups, LambdaMART gradients (`rank:ndcg`, `rank:map`,
//! `rank:pairwise`) and the ranking metrics (`ndcg@k`, `map@k`, `pre@k`).
//!
//! Gradients are computed on the host for every backend, one query at a time, from the
//! query's rows alone; a query is never split between workers, so the gradients (and the
//! model) are the same for any number of workers. The logistic of score differences is read
//! from the binary objective's fixed-point table, and gains and discounts come from
//! [`crate::detmath`], so machines with different C libraries agree to the bit.

use std::cmp::Ordering;

use rayon::prelude::*;

use crate::detmath;
use crate::error::{Error, Result};

mod lanes;
pub(crate) mod params;

pub use params::{Gains, PairMethod, RankLoss, RankParams};

/// Query boundaries: query q holds rows `offsets[q]..offsets[q + 1]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Queries {
    offsets: Vec<u32>,
}

impl Queries {
    /// Groups from one query id per row; rows of a query must be contiguous (the error names
    /// `column` and the row where a query comes back).
    pub fn from_ids(ids: &[i64], column: &str) -> Result<Self> {
        let mut offsets = vec![0u32];
        let mut seen = std::collections::HashSet::new();
        for i in 1..ids.len() {
            if ids[i] != ids[i - 1] {
                if !seen.insert(ids[i - 1]) {
                    unreachable!("a finished query is inserted once");
                }
                if seen.contains(&ids[i]) {
                    return Err(Error::param(
                        "group",
                        format!(
                            "column `{column}`, row {i}: query {} appears again after other \
                             queries; the rows of a query must be contiguous (sort by `{column}`)",
                            ids[i]
                        ),
                    ));
                }
                offsets.push(i as u32);
            }
        }
        if !ids.is_empty() {
            offsets.push(ids.len() as u32);
        }
        Ok(Queries { offsets })
    }

    /// Groups from the number of rows of each query (XGBoost's `group` sizes).
    pub fn from_sizes(sizes: &[u32]) -> Self {
        let mut offsets = Vec::with_capacity(sizes.len() + 1);
        offsets.push(0u32);
        for &s in sizes {
            offsets.push(offsets.last().copied().unwrap_or(0) + s);
        }
        Queries { offsets }
    }

    /// Queries.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows over all queries.
    pub fn n_rows(&self) -> usize {
        self.offsets.last().copied().unwrap_or(0) as usize
    }

    /// The rows of query `q`.
    pub fn rows(&self, q: usize) -> std::ops::Range<usize> {
        self.offsets[q] as usize..self.offsets[q + 1] as usize
    }

    /// Rows of the longest query (0 when there is none).
    pub fn longest(&self) -> usize {
        self.offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    /// The boundaries, `len() + 1` values from 0.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The queries of `rows`, renumbered from its first row; `None` when `rows` starts or
    /// ends inside a query.
    pub fn slice(&self, rows: std::ops::Range<usize>) -> Option<Queries> {
        let lo = self.offsets.binary_search(&(rows.start as u32)).ok()?;
        let hi = self.offsets.binary_search(&(rows.end as u32)).ok()?;
        Some(Queries {
            offsets: self.offsets[lo..=hi]
                .iter()
                .map(|&o| o - rows.start as u32)
                .collect(),
        })
    }

    /// `blocks` moved to query boundaries: each inner boundary to the first query start at or
    /// after it; `None` when a block would be left empty (fewer queries than blocks).
    pub fn align(&self, blocks: &[std::ops::Range<usize>]) -> Option<Vec<std::ops::Range<usize>>> {
        let mut out = Vec::with_capacity(blocks.len());
        let mut start = 0usize;
        for (i, b) in blocks.iter().enumerate() {
            let end = if i + 1 == blocks.len() {
                self.n_rows()
            } else {
                let at = self.offsets.partition_point(|&o| (o as usize) < b.end);
                self.offsets.get(at).map_or(self.n_rows(), |&o| o as usize)
            };
            if end <= start {
                return None;
            }
            out.push(start..end);
            start = end;
        }
        Some(out)
    }
}

/// Where the `mean` pair method's draws come from: the round's key and the global index
/// of the shard's first row, so that a document draws the same partners on any worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairDraws {
    /// The key of (seed, [`crate::hash::Stream::RankPairs`], round).
    pub key: crate::hash::HashKey,
    /// Global index of the shard's first row.
    pub row_offset: u64,
}

#[inline]
fn discount(rank: usize) -> f64 {
    1.0 / detmath::log2((rank + 2) as f64)
}

/// [`discount`] of ranks `0..n`: a pair's two discounts are read, not recomputed (a
/// logarithm each, most of a pair's cost before).
fn discounts(n: usize) -> Vec<f64> {
    (0..n).map(discount).collect()
}

/// Rows of one query ordered by score, highest first; ties keep row order.
fn ranked(scores: &[f32]) -> Vec<usize> {
    if scores.iter().any(|s| s.is_nan()) || scores.len() > u32::MAX as usize {
        return ranked_by_comparing(scores);
    }
    // one u64 a row, the score's order above the row's: every key differs, so an unstable
    // sort of plain integers gives the order the comparison sort gives, at a fraction of
    // the cost (a long query's ranking was a sixth of its gradients' time)
    let mut keys: Vec<u64> = scores
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            // +0 for -0, which compares equal to it; then bits that ascend with the score
            let bits = (s + 0.0).to_bits();
            let ascending = if bits >> 31 == 1 {
                !bits
            } else {
                bits | 0x8000_0000
            };
            (u64::from(!ascending) << 32) | i as u64
        })
        .collect();
    keys.sort_unstable();
    keys.into_iter()
        .map(|k| (k & 0xffff_ffff) as usize)
        .collect()
}

/// [`ranked`] by comparing scores, for a query with NaN scores (equal to every score, as
/// the order always had them).
fn ranked_by_comparing(scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| {
        scores[b]
            .partial_cmp(&scores[a])
            .unwrap_or(Ordering::Equal)
            .then(a.cmp(&b))
    });
    order
}

/// 1 / the ideal DCG over the top `k` (0 when no document is relevant); `discounts` holds
/// at least `k` ranks' discounts.
fn inverse_ideal_dcg(labels: &[f32], k: usize, gains: &Gains, discounts: &[f64]) -> f64 {
    let mut sorted: Vec<f32> = labels.to_vec();
    // values equal in the total order are the same bits: no order among them to keep
    sorted.sort_unstable_by(|a, b| b.total_cmp(a));
    let idcg: f64 = sorted
        .iter()
        .take(k)
        .zip(discounts)
        .map(|(&y, &d)| gains.of(y) * d)
        .sum();
    if idcg > 0.0 {
        1.0 / idcg
    } else {
        0.0
    }
}

/// Calls `visit` with `per_doc` drawn partners of each document of one query (of another
/// label), as (rank, rank) in the model's `order`, in a fixed order (`first_row`: the
/// query's global first row).
#[inline(always)]
fn drawn_pairs(
    per_doc: u32,
    labels: &[f32],
    order: &[usize],
    draws: PairDraws,
    first_row: u64,
    mut visit: impl FnMut(usize, usize),
) {
    let n = labels.len();
    // ranks sorted by label, so the documents sharing a label form one run to skip
    let mut by_label: Vec<usize> = (0..n).collect();
    by_label.sort_by(|&a, &b| {
        labels[order[a]]
            .total_cmp(&labels[order[b]])
            .then(a.cmp(&b))
    });
    let mut run_start = 0;
    while run_start < n {
        let y = labels[order[by_label[run_start]]];
        let run_end = run_start
            + by_label[run_start..]
                .iter()
                .take_while(|&&r| labels[order[r]] == y)
                .count();
        let others = n - (run_end - run_start);
        if others > 0 {
            for &r in &by_label[run_start..run_end] {
                let row = first_row + order[r] as u64;
                for d in 0..per_doc as u64 {
                    let u = draws.key.hash64(row * per_doc as u64 + d) % others as u64;
                    let u = u as usize;
                    let pick = if u < run_start {
                        u
                    } else {
                        u + (run_end - run_start)
                    };
                    let partner = by_label[pick];
                    visit(r.min(partner), r.max(partner));
                }
            }
        }
        run_start = run_end;
    }
}

/// The logistic function of a ranking pair's score gap.
#[derive(Clone, Copy)]
pub enum PairLogistic<'a> {
    /// The binary objective's fixed-point table ([`crate::objective::sigmoid_table`]: 2^-8
    /// steps, interpolated), as LightGBM's lambdarank reads one: an exponential a pair was
    /// most of a long query's cost. What training uses.
    Table(&'a [u32]),
    /// Any function (the exact logistic, in tests).
    Function(&'a (dyn Fn(f64) -> f64 + Sync)),
}

impl PairLogistic<'_> {
    /// The logistic of `gap`.
    #[inline(always)]
    fn at(&self, gap: f64) -> f64 {
        match self {
            PairLogistic::Table(t) => {
                crate::objective::sigmoid_fixed_in(t, gap as f32) as f64
                    * crate::objective::PROB_UNIT
            }
            PairLogistic::Function(f) => f(gap),
        }
    }
}

/// What the gradient of a pair of one query needs, by rank.
struct PairTerms<'a> {
    loss: RankLoss,
    ys: &'a [f32],
    ss: &'a [f32],
    gains: &'a [f64],
    discounts: &'a [f64],
    inv_idcg: f64,
    /// Whether |Δ| is divided by the score gap (NDCG, scores not all equal).
    damp: bool,
    n_rel: &'a [f64],
    acc: &'a [f64],
    logistic: PairLogistic<'a>,
    /// [`RankParams::hessian_scale`].
    hessian_scale: f64,
}

impl PairTerms<'_> {
    /// The gradient and hessian of the pair of ranks (`hi`, `lo`), `hi`'s label the higher.
    #[inline(always)]
    fn terms(&self, hi: usize, lo: usize) -> (f64, f64) {
        self.terms_with(hi, lo, |gap| self.logistic.at(gap))
    }

    /// [`Self::terms`] with the logistic at hand (chosen once for many pairs).
    #[inline(always)]
    fn terms_with(&self, hi: usize, lo: usize, logistic: impl Fn(f64) -> f64) -> (f64, f64) {
        let delta = match self.loss {
            RankLoss::Pairwise => 1.0,
            RankLoss::Ndcg => {
                ((self.gains[hi] - self.gains[lo]) * (self.discounts[hi] - self.discounts[lo]))
                    .abs()
                    * self.inv_idcg
            }
            RankLoss::Map => map_delta(self.ys[hi], self.ys[lo], hi, lo, self.n_rel, self.acc),
        };
        let mut delta = delta.abs();
        let diff = self.ss[hi] as f64 - self.ss[lo] as f64;
        if self.damp {
            // LightGBM's and XGBoost's damping of pairs already far apart
            delta /= diff.abs() + 0.01;
        }
        let sigmoid = logistic(diff);
        let lambda = (sigmoid - 1.0) * delta;
        let hess = (sigmoid * (1.0 - sigmoid)).max(1e-16) * delta * self.hessian_scale;
        (lambda, hess)
    }

    /// Adds the pairs of rank `a` with each rank of `a + 1..n` (for NDCG and RankNet):
    /// the other rank's terms to `sums` at once, `a`'s own and the pairs' -λ summed in
    /// [`SUM_LANES`] lanes by the other rank's distance from `a` (as the AVX-512 lanes sum
    /// them), then added as [`lanes_total`] adds them. Equal labels add nothing.
    fn add_row_with(
        &self,
        a: usize,
        sums: &mut RankSums,
        sum_lambda: &mut f64,
        logistic: impl Fn(f64) -> f64,
    ) {
        let ya = self.ys[a];
        let mut part = [[0.0f64; SUM_LANES]; 3];
        for b in a + 1..self.ys.len() {
            let yb = self.ys[b];
            if yb == ya {
                continue;
            }
            let a_higher = ya > yb;
            let (hi, lo) = if a_higher { (a, b) } else { (b, a) };
            let (lambda, hess) = self.terms_with(hi, lo, &logistic);
            let signed = if a_higher { lambda } else { -lambda };
            let j = (b - a - 1) % SUM_LANES;
            part[0][j] += signed;
            part[1][j] += hess;
            part[2][j] += lambda;
            sums.g[b] -= signed;
            sums.h[b] += hess;
        }
        sums.g[a] += lanes_total(&part[0]);
        sums.h[a] += lanes_total(&part[1]);
        *sum_lambda -= lanes_total(&part[2]);
    }

    /// [`Self::add_row_with`] for every rank of the top, the logistic chosen once.
    fn add_rows(&self, top: usize, sums: &mut RankSums, sum_lambda: &mut f64) {
        match self.logistic {
            PairLogistic::Table(t) => {
                let logistic = |gap| PairLogistic::Table(t).at(gap);
                for a in 0..top {
                    self.add_row_with(a, sums, sum_lambda, logistic);
                }
            }
            PairLogistic::Function(f) => {
                for a in 0..top {
                    self.add_row_with(a, sums, sum_lambda, f);
                }
            }
        }
    }
}

/// Lanes a row's own sums are kept in: a row's pairs then add in eight independent chains
/// instead of one (whose latency bounded a long query's gradients), with or without
/// vector lanes alike.
const SUM_LANES: usize = 8;

/// The total of a row's lanes, in one fixed order.
#[inline(always)]
fn lanes_total(v: &[f64; SUM_LANES]) -> f64 {
    ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))
}

/// Gradient and hessian sums of a query's ranks, by rank.
struct RankSums {
    g: Vec<f64>,
    h: Vec<f64>,
}

/// The gradients of one query: `labels` and `scores` of its rows, `out` its (g, h) pairs;
/// `discounts` holds at least as many ranks' discounts as the query has rows.
#[allow(clippy::too_many_arguments)]
fn query_gradients(
    p: &RankParams,
    labels: &[f32],
    scores: &[f32],
    draws: PairDraws,
    first_row: u64,
    discounts: &[f64],
    logistic: PairLogistic<'_>,
    out: &mut [[f64; 2]],
) {
    let n = labels.len();
    if n < 2 {
        return;
    }
    let order = ranked(scores);
    let top = match p.pairs {
        PairMethod::TopK(k) => (k as usize).min(n),
        PairMethod::Mean(_) => n,
    };
    let inv_idcg = inverse_ideal_dcg(labels, top.max(1), &p.gains, discounts);
    // labels, scores and gains in rank order, and the gradients gathered by rank: a long
    // query's tens of thousands of pairs a round then read and write memory in order (a
    // gain is computed once a row, not twice a pair: an exponential each)
    let ys: Vec<f32> = order.iter().map(|&i| labels[i]).collect();
    let ss: Vec<f32> = order.iter().map(|&i| scores[i]).collect();
    let gains: Vec<f64> = if p.loss == RankLoss::Ndcg {
        ys.iter().map(|&y| p.gains.of(y)).collect()
    } else {
        Vec::new()
    };
    let mut by_rank = vec![[0.0f64; 2]; n];
    // MAP statistics along the model's ranking: relevant documents up to each rank, and
    // the sum of precisions at relevant ranks up to each rank
    let (mut n_rel, mut acc) = (vec![0.0f64; n], vec![0.0f64; n]);
    if p.loss == RankLoss::Map {
        let (mut hits, mut sum) = (0.0, 0.0);
        for (r, &i) in order.iter().enumerate() {
            if labels[i] > 0.0 {
                hits += 1.0;
                sum += hits / (r + 1) as f64;
            }
            n_rel[r] = hits;
            acc[r] = sum;
        }
    }
    let (best, worst) = (scores[order[0]], scores[order[n - 1]]);
    let mut sum_lambda = 0.0f64;
    let pair = PairTerms {
        loss: p.loss,
        ys: &ys,
        ss: &ss,
        gains: &gains,
        discounts,
        inv_idcg,
        damp: p.loss == RankLoss::Ndcg && best != worst,
        n_rel: &n_rel,
        acc: &acc,
        logistic,
        hessian_scale: p.hessian_scale,
    };
    match p.pairs {
        PairMethod::TopK(_) => {
            // every pair with one document in the top; NDCG's and RankNet's rows in
            // lanes (eight pairs at a time where the CPU has AVX-512, their sums in eight
            // lanes either way, so the same bits)
            if p.loss == RankLoss::Map {
                top_pairs(&pair, top, &mut by_rank, &mut sum_lambda);
            } else {
                let mut sums = RankSums {
                    g: vec![0.0; n],
                    h: vec![0.0; n],
                };
                match lanes::PairLanes::new(&pair) {
                    Some(lanes) => {
                        for a in 0..top {
                            lanes.add_row(a, &mut sums, &mut sum_lambda);
                        }
                    }
                    None => pair.add_rows(top, &mut sums, &mut sum_lambda),
                }
                for (gh, (&g, &h)) in by_rank.iter_mut().zip(sums.g.iter().zip(&sums.h)) {
                    *gh = [g, h];
                }
            }
        }
        PairMethod::Mean(per_doc) => {
            drawn_pairs(per_doc, labels, &order, draws, first_row, |r_a, r_b| {
                let (hi, lo) = if ys[r_a] > ys[r_b] {
                    (r_a, r_b)
                } else {
                    (r_b, r_a)
                };
                let (lambda, hess) = pair.terms(hi, lo);
                by_rank[hi][0] += lambda;
                by_rank[lo][0] -= lambda;
                by_rank[hi][1] += hess;
                by_rank[lo][1] += hess;
                sum_lambda -= lambda;
            });
        }
    }
    finish(p, &order, &by_rank, sum_lambda, out);
}

/// Every pair of ranks with one in the `top`, row by row, its terms added to `by_rank`
/// and its -λ to `sum_lambda`: the rank in the top keeps its sums in registers over its
/// row, the other's are read and written in rank order. For MAP's pairs, whose cost is
/// their walk over the ranks between (`map_delta`).
fn top_pairs(pair: &PairTerms<'_>, top: usize, by_rank: &mut [[f64; 2]], sum_lambda: &mut f64) {
    let ys = pair.ys;
    for a in 0..top {
        let ya = ys[a];
        let (mut g_a, mut h_a) = (0.0f64, 0.0f64);
        for (b, gb) in by_rank.iter_mut().enumerate().skip(a + 1) {
            let yb = ys[b];
            if yb == ya {
                continue;
            }
            let a_higher = ya > yb;
            let (hi, lo) = if a_higher { (a, b) } else { (b, a) };
            let (lambda, hess) = pair.terms(hi, lo);
            if a_higher {
                g_a += lambda;
                gb[0] -= lambda;
            } else {
                g_a -= lambda;
                gb[0] += lambda;
            }
            h_a += hess;
            gb[1] += hess;
            *sum_lambda -= lambda;
        }
        by_rank[a][0] += g_a;
        by_rank[a][1] += h_a;
    }
}

/// A query's gradients from its ranks' sums, back in row order, normalised where asked.
fn finish(
    p: &RankParams,
    order: &[usize],
    by_rank: &[[f64; 2]],
    sum_lambda: f64,
    out: &mut [[f64; 2]],
) {
    for (&i, gh) in order.iter().zip(by_rank) {
        out[i] = *gh;
    }
    if p.normalise && sum_lambda > 0.0 {
        let norm = detmath::log2(1.0 + sum_lambda) / sum_lambda;
        for o in out.iter_mut() {
            o[0] *= norm;
            o[1] *= norm;
        }
    }
}

/// The change in average precision of swapping the documents at ranks `r_hi` and `r_lo`
/// (0-based; binary relevance: label > 0), from relevant counts and precision sums by rank.
fn map_delta(y_hi: f32, y_lo: f32, r_hi: usize, r_lo: usize, n_rel: &[f64], acc: &[f64]) -> f64 {
    let total = n_rel[n_rel.len() - 1];
    let (rel_hi, rel_lo) = (y_hi > 0.0, y_lo > 0.0);
    if total <= 0.0 || rel_hi == rel_lo {
        return 0.0;
    }
    // brute force over the ranks between the two: exact and simple for top-k pairs
    let (first, last) = (r_hi.min(r_lo), r_hi.max(r_lo));
    let rel_first = if r_hi < r_lo { rel_hi } else { rel_lo };
    let before = if first == 0 { 0.0 } else { n_rel[first - 1] };
    let acc_before = if first == 0 { 0.0 } else { acc[first - 1] };
    // recompute the precision sum over [first, last] with the two swapped
    let mut hits = before;
    let mut sum = 0.0;
    for r in first..=last {
        let rel = if r == first {
            !rel_first
        } else if r == last {
            rel_first
        } else {
            n_rel[r] - n_rel[r - 1] > 0.0
        };
        if rel {
            hits += 1.0;
            sum += hits / (r + 1) as f64;
        }
    }
    let original = acc[last] - acc_before;
    (sum - original) / total
}

/// LambdaMART gradients of every row (weighted by row) into `out`, query by query; returns
/// the largest |g| and h. `logistic` is the logistic function of a pair's score gap: the
/// boosting loop passes the binary objective's fixed-point table.
#[allow(clippy::too_many_arguments)]
pub fn gradients(
    p: &RankParams,
    queries: &Queries,
    labels: &[f32],
    weights: Option<&[f32]>,
    margins: &[f32],
    draws: PairDraws,
    logistic: PairLogistic<'_>,
    out: &mut [[f32; 2]],
) -> [f32; 2] {
    let discounts = discounts(queries.longest());
    let per_query: Vec<(usize, Vec<[f64; 2]>)> = (0..queries.len())
        .into_par_iter()
        .map(|q| {
            let rows = queries.rows(q);
            let mut g = vec![[0.0f64; 2]; rows.len()];
            let first_row = draws.row_offset + rows.start as u64;
            query_gradients(
                p,
                &labels[rows.clone()],
                &margins[rows.clone()],
                draws,
                first_row,
                &discounts,
                logistic,
                &mut g,
            );
            (rows.start, g)
        })
        .collect();
    let mut max = [0.0f32; 2];
    for (start, g) in per_query {
        for (j, gh) in g.into_iter().enumerate() {
            let w = weights.map_or(1.0, |w| w[start + j] as f64);
            let v = [(gh[0] * w) as f32, (gh[1] * w) as f32];
            max[0] = max[0].max(v[0].abs());
            max[1] = max[1].max(v[1]);
            out[start + j] = v;
        }
    }
    max
}

/// The ranking metrics, per query then averaged over queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankMetric {
    /// Normalised DCG over the top k (the objective's gains: 2^label - 1 unless
    /// `ndcg_exp_gain` or `label_gain` says otherwise); a query without relevant documents
    /// scores 1.
    Ndcg,
    /// Average precision over the top k; a query without relevant documents there scores 1.
    Map,
    /// Precision at k.
    Precision,
}

/// The metric over the top `k` (all rows when `None`), averaged over queries weighted by
/// their first row's weight; NDCG takes its labels' `gains`.
pub fn evaluate(
    metric: RankMetric,
    k: Option<u32>,
    gains: &Gains,
    queries: &Queries,
    labels: &[f32],
    weights: Option<&[f32]>,
    margins: &[f32],
) -> f64 {
    let (mut sum, mut total) = (0.0f64, 0.0f64);
    let discounts = discounts(queries.longest());
    for q in 0..queries.len() {
        let rows = queries.rows(q);
        let (y, s) = (&labels[rows.clone()], &margins[rows.clone()]);
        let n = y.len();
        let k = k.map_or(n, |k| (k as usize).min(n));
        let order = ranked(s);
        let value = match metric {
            RankMetric::Ndcg => {
                let inv = inverse_ideal_dcg(y, k, gains, &discounts);
                if inv == 0.0 {
                    1.0
                } else {
                    let dcg: f64 = order
                        .iter()
                        .take(k)
                        .zip(&discounts)
                        .map(|(&i, &d)| gains.of(y[i]) * d)
                        .sum();
                    dcg * inv
                }
            }
            RankMetric::Map => {
                let (mut hits, mut ap) = (0.0, 0.0);
                for (r, &i) in order.iter().take(k).enumerate() {
                    if y[i] > 0.0 {
                        hits += 1.0;
                        ap += hits / (r + 1) as f64;
                    }
                }
                if hits > 0.0 {
                    ap / hits
                } else {
                    1.0
                }
            }
            RankMetric::Precision => {
                let hits = order.iter().take(k).filter(|&&i| y[i] > 0.0).count();
                hits as f64 / k.max(1) as f64
            }
        };
        let w = weights.map_or(1.0, |w| w[rows.start] as f64);
        sum += w * value;
        total += w;
    }
    if total > 0.0 {
        sum / total
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ndcg_of(order: &[usize], labels: &[f32]) -> f64 {
        let dcg: f64 = order
            .iter()
            .enumerate()
            .map(|(r, &i)| (2f64.powf(labels[i] as f64) - 1.0) / ((r + 2) as f64).log2())
            .sum();
        dcg * inverse_ideal_dcg(
            labels,
            labels.len(),
            &Gains::Exponential,
            &discounts(labels.len()),
        )
    }

    fn ap_of(order: &[usize], labels: &[f32]) -> f64 {
        let (mut hits, mut ap) = (0.0, 0.0);
        for (r, &i) in order.iter().enumerate() {
            if labels[i] > 0.0 {
                hits += 1.0;
                ap += hits / (r + 1) as f64;
            }
        }
        let total = labels.iter().filter(|&&y| y > 0.0).count() as f64;
        ap / total
    }

    #[test]
    fn queries_must_be_contiguous() {
        let q = Queries::from_ids(&[7, 7, 3, 3, 3, 9], "qid").unwrap();
        assert_eq!(q.offsets(), &[0, 2, 5, 6]);
        assert_eq!(q.rows(1), 2..5);
        let e = Queries::from_ids(&[1, 1, 2, 1], "qid")
            .unwrap_err()
            .to_string();
        assert!(e.contains("qid") && e.contains("row 3"), "{e}");
        assert_eq!(Queries::from_sizes(&[2, 3, 1]), q);
        assert_eq!(q.slice(2..6).unwrap().offsets(), &[0, 3, 4]);
        assert!(q.slice(1..6).is_none());
        assert_eq!(q.align(&[0..3, 3..6]).unwrap(), vec![0..5, 5..6]);
        assert!(q.align(&[0..1, 1..2, 2..4, 4..6]).is_none());
    }

    #[test]
    fn swap_deltas_match_recomputed_metrics() {
        let labels = [0.0f32, 2.0, 1.0, 0.0, 3.0, 1.0];
        let scores = [0.3f32, 0.1, -0.2, 0.9, 0.0, 0.5];
        let order = ranked(&scores);
        let (mut n_rel, mut acc) = (vec![0.0; 6], vec![0.0; 6]);
        let (mut hits, mut sum) = (0.0, 0.0);
        for (r, &i) in order.iter().enumerate() {
            if labels[i] > 0.0 {
                hits += 1.0;
                sum += hits / (r + 1) as f64;
            }
            n_rel[r] = hits;
            acc[r] = sum;
        }
        for ra in 0..6 {
            for rb in ra + 1..6 {
                let mut swapped = order.clone();
                swapped.swap(ra, rb);
                let (a, b) = (order[ra], order[rb]);
                let want_ndcg = (ndcg_of(&swapped, &labels) - ndcg_of(&order, &labels)).abs();
                let (ga, gb) = (
                    Gains::Exponential.of(labels[a]),
                    Gains::Exponential.of(labels[b]),
                );
                let got = ((ga - gb) * (discount(ra) - discount(rb))).abs()
                    * inverse_ideal_dcg(&labels, 6, &Gains::Exponential, &discounts(6));
                assert!((got - want_ndcg).abs() < 1e-12, "ndcg {ra} {rb}");
                let want_map = ap_of(&swapped, &labels) - ap_of(&order, &labels);
                let (hi, lo, rh, rl) = if labels[a] > labels[b] {
                    (a, b, ra, rb)
                } else {
                    (b, a, rb, ra)
                };
                let got = map_delta(labels[hi], labels[lo], rh, rl, &n_rel, &acc);
                if (labels[a] > 0.0) != (labels[b] > 0.0) {
                    assert!(
                        (got - want_map).abs() < 1e-12,
                        "map {ra} {rb}: {got} vs {want_map}"
                    );
                }
            }
        }
    }

    #[test]
    fn ranking_by_keys_is_ranking_by_comparing() {
        let special = [
            0.0f32,
            -0.0,
            1e-40,
            -1e-40,
            f32::INFINITY,
            f32::NEG_INFINITY,
            3.5,
        ];
        for n in [0usize, 1, 2, 7, 100, 1000] {
            let scores: Vec<f32> = (0..n)
                .map(|i| {
                    let h = crate::hash::hash64(9, crate::hash::Stream::RankPairs, 1, i as u64);
                    if h.is_multiple_of(4) {
                        special[(h / 4 % special.len() as u64) as usize]
                    } else {
                        ((h >> 16) % 41) as f32 * 0.5 - 10.0
                    }
                })
                .collect();
            assert_eq!(ranked(&scores), ranked_by_comparing(&scores), "{scores:?}");
        }
        // NaN scores take the comparison
        assert_eq!(
            ranked(&[1.0, f32::NAN, 2.0]),
            ranked_by_comparing(&[1.0, f32::NAN, 2.0])
        );
    }

    fn exact_logistic(d: f64) -> f64 {
        1.0 / (1.0 + (-d).exp())
    }

    fn no_draws() -> PairDraws {
        PairDraws {
            key: crate::hash::HashKey::new(0, crate::hash::Stream::RankPairs, 0),
            row_offset: 0,
        }
    }

    #[test]
    fn mean_pairs_draw_partners_with_other_labels_keyed_on_global_rows() {
        let labels = [2.0f32, 0.0, 1.0, 0.0, 0.0, 1.0];
        let order: Vec<usize> = (0..6).rev().collect();
        let draws = no_draws();
        let collect = |labels: &[f32], order: &[usize], first_row| {
            let mut v = Vec::new();
            drawn_pairs(4, labels, order, draws, first_row, |a, b| v.push((a, b)));
            v
        };
        let got = collect(&labels, &order, 100);
        // every document has a partner with another label: 4 draws each
        assert_eq!(got.len(), 6 * 4);
        for &(a, b) in &got {
            assert!(a < b);
            assert_ne!(labels[order[a]], labels[order[b]]);
        }
        // every document appears as a drawer at least 4 times, and draws spread out
        for r in 0..6 {
            assert!(got.iter().filter(|&&(a, b)| a == r || b == r).count() >= 4);
        }
        // the same global rows draw the same partners; other rows draw others
        assert_eq!(got, collect(&labels, &order, 100));
        assert_ne!(got, collect(&labels, &order, 7));
        // a query where every label is equal has no pair
        assert!(collect(&[1.0; 3], &[0, 1, 2], 0).is_empty());
        // a shard starting later sees its query at another local index: same gradients
        let p = RankParams {
            loss: RankLoss::Ndcg,
            pairs: PairMethod::Mean(3),
            gains: Gains::Exponential,
            hessian_scale: 2.0,
            normalise: true,
        };
        let margins = [0.3f32, -0.2, 0.5, 0.1, 0.0, 0.4];
        let whole = Queries::from_sizes(&[2, 6]);
        let (mut a, mut b) = (vec![[0f32; 2]; 8], vec![[0f32; 2]; 6]);
        let lab8 = [1.0f32, 0.0, 2.0, 0.0, 1.0, 0.0, 0.0, 1.0];
        let m8 = [0.0f32, 0.1, 0.3, -0.2, 0.5, 0.1, 0.0, 0.4];
        gradients(
            &p,
            &whole,
            &lab8,
            None,
            &m8,
            draws,
            PairLogistic::Function(&exact_logistic),
            &mut a,
        );
        let shifted = PairDraws {
            row_offset: 2,
            ..draws
        };
        let part = Queries::from_sizes(&[6]);
        gradients(
            &p,
            &part,
            &lab8[2..],
            None,
            &margins,
            shifted,
            PairLogistic::Function(&exact_logistic),
            &mut b,
        );
        assert_eq!(&a[2..], &b[..]);
    }

    #[test]
    fn pairwise_gradients_are_ranknet_and_sum_to_zero() {
        let p = RankParams {
            loss: RankLoss::Pairwise,
            pairs: PairMethod::TopK(u32::MAX),
            gains: Gains::Exponential,
            hessian_scale: 2.0,
            normalise: false,
        };
        let q = Queries::from_sizes(&[2, 3]);
        let labels = [1.0f32, 0.0, 2.0, 0.0, 1.0];
        let margins = [0.2f32, 0.7, 0.0, 0.1, -0.3];
        let mut out = vec![[0f32; 2]; 5];
        gradients(
            &p,
            &q,
            &labels,
            None,
            &margins,
            no_draws(),
            PairLogistic::Function(&exact_logistic),
            &mut out,
        );
        // first query: one pair, high doc 0 with score 0.2 against 0.7
        let s = 1.0 / (1.0 + (-(0.2f64 - 0.7)).exp());
        assert!((out[0][0] as f64 - (s - 1.0)).abs() < 1e-6);
        assert!((out[1][0] as f64 + (s - 1.0)).abs() < 1e-6);
        assert!((out[0][1] as f64 - 2.0 * s * (1.0 - s)).abs() < 1e-6);
        for rows in [0..2, 2..5] {
            let total: f64 = out[rows].iter().map(|g| g[0] as f64).sum();
            assert!(total.abs() < 1e-6);
        }
    }

    #[test]
    fn metrics_match_their_definitions() {
        let q = Queries::from_sizes(&[4, 3]);
        let labels = [0.0f32, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0];
        let margins = [0.9f32, 0.1, 0.5, -1.0, 0.3, 0.2, 0.1];
        // query 0 ranks rows 0, 2, 1, 3; query 1 has no relevant document (scores 1)
        let dcg = 3.0 / 3f64.log2() + 1.0 / 4f64.log2();
        let idcg = 3.0 + 1.0 / 3f64.log2();
        let ndcg = evaluate(
            RankMetric::Ndcg,
            None,
            &Gains::Exponential,
            &q,
            &labels,
            None,
            &margins,
        );
        assert!((ndcg - (dcg / idcg + 1.0) / 2.0).abs() < 1e-12);
        let map = evaluate(
            RankMetric::Map,
            None,
            &Gains::Exponential,
            &q,
            &labels,
            None,
            &margins,
        );
        assert!((map - ((0.5 + 2.0 / 3.0) / 2.0 + 1.0) / 2.0).abs() < 1e-12);
        let pre = evaluate(
            RankMetric::Precision,
            Some(2),
            &Gains::Exponential,
            &q,
            &labels,
            None,
            &margins,
        );
        assert!((pre - (0.5 + 0.0) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn top_k_ndcg_gradients_match_a_brute_force_over_every_pair() {
        // XGBoost's hessian with 2^label - 1 gains; LightGBM's with a table of gains
        let table = [0.0, 0.5, 1.0, 10.0, 30.0];
        let configs = [
            (Gains::Exponential, 2.0),
            (Gains::Table(table.as_slice().into()), 1.0),
        ];
        for (gains, hessian_scale) in configs {
            top_k_ndcg_against_brute_force(gains, hessian_scale, &|v| match hessian_scale {
                2.0 => 2f64.powf(v as f64) - 1.0,
                _ => table[v as usize],
            });
        }
    }

    fn top_k_ndcg_against_brute_force(gains: Gains, hessian_scale: f64, gain: &dyn Fn(f32) -> f64) {
        // 3 queries of 60, 7 and 1 rows, labels 0-4 with ties, scores with ties
        let sizes = [60u32, 7, 1];
        let n: usize = sizes.iter().map(|&s| s as usize).sum();
        let labels: Vec<f32> = (0..n).map(|i| ((i * 7 + i / 3) % 5) as f32).collect();
        let margins: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.13)
            .collect();
        let q = Queries::from_sizes(&sizes);
        let k = 5usize;
        let p = RankParams {
            loss: RankLoss::Ndcg,
            pairs: PairMethod::TopK(k as u32),
            gains,
            hessian_scale,
            normalise: false,
        };
        let mut got = vec![[0f32; 2]; n];
        gradients(
            &p,
            &q,
            &labels,
            None,
            &margins,
            no_draws(),
            PairLogistic::Function(&exact_logistic),
            &mut got,
        );
        for query in 0..q.len() {
            let rows = q.rows(query);
            let (y, s) = (&labels[rows.clone()], &margins[rows.clone()]);
            let m = y.len();
            // ranks by score, ties in row order, as the model's ranking
            let mut order: Vec<usize> = (0..m).collect();
            order.sort_by(|&a, &b| s[b].partial_cmp(&s[a]).unwrap().then(a.cmp(&b)));
            let mut rank = vec![0; m];
            for (r, &i) in order.iter().enumerate() {
                rank[i] = r;
            }
            let disc = |r: usize| 1.0 / ((r + 2) as f64).log2();
            let mut ideal: Vec<f32> = y.to_vec();
            ideal.sort_by(|a, b| b.total_cmp(a));
            let idcg: f64 = ideal
                .iter()
                .take(k)
                .enumerate()
                .map(|(r, &v)| gain(v) * disc(r))
                .sum();
            let spread = s.iter().any(|&v| v != s[0]);
            let mut want = vec![[0f64; 2]; m];
            for i in 0..m {
                for j in 0..m {
                    // each unordered pair once, from its higher label; one of them in the top k
                    if y[i] <= y[j] || rank[i].min(rank[j]) >= k {
                        continue;
                    }
                    let diff = s[i] as f64 - s[j] as f64;
                    let mut delta =
                        ((gain(y[i]) - gain(y[j])) * (disc(rank[i]) - disc(rank[j]))).abs() / idcg;
                    if spread {
                        delta /= diff.abs() + 0.01;
                    }
                    let sig = 1.0 / (1.0 + (-diff).exp());
                    want[i][0] += (sig - 1.0) * delta;
                    want[j][0] -= (sig - 1.0) * delta;
                    want[i][1] += hessian_scale * sig * (1.0 - sig) * delta;
                    want[j][1] += hessian_scale * sig * (1.0 - sig) * delta;
                }
            }
            let scale = want
                .iter()
                .map(|w| w[0].abs().max(w[1]))
                .fold(1e-3, f64::max);
            for (r, w) in want.iter().enumerate() {
                let g = got[rows.start + r];
                // the same logistic, another order of additions
                assert!(
                    (g[0] as f64 - w[0]).abs() < 1e-5 * scale
                        && (g[1] as f64 - w[1]).abs() < 1e-5 * scale,
                    "query {query} row {r}: {g:?} vs {w:?}"
                );
            }
        }
    }
}
