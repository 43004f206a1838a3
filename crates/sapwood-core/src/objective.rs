//! Losses: per-row gradients computed so that every backend gets the same bits.
//!
//! Only single IEEE f32 operations that cannot be fused (no `a * b + c`), integer arithmetic
//! and lookup tables are used. The logistic and softmax functions are read from fixed-point
//! tables with integer interpolation; the tables come from [`crate::detmath`], so they are the
//! same on every machine. The WGSL and CUDA kernels upload the same tables. Subnormal inputs
//! and results are flushed to zero explicitly, so a GPU that flushes them agrees too.

mod lanes;
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::detmath;
use crate::error::{Error, Result};

/// The loss being minimised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ObjectiveKind {
    /// `reg:squarederror`: squared error on a real label.
    #[serde(rename = "reg:squarederror")]
    SquaredError,
    /// `reg:absoluteerror`: absolute error; leaves are refit to the weighted median residual.
    #[serde(rename = "reg:absoluteerror")]
    AbsoluteError,
    /// `reg:quantileerror`: pinball loss at `quantile_alpha`; leaves are refit to that
    /// quantile of the residuals.
    #[serde(rename = "reg:quantileerror")]
    QuantileError,
    /// `reg:pseudohubererror`: pseudo-Huber loss with scale `huber_slope`.
    #[serde(rename = "reg:pseudohubererror")]
    PseudoHuber,
    /// LightGBM's `huber`: squared error within `huber_slope` of the label, linear beyond.
    #[serde(rename = "huber")]
    Huber,
    /// `count:poisson`: Poisson log-likelihood on counts; predicts the mean, exp(margin).
    #[serde(rename = "count:poisson")]
    Poisson,
    /// `reg:tweedie`: Tweedie log-likelihood with `tweedie_variance_power`; predicts exp(margin).
    #[serde(rename = "reg:tweedie")]
    Tweedie,
    /// `reg:gamma`: gamma log-likelihood (log link) on positive labels; predicts exp(margin).
    #[serde(rename = "reg:gamma")]
    Gamma,
    /// `binary:logistic`: log loss on a 0/1 (or probability) label; outputs probabilities.
    #[serde(rename = "binary:logistic")]
    Logistic,
    /// `binary:logitraw`: the logistic loss, predicting the margin (log-odds).
    #[serde(rename = "binary:logitraw")]
    LogitRaw,
    /// `multi:softprob`: softmax cross-entropy; one tree per class per round.
    #[serde(rename = "multi:softprob")]
    Softprob,
    /// `multi:softmax`: the softprob loss, predicting the most likely class index.
    #[serde(rename = "multi:softmax")]
    Softmax,
    /// `rank:ndcg`: LambdaMART weighted by the change in NDCG; needs query groups.
    #[serde(rename = "rank:ndcg")]
    RankNdcg,
    /// `rank:map`: LambdaMART weighted by the change in mean average precision.
    #[serde(rename = "rank:map")]
    RankMap,
    /// `rank:pairwise`: RankNet, every mis-ordered pair alike.
    #[serde(rename = "rank:pairwise")]
    RankPairwise,
    /// `survival:cox`: Cox proportional hazards (partial likelihood, Breslow ties) on
    /// survival times, negative when censored; predicts the hazard ratio, exp(margin).
    #[serde(rename = "survival:cox")]
    Cox,
    /// `custom`: a custom objective's model with `num_class` outputs (LightGBM's name):
    /// gradients come from the caller (Python `obj=`, Rust
    /// [`crate::train::TrainObserver::gradients`]) and predictions are the margins.
    #[serde(rename = "custom")]
    Custom,
}

impl ObjectiveKind {
    /// Every objective, in the order users see them listed.
    pub const ALL: [ObjectiveKind; 17] = [
        ObjectiveKind::SquaredError,
        ObjectiveKind::AbsoluteError,
        ObjectiveKind::QuantileError,
        ObjectiveKind::PseudoHuber,
        ObjectiveKind::Huber,
        ObjectiveKind::Poisson,
        ObjectiveKind::Tweedie,
        ObjectiveKind::Gamma,
        ObjectiveKind::Logistic,
        ObjectiveKind::LogitRaw,
        ObjectiveKind::Softprob,
        ObjectiveKind::Softmax,
        ObjectiveKind::RankNdcg,
        ObjectiveKind::RankMap,
        ObjectiveKind::RankPairwise,
        ObjectiveKind::Cox,
        ObjectiveKind::Custom,
    ];

    /// The XGBoost-style name.
    pub fn name(self) -> &'static str {
        match self {
            ObjectiveKind::SquaredError => "reg:squarederror",
            ObjectiveKind::AbsoluteError => "reg:absoluteerror",
            ObjectiveKind::QuantileError => "reg:quantileerror",
            ObjectiveKind::PseudoHuber => "reg:pseudohubererror",
            ObjectiveKind::Huber => "huber",
            ObjectiveKind::Poisson => "count:poisson",
            ObjectiveKind::Tweedie => "reg:tweedie",
            ObjectiveKind::Gamma => "reg:gamma",
            ObjectiveKind::Logistic => "binary:logistic",
            ObjectiveKind::LogitRaw => "binary:logitraw",
            ObjectiveKind::Softprob => "multi:softprob",
            ObjectiveKind::Softmax => "multi:softmax",
            ObjectiveKind::RankNdcg => "rank:ndcg",
            ObjectiveKind::RankMap => "rank:map",
            ObjectiveKind::RankPairwise => "rank:pairwise",
            ObjectiveKind::Cox => "survival:cox",
            ObjectiveKind::Custom => "custom",
        }
    }

    /// Whether this is a learning-to-rank loss over query groups.
    pub fn is_ranking(self) -> bool {
        matches!(
            self,
            ObjectiveKind::RankNdcg | ObjectiveKind::RankMap | ObjectiveKind::RankPairwise
        )
    }

    /// Whether labels are class indices.
    pub fn is_classification(self) -> bool {
        self.is_binary() || self.is_multiclass()
    }

    /// Whether this is a two-class loss on a 0/1 label.
    pub fn is_binary(self) -> bool {
        matches!(self, ObjectiveKind::Logistic | ObjectiveKind::LogitRaw)
    }

    /// Whether this is a softmax loss with one output group per class.
    pub fn is_multiclass(self) -> bool {
        matches!(self, ObjectiveKind::Softprob | ObjectiveKind::Softmax)
    }

    /// Whether `num_class` sets the outputs: the softmax losses and `custom`.
    pub fn takes_num_class(self) -> bool {
        self.is_multiclass() || self == ObjectiveKind::Custom
    }

    /// Whether predictions are exp(margin) (the log link of count and positive losses).
    pub fn has_log_link(self) -> bool {
        matches!(
            self,
            ObjectiveKind::Poisson
                | ObjectiveKind::Tweedie
                | ObjectiveKind::Gamma
                | ObjectiveKind::Cox
        )
    }

    /// Whether leaves are refit to a quantile of the residuals after a tree is grown.
    pub fn refits_leaves(self) -> bool {
        matches!(
            self,
            ObjectiveKind::AbsoluteError | ObjectiveKind::QuantileError
        )
    }
}

impl fmt::Display for ObjectiveKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ObjectiveKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.trim() {
            "reg:squarederror" | "regression" | "regression_l2" | "l2" | "mse"
            | "mean_squared_error" => ObjectiveKind::SquaredError,
            "reg:absoluteerror" | "regression_l1" | "l1" | "mae" | "mean_absolute_error" => {
                ObjectiveKind::AbsoluteError
            }
            "reg:quantileerror" | "quantile" => ObjectiveKind::QuantileError,
            "reg:pseudohubererror" => ObjectiveKind::PseudoHuber,
            "huber" => ObjectiveKind::Huber,
            "count:poisson" | "poisson" => ObjectiveKind::Poisson,
            "reg:tweedie" | "tweedie" => ObjectiveKind::Tweedie,
            "reg:gamma" | "gamma" => ObjectiveKind::Gamma,
            "binary:logistic" | "binary" => ObjectiveKind::Logistic,
            "binary:logitraw" => ObjectiveKind::LogitRaw,
            "multi:softprob" | "multiclass" | "softmax" => ObjectiveKind::Softprob,
            "multi:softmax" => ObjectiveKind::Softmax,
            "rank:ndcg" | "lambdarank" => ObjectiveKind::RankNdcg,
            "rank:map" => ObjectiveKind::RankMap,
            "rank:pairwise" => ObjectiveKind::RankPairwise,
            "survival:cox" => ObjectiveKind::Cox,
            "custom" => ObjectiveKind::Custom,
            other => return Err(Error::UnknownObjective(other.to_string())),
        })
    }
}

/// Fractional bits of the fixed-point margin used to index the tables.
pub const MARGIN_FRAC_BITS: u32 = 24;
/// Fixed-point probability unit: probabilities are integers times 2^-24.
pub const PROB_BITS: u32 = 24;
/// The logistic table spans margins in [-SIGMOID_RANGE, SIGMOID_RANGE].
pub const SIGMOID_RANGE: i32 = 20;
/// The logistic table has one entry every 2^-SIGMOID_STEP_BITS.
pub const SIGMOID_STEP_BITS: u32 = 8;
/// The exponential table spans [-EXP_RANGE, 0].
pub const EXP_RANGE: i32 = 20;
/// The exponential table has one entry every 2^-EXP_STEP_BITS.
pub const EXP_STEP_BITS: u32 = 10;
/// Smallest hessian an objective returns (before weighting), as XGBoost does.
pub const MIN_HESSIAN: f32 = 1e-16;
/// The base-2 exponential table has one entry every 2^-EXP2_STEP_BITS over [0, 1].
pub const EXP2_STEP_BITS: u32 = 10;
/// Fractional bits of the table's fixed-point values (entries lie in [2^23, 2^24]).
pub const EXP2_VALUE_BITS: u32 = 23;
/// Exponents (base 2) are clamped to ±EXP2_LIMIT, where every result is a normal f32.
pub const EXP2_LIMIT: f32 = 100.0;
/// log2(e) rounded to f32.
pub const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// `max_delta_step` of `count:poisson` when the parameter is 0 (XGBoost's default).
pub const POISSON_MAX_DELTA_STEP: f64 = 0.7;

pub(crate) const ONE: u32 = 1 << PROB_BITS;
/// The value of one unit of a fixed-point probability, 2^-24.
pub(crate) const PROB_UNIT: f64 = 1.0 / ONE as f64;

/// round(sigmoid(x) * 2^24) at x = -20 + i * 2^-8.
pub fn sigmoid_table() -> &'static [u32] {
    static T: LazyLock<Vec<u32>> = LazyLock::new(|| {
        let len = ((2 * SIGMOID_RANGE) << SIGMOID_STEP_BITS) as usize + 1;
        (0..len)
            .map(|i| {
                let x = -(SIGMOID_RANGE as f64) + i as f64 / (1u32 << SIGMOID_STEP_BITS) as f64;
                let p = 1.0 / (1.0 + detmath::exp(-x));
                (p * ONE as f64).round_ties_even() as u32
            })
            .collect()
    });
    &T
}

/// round(exp(-x) * 2^24) at x = i * 2^-10.
pub fn exp_table() -> &'static [u32] {
    static T: LazyLock<Vec<u32>> = LazyLock::new(|| {
        let len = (EXP_RANGE << EXP_STEP_BITS) as usize + 1;
        (0..len)
            .map(|i| {
                let x = -(i as f64) / (1u32 << EXP_STEP_BITS) as f64;
                (detmath::exp(x) * ONE as f64).round_ties_even() as u32
            })
            .collect()
    });
    &T
}

/// round(2^(i * 2^-10) * 2^23) for i in 0..=1024: the base-2 exponential of a fraction.
pub fn exp2_table() -> &'static [u32] {
    static T: LazyLock<Vec<u32>> = LazyLock::new(|| {
        let len = (1usize << EXP2_STEP_BITS) + 1;
        (0..len)
            .map(|i| {
                let x = i as f64 / (1u32 << EXP2_STEP_BITS) as f64;
                let v = detmath::exp(x * std::f64::consts::LN_2);
                (v * (1u32 << EXP2_VALUE_BITS) as f64).round_ties_even() as u32
            })
            .collect()
    });
    &T
}

/// The exponential and the logistic tables, one after the other, as GPU kernels read them
/// (the base-2 table starts at `exp_table().len()`).
pub fn exp_tables() -> Vec<u32> {
    let mut t = exp_table().to_vec();
    t.extend_from_slice(exp2_table());
    t
}

/// Flushes subnormals (and keeps zeros) to +0, as a GPU with flush-to-zero would.
#[inline]
pub fn ftz(x: f32) -> f32 {
    if x.abs() < f32::MIN_POSITIVE {
        0.0
    } else {
        x
    }
}

/// A margin as a signed fixed-point integer with [`MARGIN_FRAC_BITS`] fractional bits,
/// clamped to ±`clamp`.
#[inline]
pub fn margin_fixed(m: f32, clamp: f32) -> i32 {
    let m = if m.is_nan() {
        0.0
    } else {
        ftz(m).clamp(-clamp, clamp)
    };
    detmath::round_ties_even_f32(m * (1u32 << MARGIN_FRAC_BITS) as f32) as i32
}

/// sigmoid(m) as an integer in [1, 2^24 - 1] (units of 2^-24), by table interpolation.
#[inline]
pub fn sigmoid_fixed(m: f32) -> u32 {
    sigmoid_fixed_in(sigmoid_table(), m)
}

/// [`sigmoid_fixed`] with the table at hand.
#[inline(always)]
pub(crate) fn sigmoid_fixed_in(t: &[u32], m: f32) -> u32 {
    let shift = MARGIN_FRAC_BITS - SIGMOID_STEP_BITS;
    let u = (margin_fixed(m, SIGMOID_RANGE as f32) + (SIGMOID_RANGE << MARGIN_FRAC_BITS)) as u32;
    let i = (u >> shift) as usize;
    let f = u & ((1 << shift) - 1);
    let p = if i + 1 >= t.len() {
        t[t.len() - 1]
    } else {
        t[i] + (((t[i + 1] - t[i]) * f) >> shift)
    };
    p.clamp(1, ONE - 1)
}

/// exp(-d) for d >= 0 in units of 2^-24, by table interpolation (0 beyond [`EXP_RANGE`]).
#[inline]
pub fn exp_neg_fixed(d: f32) -> u32 {
    exp_neg_fixed_in(exp_table(), d)
}

/// [`exp_neg_fixed`] with the table ([`exp_table`]) at hand.
#[inline(always)]
pub(crate) fn exp_neg_fixed_in(t: &[u32], d: f32) -> u32 {
    let d = ftz(d);
    if d.is_nan() || d >= EXP_RANGE as f32 {
        return 0;
    }
    let fixed = detmath::round_ties_even_f32(d.max(0.0) * (1u32 << MARGIN_FRAC_BITS) as f32) as u32;
    let shift = MARGIN_FRAC_BITS - EXP_STEP_BITS;
    let i = (fixed >> shift) as usize;
    if i + 1 >= t.len() {
        return 0;
    }
    let f = fixed & ((1 << shift) - 1);
    t[i] - (((t[i] - t[i + 1]) * f) >> shift)
}

/// The (g, h) of every class of one softmax row (`margins` of its classes, label `y` and
/// weight `w` already flushed), handed to `put(class, g, h)`: the exponentials from `t`
/// ([`exp_table`]) below the row's largest margin, each divided exactly by their sum, and
/// the hessian `factor` · p(1 − p) (2, XGBoost's, or K/(K − 1), LightGBM's).
#[inline(always)]
fn softmax_row(
    t: &[u32],
    factor: f32,
    margins: &[f32],
    y: f32,
    w: f32,
    mut put: impl FnMut(usize, f32, f32),
) {
    let k = margins.len();
    let max = margins
        .iter()
        .fold(f32::NEG_INFINITY, |a, &m| a.max(ftz(m)));
    let e = |c: usize| exp_neg_fixed_in(t, max - ftz(margins[c]));
    // up to KEPT_CLASSES exponentials stay on the stack; more are looked up again rather
    // than allocated per row
    let mut kept = [0u32; KEPT_CLASSES];
    let keep = k <= KEPT_CLASSES;
    let sum: u64 = if keep {
        kept.iter_mut()
            .take(k)
            .enumerate()
            .map(|(c, slot)| {
                *slot = e(c);
                *slot as u64
            })
            .sum()
    } else {
        (0..k).map(|c| e(c) as u64).sum()
    };
    // only all-NaN margins can make the sum zero; keep the division defined
    let divide = Divisor::new(sum.max(1));
    let class = y as usize;
    // `c` is the class: it picks the target and the exponential, kept or looked up again
    #[allow(clippy::needless_range_loop)]
    for c in 0..k {
        let v = if keep { kept[c] } else { e(c) };
        let pk = divide.quotient((v as u64) << PROB_BITS);
        let p = pk as f32 * (1.0 / ONE as f32);
        let target = if c == class { 1.0 } else { 0.0 };
        // one rounding for the hessian's factor, as the kernels do
        put(
            c,
            ftz(ftz(p - target) * w),
            ftz((factor * (p * (1.0 - p))).max(MIN_HESSIAN) * w),
        );
    }
}

/// Classes whose softmax exponentials a row keeps on the stack.
const KEPT_CLASSES: usize = 64;

/// Exact integer division by one divisor through its f64 reciprocal: the softmax divides
/// every class's exponential by the row's sum, and a hardware 64-bit division per class
/// costs more than the rest of the gradient.
struct Divisor {
    d: u64,
    reciprocal: f64,
}

impl Divisor {
    /// Divides by `d`, which must be positive and below 2^53.
    #[inline(always)]
    fn new(d: u64) -> Self {
        Divisor {
            d,
            reciprocal: 1.0 / d as f64,
        }
    }

    /// floor(a / d) for a below 2^53 (with a·2^-52 below one): the product with the
    /// reciprocal is within one of the quotient, and one step either way corrects it.
    #[inline(always)]
    fn quotient(&self, a: u64) -> u64 {
        let q = (a as f64 * self.reciprocal) as u64;
        let q = if q * self.d > a { q - 1 } else { q };
        if (q + 1) * self.d <= a {
            q + 1
        } else {
            q
        }
    }
}

/// (g, h) of squared error at margin `m`, label `y`, weight `w` (already flushed).
#[inline(always)]
fn squared_error(m: f32, y: f32, w: f32) -> [f32; 2] {
    [ftz(ftz(ftz(m) - y) * w), w]
}

/// (g, h) of the Poisson loss at margin `m`, label `y`, weight `w` (already flushed), the
/// hessian taken at `m + offset` (XGBoost's `max_delta_step`).
#[inline(always)]
fn poisson(m: f32, y: f32, w: f32, offset: f32) -> [f32; 2] {
    let m = ftz(m);
    [
        ftz(ftz(exp_det(m) - y) * w),
        ftz(exp_det(ftz(m + offset)).max(MIN_HESSIAN) * w),
    ]
}

/// (g, h) of the gamma loss at margin `m`, label `y`, weight `w` (already flushed).
#[inline(always)]
fn gamma(m: f32, y: f32, w: f32) -> [f32; 2] {
    // y / e^m = (y * q) * s with e^-m = q * s
    let (q, s) = exp_parts(-ftz(m));
    let p = ftz(ftz(y * q) * s);
    [ftz(ftz(1.0 - p) * w), ftz(p.max(MIN_HESSIAN) * w)]
}

/// (g, h) of the Tweedie loss at margin `m`, label `y`, weight `w` (already flushed), with
/// `c0` = 1 - rho and `c1` = 2 - rho: a = y e^{c0 m}, b = e^{c1 m}.
#[inline(always)]
fn tweedie(m: f32, y: f32, w: f32, c0: f32, c1: f32) -> [f32; 2] {
    let m = ftz(m);
    let (qa, sa) = exp_parts(ftz(c0 * m));
    let (qb, sb) = exp_parts(ftz(c1 * m));
    let a = ftz(ftz(y * qa) * sa);
    let b = ftz(qb * sb);
    let hb = ftz(ftz(c1 * qb) * sb);
    let ha = ftz(ftz(ftz(y * c0) * qa) * sa);
    [ftz(ftz(b - a) * w), ftz(ftz(hb - ha).max(MIN_HESSIAN) * w)]
}

/// (g, h) of the logistic loss at margin `m`, label `y`, weight `w` (already flushed).
#[inline(always)]
fn logistic(m: f32, y: f32, w: f32) -> [f32; 2] {
    logistic_with(sigmoid_table(), m, y, w)
}

/// [`logistic`] with the sigmoid table at hand.
#[inline(always)]
fn logistic_with(t: &[u32], m: f32, y: f32, w: f32) -> [f32; 2] {
    let p = sigmoid_fixed_in(t, m) as f32 * (1.0 / ONE as f32);
    [
        ftz(ftz(p - y) * w),
        ftz((p * (1.0 - p)).max(MIN_HESSIAN) * w),
    ]
}

/// Writes `f(margin, label, weight)` of every row (label and weight flushed, as
/// [`Objective::gradient`] flushes them) into `out`; returns the largest |g| and h.
#[inline(always)]
fn rows_by(
    margins: &[f32],
    labels: &[f32],
    weights: Option<&[f32]>,
    out: &mut [[f32; 2]],
    f: impl Fn(f32, f32, f32) -> [f32; 2],
) -> [f32; 2] {
    match weights {
        None => {
            let w = ftz(1.0);
            for ((o, &m), &y) in out.iter_mut().zip(margins).zip(labels) {
                *o = f(m, ftz(y), w);
            }
        }
        Some(ws) => {
            for (((o, &m), &y), &w) in out.iter_mut().zip(margins).zip(labels).zip(ws) {
                *o = f(m, ftz(y), ftz(w));
            }
        }
    }
    maxima(out)
}

/// The largest |g| and h of `gh` (NaN never wins). Eight running maxima instead of one
/// chain of dependent compares; the maximum of a set is the same in any order as long as
/// no -0.0 is among it (|g| never is, and every h is flushed by `ftz`, which returns +0.0
/// for any zero), so the bits are too.
#[inline(always)]
fn maxima(gh: &[[f32; 2]]) -> [f32; 2] {
    let mut m = [[0.0f32; 2]; 8];
    let chunks = gh.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (m, x) in m.iter_mut().zip(c) {
            m[0] = m[0].max(x[0].abs());
            m[1] = m[1].max(x[1]);
        }
    }
    for x in rest {
        m[0][0] = m[0][0].max(x[0].abs());
        m[0][1] = m[0][1].max(x[1]);
    }
    m.iter()
        .fold([0.0f32; 2], |a, x| [a[0].max(x[0]), a[1].max(x[1])])
}

/// e^x as a pair (q, s) whose product q * s is the value: q is an integer below 2^24 + 1
/// (exact in f32) and s a power of two, so multiplying by s is exact. Callers multiply other
/// factors into q first and by s last: an exact last product cannot be changed by a GPU
/// compiler fusing it into a following add. The exponent is clamped to ±[`EXP2_LIMIT`] (base
/// 2), so both parts are normal; NaN counts as 0.
#[inline]
pub fn exp_parts(x: f32) -> (f32, f32) {
    let x = ftz(x);
    let x = if x.is_nan() { 0.0 } else { x };
    let t = ftz(x * LOG2_E).clamp(-EXP2_LIMIT, EXP2_LIMIT);
    let fixed = detmath::round_ties_even_f32(t * (1u32 << MARGIN_FRAC_BITS) as f32) as i32;
    let k = fixed >> MARGIN_FRAC_BITS;
    let frac = (fixed as u32) & ((1 << MARGIN_FRAC_BITS) - 1);
    let shift = MARGIN_FRAC_BITS - EXP2_STEP_BITS;
    let i = (frac >> shift) as usize;
    let f = frac & ((1 << shift) - 1);
    let table = exp2_table();
    let q = table[i] + (((table[i + 1] - table[i]) * f) >> shift);
    let s = f32::from_bits(((k - EXP2_VALUE_BITS as i32 + 127) as u32) << 23);
    (q as f32, s)
}

/// e^x through [`exp_parts`] (relative error below 5e-7 for |x| <= 10).
#[inline]
pub fn exp_det(x: f32) -> f32 {
    let (q, s) = exp_parts(x);
    q * s
}

/// The constants a loss reads besides margins, labels and weights.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LossConstants {
    /// `quantile_alpha`, `huber_slope`, 1 - `tweedie_variance_power`, the Poisson
    /// hessian's `max_delta_step`, or the softmax hessian's factor (2, or K/(K - 1)).
    c0: f32,
    /// 1 - `quantile_alpha`, or 2 - `tweedie_variance_power`.
    c1: f32,
}

/// A loss with its number of output groups (classes for softmax, quantiles for
/// `reg:quantileerror`, else 1) and its constants.
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    kind: ObjectiveKind,
    groups: usize,
    constants: LossConstants,
    /// Every `quantile_alpha` in full precision: quantile selection compares weights with it.
    quantile_alpha: Vec<f64>,
    /// Pair construction and gains of the ranking losses.
    rank: crate::rank::params::RankParams,
}

impl Objective {
    /// The objective `kind` with `num_class` classes (ignored unless softmax) and default
    /// constants (`quantile_alpha` 0.5, `huber_slope` 1, `tweedie_variance_power` 1.5).
    pub fn new(kind: ObjectiveKind, num_class: usize) -> Result<Self> {
        Self::with_params(kind, num_class, &ObjectiveParams::default())
    }

    /// The objective `kind` with `num_class` classes and the constants in `p`.
    pub fn with_params(kind: ObjectiveKind, num_class: usize, p: &ObjectiveParams) -> Result<Self> {
        p.validate(kind)?;
        let groups = if kind.is_multiclass() {
            if num_class < 2 {
                return Err(Error::param(
                    "num_class",
                    format!("{kind} needs at least 2 classes, got {num_class}"),
                ));
            }
            num_class
        } else if kind == ObjectiveKind::QuantileError {
            p.quantile_alpha.len()
        } else if kind == ObjectiveKind::Custom {
            num_class.max(1)
        } else {
            1
        };
        let constants = match kind {
            // the kernels' constants: one quantile only (several run on the host)
            ObjectiveKind::QuantileError => quantile_constants(p.quantile_alpha[0]),
            ObjectiveKind::PseudoHuber | ObjectiveKind::Huber => LossConstants {
                c0: p.huber_slope as f32,
                c1: 0.0,
            },
            ObjectiveKind::Tweedie => LossConstants {
                c0: (1.0 - p.tweedie_variance_power) as f32,
                c1: (2.0 - p.tweedie_variance_power) as f32,
            },
            ObjectiveKind::Poisson => LossConstants {
                c0: p.poisson_hessian_offset() as f32,
                c1: 0.0,
            },
            ObjectiveKind::Softprob | ObjectiveKind::Softmax => LossConstants {
                c0: match p.multiclass_hessian {
                    MulticlassHessian::XGBoost => 2.0,
                    // two classes: 2, as XGBoost's
                    MulticlassHessian::LightGBM => {
                        (groups as f64 / (groups.max(2) - 1) as f64) as f32
                    }
                },
                c1: 0.0,
            },
            _ => LossConstants { c0: 0.0, c1: 0.0 },
        };
        Ok(Objective {
            kind,
            groups,
            constants,
            quantile_alpha: p.quantile_alpha.clone(),
            rank: crate::rank::params::RankParams {
                loss: match kind {
                    ObjectiveKind::RankMap => crate::rank::params::RankLoss::Map,
                    ObjectiveKind::RankPairwise => crate::rank::params::RankLoss::Pairwise,
                    _ => crate::rank::params::RankLoss::Ndcg,
                },
                pairs: match p.lambdarank_pair_method {
                    PairMethodKind::TopK => crate::rank::params::PairMethod::TopK(
                        p.lambdarank_num_pair_per_sample.unwrap_or(32),
                    ),
                    PairMethodKind::Mean => crate::rank::params::PairMethod::Mean(
                        p.lambdarank_num_pair_per_sample.unwrap_or(1),
                    ),
                },
                gains: if !p.label_gain.is_empty() {
                    crate::rank::params::Gains::Table(p.label_gain.as_slice().into())
                } else if p.ndcg_exp_gain {
                    crate::rank::params::Gains::Exponential
                } else {
                    crate::rank::params::Gains::Linear
                },
                hessian_scale: match p.lambdarank_hessian {
                    RankHessian::XGBoost => 2.0,
                    RankHessian::LightGBM => 1.0,
                },
                normalise: p.lambdarank_normalization,
            },
        })
    }

    /// Which loss this is.
    pub fn kind(&self) -> ObjectiveKind {
        self.kind
    }

    /// Margins (and trees) per row per round.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// Values per row of [`Objective::transform`]: 1 for `multi:softmax` (the class), else
    /// the groups (one per quantile of `reg:quantileerror`).
    pub fn output_width(&self) -> usize {
        if self.kind == ObjectiveKind::Softmax {
            1
        } else {
            self.groups
        }
    }

    /// The two constants GPU gradient kernels read (see [`Objective::gradient`]), as bits.
    pub fn constant_bits(&self) -> [u32; 2] {
        [self.constants.c0.to_bits(), self.constants.c1.to_bits()]
    }

    /// The constants metrics read for output `group` (the metric's defaults where the loss
    /// has none).
    pub fn metric_constants(&self, group: usize) -> MetricConstants {
        let mut c = MetricConstants::default();
        let LossConstants { c0, c1 } = self.constants;
        match self.kind {
            ObjectiveKind::QuantileError => c.quantile_alpha = self.quantile_alpha[group],
            ObjectiveKind::PseudoHuber | ObjectiveKind::Huber => c.huber_slope = c0 as f64,
            ObjectiveKind::Tweedie => c.tweedie_variance_power = 2.0 - c1 as f64,
            _ => {}
        }
        c
    }

    /// The quantile the leaves of output `group` are refit to
    /// ([`ObjectiveKind::refits_leaves`]).
    pub fn refit_quantile(&self, group: usize) -> f64 {
        match self.kind {
            ObjectiveKind::QuantileError => self.quantile_alpha[group],
            _ => 0.5,
        }
    }

    /// The quantiles of `reg:quantileerror`, one per output.
    pub fn quantile_alphas(&self) -> &[f64] {
        &self.quantile_alpha
    }

    /// Checks one label, naming its row when it is refused.
    pub fn check_label(&self, row: usize, y: f32) -> Result<()> {
        let bad = |reason: String| {
            Err(Error::InvalidLabel {
                row,
                value: y.to_string(),
                reason,
            })
        };
        if !y.is_finite() {
            return bad("labels must be finite numbers".into());
        }
        let name = self.kind.name();
        match self.kind {
            ObjectiveKind::Logistic | ObjectiveKind::LogitRaw if !(0.0..=1.0).contains(&y) => {
                bad(format!("{name} needs labels in [0, 1]"))
            }
            ObjectiveKind::Softprob | ObjectiveKind::Softmax
                if y < 0.0 || y.fract() != 0.0 || y as usize >= self.groups =>
            {
                bad(format!("{name} needs class indices 0..{}", self.groups))
            }
            ObjectiveKind::Poisson | ObjectiveKind::Tweedie if y < 0.0 => {
                bad(format!("{name} needs labels >= 0"))
            }
            ObjectiveKind::Gamma if y <= 0.0 => bad(format!("{name} needs labels > 0")),
            ObjectiveKind::Cox if y == 0.0 => bad(format!(
                "{name} needs survival times != 0 (negative when censored)"
            )),
            k if k.is_ranking() => match &self.rank.gains {
                crate::rank::params::Gains::Table(t) => {
                    let held = y >= 0.0 && y.fract() == 0.0 && (y as usize) < t.len();
                    if held {
                        Ok(())
                    } else {
                        bad(format!(
                            "{name} with label_gain of {} values needs integer relevance \
                             labels in 0..={}",
                            t.len(),
                            t.len() - 1
                        ))
                    }
                }
                _ if !(0.0..=31.0).contains(&y) => {
                    bad(format!("{name} needs relevance labels in [0, 31]"))
                }
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// Whether GPU backends compute this loss's gradients in a kernel; the others read the
    /// margins back and take the host's gradients (the same bits either way).
    pub fn has_kernel(&self) -> bool {
        match self.kind {
            ObjectiveKind::PseudoHuber | ObjectiveKind::Cox | ObjectiveKind::Custom => false,
            // the kernels read one pair of constants
            ObjectiveKind::QuantileError => self.groups == 1,
            k => !k.is_ranking(),
        }
    }

    /// Whether a row's gradient depends on other rows (ranking within its query, Cox over
    /// its risk set): the boosting loop computes these on the host, never row by row.
    pub fn is_listwise(&self) -> bool {
        self.kind.is_ranking() || self.kind == ObjectiveKind::Cox
    }

    /// Pair construction and gains of a ranking loss.
    pub fn rank_params(&self) -> &crate::rank::params::RankParams {
        &self.rank
    }

    /// Whether [`Objective::gradients_of_rows`] computes this loss.
    pub fn has_row_formula(&self) -> bool {
        self.groups == 1
            && matches!(
                self.kind,
                ObjectiveKind::SquaredError
                    | ObjectiveKind::Logistic
                    | ObjectiveKind::LogitRaw
                    | ObjectiveKind::Poisson
                    | ObjectiveKind::Gamma
                    | ObjectiveKind::Tweedie
            )
    }

    /// Writes the (g, h) of every row into `out` and returns the largest |g| and h, for a
    /// one-output loss whose rows the backend computes by one formula (the same as
    /// [`Objective::gradient`]'s); `None` for the others, which go row by row through it.
    /// Choosing the formula once, outside the loop, lets it inline into a tight loop.
    pub fn gradients_of_rows(
        &self,
        margins: &[f32],
        labels: &[f32],
        weights: Option<&[f32]>,
        out: &mut [[f32; 2]],
    ) -> Option<[f32; 2]> {
        if self.groups != 1 {
            return None;
        }
        match self.kind {
            ObjectiveKind::SquaredError => {
                Some(rows_by(margins, labels, weights, out, squared_error))
            }
            ObjectiveKind::Logistic | ObjectiveKind::LogitRaw => {
                // the table is found once, not per row
                let t = sigmoid_table();
                lanes::logistic_rows(t, margins, labels, weights, out);
                Some(maxima(out))
            }
            ObjectiveKind::Poisson => {
                let offset = self.constants.c0;
                Some(rows_by(margins, labels, weights, out, |m, y, w| {
                    poisson(m, y, w, offset)
                }))
            }
            ObjectiveKind::Gamma => Some(rows_by(margins, labels, weights, out, gamma)),
            ObjectiveKind::Tweedie => {
                let LossConstants { c0, c1 } = self.constants;
                Some(rows_by(margins, labels, weights, out, |m, y, w| {
                    tweedie(m, y, w, c0, c1)
                }))
            }
            _ => None,
        }
    }

    /// Gradient and hessian of one row for every group, written to `g` and `h` (length
    /// `groups`). The arithmetic is the contract every backend reproduces bit for bit: single
    /// IEEE operations, and no product that is rounded and then added (a GPU compiler may fuse
    /// those); products by the power of two of [`exp_parts`] are exact.
    #[inline]
    pub fn gradient(&self, margins: &[f32], label: f32, weight: f32, g: &mut [f32], h: &mut [f32]) {
        let y = ftz(label);
        let w = ftz(weight);
        let LossConstants { c0, c1 } = self.constants;
        match self.kind {
            ObjectiveKind::SquaredError => [g[0], h[0]] = squared_error(margins[0], y, w),
            ObjectiveKind::AbsoluteError => {
                let d = ftz(ftz(margins[0]) - y);
                g[0] = if d > 0.0 {
                    w
                } else if d < 0.0 {
                    -w
                } else {
                    0.0
                };
                h[0] = w;
            }
            ObjectiveKind::QuantileError if self.groups == 1 => {
                let d = ftz(ftz(margins[0]) - y);
                g[0] = ftz(if d >= 0.0 { c1 } else { -c0 } * w);
                h[0] = w;
            }
            ObjectiveKind::QuantileError => {
                for (q, &alpha) in self.quantile_alpha.iter().enumerate() {
                    let LossConstants { c0, c1 } = quantile_constants(alpha);
                    let d = ftz(ftz(margins[q]) - y);
                    g[q] = ftz(if d >= 0.0 { c1 } else { -c0 } * w);
                    h[q] = w;
                }
            }
            ObjectiveKind::Huber => {
                let d = ftz(ftz(margins[0]) - y);
                g[0] = ftz(d.min(c0).max(-c0) * w);
                h[0] = w;
            }
            ObjectiveKind::PseudoHuber => {
                // host only (see has_kernel): division and square root are exact here
                let r = ftz(ftz(margins[0]) - y);
                let z = r / c0;
                let scale = 1.0 + z * z;
                let root = scale.sqrt();
                g[0] = ftz(r / root * w);
                h[0] = ftz((1.0 / (scale * root)).max(MIN_HESSIAN) * w);
            }
            ObjectiveKind::Poisson => [g[0], h[0]] = poisson(margins[0], y, w, c0),
            ObjectiveKind::Gamma => [g[0], h[0]] = gamma(margins[0], y, w),
            ObjectiveKind::Tweedie => [g[0], h[0]] = tweedie(margins[0], y, w, c0, c1),
            ObjectiveKind::Logistic | ObjectiveKind::LogitRaw => {
                [g[0], h[0]] = logistic(margins[0], y, w)
            }
            ObjectiveKind::RankNdcg
            | ObjectiveKind::RankMap
            | ObjectiveKind::RankPairwise
            | ObjectiveKind::Cox
            | ObjectiveKind::Custom => {
                // listwise (see is_listwise) or the caller's: the boosting loop computes
                // these on the host, never row by row
                g[0] = 0.0;
                h[0] = 0.0;
            }
            ObjectiveKind::Softprob | ObjectiveKind::Softmax => {
                let t = exp_table();
                softmax_row(t, c0, &margins[..self.groups], y, w, |c, gc, hc| {
                    g[c] = gc;
                    h[c] = hc;
                });
            }
        }
    }

    /// Writes the (g, h) of every row and class of a softmax loss into `out` (`groups` a
    /// row, as [`Objective::gradient`] gives them) and raises `max` (each class's largest
    /// |g| and h) to the rows'; false (nothing written) for the other losses. The table is
    /// found once and each row's classes go in one loop, not through a dispatch a row.
    pub fn softmax_rows(
        &self,
        margins: &[f32],
        labels: &[f32],
        weights: Option<&[f32]>,
        out: &mut [[f32; 2]],
        max: &mut [[f32; 2]],
    ) -> bool {
        if !matches!(self.kind, ObjectiveKind::Softprob | ObjectiveKind::Softmax) {
            return false;
        }
        let (k, t, factor) = (self.groups, exp_table(), self.constants.c0);
        lanes::softmax_rows(t, factor, k, margins, labels, weights, out, max);
        true
    }

    /// Margins that correspond to `base_score` in output space.
    pub fn base_margin_from_score(&self, base_score: f64) -> Vec<f32> {
        let m = match self.kind {
            ObjectiveKind::Logistic | ObjectiveKind::LogitRaw => {
                let p = base_score.clamp(1e-7, 1.0 - 1e-7);
                detmath::ln(p / (1.0 - p))
            }
            k if k.has_log_link() => detmath::ln(base_score.max(1e-16)),
            _ => base_score,
        };
        vec![m as f32; self.groups]
    }

    /// Whether `base_score` is a value this loss's outputs can take.
    pub fn accepts_base_score(kind: ObjectiveKind, b: f64) -> bool {
        match kind {
            ObjectiveKind::Logistic | ObjectiveKind::LogitRaw => b > 0.0 && b < 1.0,
            k if k.has_log_link() => b.is_finite() && b > 0.0,
            _ => b.is_finite(),
        }
    }

    /// Output-space predictions from margins (`groups` per row): identity, probability,
    /// class probabilities, exp(margin) for log links, or the class index for
    /// `multi:softmax` ([`Objective::output_width`] values per row).
    pub fn transform(&self, margins: &[f32]) -> Vec<f32> {
        match self.kind {
            ObjectiveKind::Logistic => margins
                .iter()
                .map(|&m| crate::link::sigmoid(m as f64) as f32)
                .collect(),
            ObjectiveKind::Softprob => self.class_probabilities(margins),
            ObjectiveKind::Softmax => margins
                .chunks_exact(self.groups)
                .map(|row| crate::link::argmax(row) as f32)
                .collect(),
            k if k.has_log_link() => margins.iter().map(|&m| (m as f64).exp() as f32).collect(),
            _ => margins.to_vec(),
        }
    }

    /// Softmax probabilities of every class (`groups` per row), for either softmax loss.
    pub fn class_probabilities(&self, margins: &[f32]) -> Vec<f32> {
        let k = self.groups;
        let mut p = vec![0.0f64; k];
        let mut out = Vec::with_capacity(margins.len());
        for row in margins.chunks_exact(k) {
            crate::link::softmax(row, &mut p);
            out.extend(p.iter().map(|&v| v as f32));
        }
        out
    }
}

/// The kernel constants of the pinball loss at `alpha`.
fn quantile_constants(alpha: f64) -> LossConstants {
    LossConstants {
        c0: alpha as f32,
        c1: (1.0 - alpha) as f32,
    }
}

/// The parameters of the losses that have constants, as [`crate::params::Params`] holds them.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectiveParams {
    /// `quantile_alpha` of `reg:quantileerror`: one output per value.
    pub quantile_alpha: Vec<f64>,
    /// `huber_slope` of `reg:pseudohubererror` and `huber`.
    pub huber_slope: f64,
    /// `tweedie_variance_power` of `reg:tweedie`.
    pub tweedie_variance_power: f64,
    /// `max_delta_step`: the Poisson hessian's offset (0 means 0.7, as XGBoost).
    pub max_delta_step: f64,
    /// `lambdarank_num_pair_per_sample`: the truncation level of top-k pairs, or the
    /// pairs drawn per document by `mean`.
    pub lambdarank_num_pair_per_sample: Option<u32>,
    /// `lambdarank_pair_method`.
    pub lambdarank_pair_method: PairMethodKind,
    /// `ndcg_exp_gain`: gains 2^label - 1.
    pub ndcg_exp_gain: bool,
    /// `label_gain`: the gain of each integer label (none: `ndcg_exp_gain` decides).
    pub label_gain: Vec<f64>,
    /// `lambdarank_normalization`: scale each query's gradients by log2(1 + Σ|λ|) / Σ|λ|.
    pub lambdarank_normalization: bool,
    /// `multiclass_hessian`: the softmax hessian's factor.
    pub multiclass_hessian: MulticlassHessian,
    /// `lambdarank_hessian`: the factor of a ranking pair's hessian.
    pub lambdarank_hessian: RankHessian,
}

impl Default for ObjectiveParams {
    fn default() -> Self {
        ObjectiveParams {
            quantile_alpha: vec![0.5],
            huber_slope: 1.0,
            tweedie_variance_power: 1.5,
            max_delta_step: 0.0,
            lambdarank_num_pair_per_sample: None,
            lambdarank_pair_method: PairMethodKind::TopK,
            ndcg_exp_gain: true,
            label_gain: Vec::new(),
            lambdarank_normalization: true,
            multiclass_hessian: MulticlassHessian::XGBoost,
            lambdarank_hessian: RankHessian::XGBoost,
        }
    }
}

impl ObjectiveParams {
    /// `count:poisson`'s hessian offset (its hessian is taken at margin + this):
    /// `max_delta_step`, or XGBoost's 0.7 without one.
    pub fn poisson_hessian_offset(&self) -> f64 {
        if self.max_delta_step > 0.0 {
            self.max_delta_step
        } else {
            POISSON_MAX_DELTA_STEP
        }
    }

    /// Checks the constants `kind` reads, naming the parameter.
    pub fn validate(&self, kind: ObjectiveKind) -> Result<()> {
        match kind {
            ObjectiveKind::QuantileError if self.quantile_alpha.is_empty() => {
                Err(Error::param("quantile_alpha", "give at least one quantile"))
            }
            ObjectiveKind::QuantileError
                if self.quantile_alpha.iter().any(|a| !(*a > 0.0 && *a < 1.0)) =>
            {
                let bad = self
                    .quantile_alpha
                    .iter()
                    .find(|a| !(**a > 0.0 && **a < 1.0))
                    .expect("one is out of range");
                Err(Error::param(
                    "quantile_alpha",
                    format!("{bad} must be in (0, 1)"),
                ))
            }
            ObjectiveKind::PseudoHuber | ObjectiveKind::Huber
                if !(self.huber_slope.is_finite() && self.huber_slope > 0.0) =>
            {
                Err(Error::param(
                    "huber_slope",
                    format!("{} must be a finite number > 0", self.huber_slope),
                ))
            }
            _ if self
                .label_gain
                .iter()
                .any(|g| !(g.is_finite() && *g >= 0.0)) =>
            {
                let bad = self
                    .label_gain
                    .iter()
                    .find(|g| !(g.is_finite() && **g >= 0.0))
                    .expect("one is out of range");
                Err(Error::param(
                    "label_gain",
                    format!("{bad} must be a finite number >= 0"),
                ))
            }
            _ if self.label_gain.windows(2).any(|w| w[1] < w[0]) => Err(Error::param(
                "label_gain",
                "must not decrease: a higher label is ranked above a lower one, so its gain \
                 must be at least as large",
            )),
            _ if !self.label_gain.is_empty() && !self.ndcg_exp_gain => Err(Error::param(
                "label_gain",
                "gives every label's gain itself: set it or ndcg_exp_gain = false, not both",
            )),
            ObjectiveKind::Tweedie if !(1.0..2.0).contains(&self.tweedie_variance_power) => {
                Err(Error::param(
                    "tweedie_variance_power",
                    format!("{} must be in [1, 2)", self.tweedie_variance_power),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The objective constants metrics read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricConstants {
    /// `quantile_alpha`.
    pub quantile_alpha: f64,
    /// `huber_slope`.
    pub huber_slope: f64,
    /// `tweedie_variance_power`.
    pub tweedie_variance_power: f64,
}

impl Default for MetricConstants {
    fn default() -> Self {
        MetricConstants {
            quantile_alpha: 0.5,
            huber_slope: 1.0,
            tweedie_variance_power: 1.5,
        }
    }
}

/// The softmax hessian of `multi:softprob` and `multi:softmax` (`multiclass_hessian`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum MulticlassHessian {
    /// 2p(1 - p), XGBoost's.
    #[default]
    #[serde(rename = "xgboost")]
    XGBoost,
    /// K/(K - 1) · p(1 - p) for K classes, LightGBM's (Friedman's factor): leaves step
    /// about twice as far with many classes, 1.6 times with five.
    #[serde(rename = "lightgbm")]
    LightGBM,
}

/// The hessian of a LambdaMART pair (`lambdarank_hessian`), for `rank:ndcg`, `rank:map`
/// and `rank:pairwise`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum RankHessian {
    /// 2p(1 - p)·|Δ|, XGBoost's and the default: on the bundled LambdaRank queries it
    /// ranks better than LightGBM's (bench/ranking_suite.py).
    #[default]
    #[serde(rename = "xgboost")]
    XGBoost,
    /// p(1 - p)·|Δ|, LightGBM's `lambdarank`: leaves step twice as far at the same
    /// learning rate.
    #[serde(rename = "lightgbm")]
    LightGBM,
}

/// How LambdaMART chooses the pairs of a query (`lambdarank_pair_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum PairMethodKind {
    /// Pairs with a document among the model's top `lambdarank_num_pair_per_sample`.
    #[default]
    #[serde(rename = "topk")]
    TopK,
    /// `lambdarank_num_pair_per_sample` random pairs per document (hash-keyed).
    #[serde(rename = "mean")]
    Mean,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reciprocal_division_is_exact_integer_division() {
        let mut lcg = crate::test_rng::lcg(7);
        let mut next = || lcg() >> 11;
        // the softmax's range: sums up to many classes of 2^24, numerators below 2^49
        let mut divisors = vec![1u64, 2, 3, 7, (1 << 24) - 1, 1 << 24, 50 << 24, 1 << 40];
        divisors.extend((0..200).map(|_| 1 + next() % (1u64 << 32)));
        for d in divisors {
            let div = Divisor::new(d);
            let mut numerators = vec![0u64, 1, d - 1, d, d + 1];
            for m in [1u64, 3, 1 << 20, (1 << 48) / d] {
                numerators.extend([m * d - 1, m * d, m * d + 1]);
            }
            numerators.extend((0..500).map(|_| next() % (1u64 << 49)));
            for a in numerators {
                assert_eq!(div.quotient(a), a / d, "{a} / {d}");
            }
        }
    }

    #[test]
    fn the_row_formula_loop_gives_the_row_by_row_bits_and_maxima() {
        let margins: Vec<f32> = (0..5_000)
            .map(|i| match i % 11 {
                0 => f32::NAN,
                1 => f32::INFINITY,
                2 => -1e30,
                3 => 1e-40,
                4 => -0.0,
                _ => (i as f32 * 0.37).sin() * 25.0,
            })
            .collect();
        let labels: Vec<f32> = (0..5_000).map(|i| (i % 3) as f32 * 0.5).collect();
        let weights: Vec<f32> = (0..5_000).map(|i| [0.0, 1e-39, 0.5, 3.0][i % 4]).collect();
        for kind in [
            ObjectiveKind::SquaredError,
            ObjectiveKind::Logistic,
            ObjectiveKind::LogitRaw,
            ObjectiveKind::Poisson,
            ObjectiveKind::Gamma,
            ObjectiveKind::Tweedie,
        ] {
            let obj = Objective::new(kind, 1).unwrap();
            assert!(obj.has_row_formula());
            for w in [None, Some(weights.as_slice())] {
                let mut fast = vec![[0.0f32; 2]; margins.len()];
                let got = obj
                    .gradients_of_rows(&margins, &labels, w, &mut fast)
                    .unwrap();
                let mut want = [0.0f32; 2];
                for (i, f) in fast.iter().enumerate() {
                    let (mut g, mut h) = ([0.0f32], [0.0f32]);
                    let wi = w.map_or(1.0, |w| w[i]);
                    obj.gradient(&margins[i..i + 1], labels[i], wi, &mut g, &mut h);
                    assert_eq!(
                        [f[0].to_bits(), f[1].to_bits()],
                        [g[0].to_bits(), h[0].to_bits()],
                        "{kind:?} row {i}"
                    );
                    want = [want[0].max(g[0].abs()), want[1].max(h[0])];
                }
                assert_eq!(got.map(f32::to_bits), want.map(f32::to_bits), "{kind:?}");
            }
        }
        let multi = Objective::new(ObjectiveKind::Softprob, 3).unwrap();
        assert!(!multi.has_row_formula());
        assert!(multi
            .gradients_of_rows(&margins, &labels, None, &mut [])
            .is_none());
    }

    #[test]
    fn fixed_sigmoid_is_close_to_the_real_one() {
        let mut worst = 0.0f64;
        for i in -30_000..=30_000 {
            let m = i as f32 * 0.001;
            let p = sigmoid_fixed(m) as f64 / ONE as f64;
            let exact = 1.0 / (1.0 + (-(m as f64)).exp());
            worst = worst.max((p - exact).abs());
        }
        assert!(worst < 3e-7, "worst error {worst}");
    }

    #[test]
    fn fixed_exp_is_close_to_the_real_one() {
        let mut worst = 0.0f64;
        for i in 0..(EXP_RANGE * 10_000) {
            let d = i as f32 * 1e-4;
            let e = exp_neg_fixed(d) as f64 / ONE as f64;
            let exact = (-(d as f64)).exp();
            worst = worst.max((e - exact).abs());
        }
        assert!(worst < 3e-7, "worst error {worst}");
    }

    #[test]
    fn softmax_gradients_sum_to_zero_and_match_probabilities() {
        let obj = Objective::new(ObjectiveKind::Softprob, 3).unwrap();
        let m = [0.5f32, -1.0, 2.0];
        let (mut g, mut h) = ([0f32; 3], [0f32; 3]);
        obj.gradient(&m, 2.0, 1.0, &mut g, &mut h);
        let mut p = [0f64; 3];
        crate::link::softmax(&m, &mut p);
        for c in 0..3 {
            let t = if c == 2 { 1.0 } else { 0.0 };
            assert!((g[c] as f64 - (p[c] - t)).abs() < 1e-6);
            assert!((h[c] as f64 - 2.0 * p[c] * (1.0 - p[c])).abs() < 1e-6);
        }
        assert!(g.iter().map(|&x| x as f64).sum::<f64>().abs() < 1e-6);
    }

    /// `multiclass_hessian` lightgbm gives K/(K - 1) · p(1 - p) (weighted), the default
    /// 2p(1 - p), for several class counts; the gradients are the same either way.
    #[test]
    fn the_multiclass_hessian_is_xgboosts_or_lightgbms() {
        for k in [2usize, 3, 5, 50] {
            let m: Vec<f32> = (0..k).map(|c| c as f32 * 0.37 - 1.0).collect();
            let mut p = vec![0f64; k];
            crate::link::softmax(&m, &mut p);
            let mut grads = Vec::new();
            for (how, factor) in [
                (MulticlassHessian::XGBoost, 2.0),
                (MulticlassHessian::LightGBM, k as f64 / (k - 1) as f64),
            ] {
                let params = ObjectiveParams {
                    multiclass_hessian: how,
                    ..Default::default()
                };
                let obj = Objective::with_params(ObjectiveKind::Softprob, k, &params).unwrap();
                let (mut g, mut h) = (vec![0f32; k], vec![0f32; k]);
                obj.gradient(&m, 1.0, 0.5, &mut g, &mut h);
                for c in 0..k {
                    let want = 0.5 * factor * p[c] * (1.0 - p[c]);
                    assert!(
                        (h[c] as f64 - want).abs() < 1e-6,
                        "{how:?}, {k} classes, class {c}: {} against {want}",
                        h[c]
                    );
                }
                grads.push(g);
            }
            assert_eq!(grads[0], grads[1]);
        }
    }

    #[test]
    fn labels_are_checked_per_objective() {
        let log = Objective::new(ObjectiveKind::Logistic, 1).unwrap();
        assert!(log
            .check_label(3, 2.0)
            .unwrap_err()
            .to_string()
            .contains("row 3"));
        assert!(log.check_label(0, f32::NAN).is_err());
        let soft = Objective::new(ObjectiveKind::Softprob, 3).unwrap();
        assert!(soft.check_label(0, 3.0).is_err());
        assert!(soft.check_label(0, 1.5).is_err());
        soft.check_label(0, 2.0).unwrap();
    }

    /// Each loss in f64, as its textbook formula (one row, weight 1).
    fn loss(kind: ObjectiveKind, p: &ObjectiveParams, m: f64, y: f64) -> f64 {
        let d = m - y;
        match kind {
            ObjectiveKind::SquaredError => 0.5 * d * d,
            ObjectiveKind::AbsoluteError => d.abs(),
            ObjectiveKind::QuantileError => {
                let u = y - m;
                u * (p.quantile_alpha[0] - if u < 0.0 { 1.0 } else { 0.0 })
            }
            ObjectiveKind::Huber => {
                let s = p.huber_slope;
                if d.abs() <= s {
                    0.5 * d * d
                } else {
                    s * (d.abs() - 0.5 * s)
                }
            }
            ObjectiveKind::PseudoHuber => {
                let s = p.huber_slope;
                s * s * ((1.0 + (d / s).powi(2)).sqrt() - 1.0)
            }
            ObjectiveKind::Poisson => m.exp() - y * m,
            ObjectiveKind::Gamma => y * (-m).exp() + m,
            ObjectiveKind::Tweedie => {
                let r = p.tweedie_variance_power;
                -y * ((1.0 - r) * m).exp() / (1.0 - r) + ((2.0 - r) * m).exp() / (2.0 - r)
            }
            ObjectiveKind::Logistic | ObjectiveKind::LogitRaw => (1.0 + m.exp()).ln() - y * m,
            _ => unreachable!("pointwise, one group"),
        }
    }

    #[test]
    fn each_quantile_of_a_list_has_the_gradients_of_its_own_loss() {
        let alphas = [0.1, 0.5, 0.93];
        let many = Objective::with_params(
            ObjectiveKind::QuantileError,
            1,
            &ObjectiveParams {
                quantile_alpha: alphas.to_vec(),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((many.groups(), many.output_width()), (3, 3));
        assert!(!many.has_kernel(), "one pair of kernel constants per loss");
        for (m, y) in [([0.2f32, -1.0, 3.0], 0.5f32), ([1.0, 1.0, 1.0], 1.0)] {
            let (mut g, mut h) = ([0f32; 3], [0f32; 3]);
            many.gradient(&m, y, 1.5, &mut g, &mut h);
            for (q, &alpha) in alphas.iter().enumerate() {
                let one = Objective::with_params(
                    ObjectiveKind::QuantileError,
                    1,
                    &ObjectiveParams {
                        quantile_alpha: vec![alpha],
                        ..Default::default()
                    },
                )
                .unwrap();
                let (mut g1, mut h1) = ([0f32], [0f32]);
                one.gradient(&m[q..q + 1], y, 1.5, &mut g1, &mut h1);
                assert_eq!(
                    (g[q].to_bits(), h[q].to_bits()),
                    (g1[0].to_bits(), h1[0].to_bits())
                );
                assert_eq!(many.refit_quantile(q), alpha);
            }
        }
    }

    #[test]
    fn gradients_and_hessians_are_the_derivatives_of_each_loss() {
        let p = ObjectiveParams {
            quantile_alpha: vec![0.3],
            huber_slope: 1.7,
            tweedie_variance_power: 1.35,
            ..Default::default()
        };
        let (step, close) = (1e-3, |a: f64, b: f64| {
            (a - b).abs() <= 2e-4 * b.abs().max(1.0)
        });
        for kind in ObjectiveKind::ALL
            .into_iter()
            .filter(|k| !k.is_multiclass() && !k.is_ranking())
        {
            let obj = Objective::with_params(kind, 1, &p).unwrap();
            if obj.is_listwise() || kind == ObjectiveKind::Custom {
                // survival:cox is checked against its likelihood in crate::survival; custom
                // has no loss of its own
                continue;
            }
            for &m in &[-2.3f32, -0.4, 0.05, 0.9, 3.1] {
                for &y in &[0.0f32, 0.25, 1.0, 2.5, 7.0] {
                    if obj.check_label(0, y).is_err() || (m - y).abs() < 0.01 {
                        continue;
                    }
                    let (mut g, mut h) = ([0f32], [0f32]);
                    obj.gradient(&[m], y, 1.0, &mut g, &mut h);
                    let (m, y) = (m as f64, y as f64);
                    let l = |x: f64| loss(kind, &p, x, y);
                    let d1 = (l(m + step) - l(m - step)) / (2.0 * step);
                    let d2 = (l(m + step) - 2.0 * l(m) + l(m - step)) / (step * step);
                    assert!(
                        close(g[0] as f64, d1),
                        "{kind} m {m} y {y}: g {} vs {d1}",
                        g[0]
                    );
                    let want_h = match kind {
                        // piecewise-linear losses: XGBoost and LightGBM use the weight
                        ObjectiveKind::AbsoluteError | ObjectiveKind::QuantileError => 1.0,
                        ObjectiveKind::Huber => 1.0,
                        // XGBoost's safeguard: the hessian at m + max_delta_step
                        ObjectiveKind::Poisson => d2 * POISSON_MAX_DELTA_STEP.exp(),
                        _ => d2,
                    };
                    assert!(
                        close(h[0] as f64, want_h),
                        "{kind} m {m} y {y}: h {} vs {want_h}",
                        h[0]
                    );
                }
            }
        }
    }

    #[test]
    fn weights_scale_every_gradient() {
        for kind in ObjectiveKind::ALL {
            let k = if kind.is_multiclass() { 3 } else { 1 };
            let obj = Objective::new(kind, k).unwrap();
            let m = [0.4f32, -0.2, 1.1];
            let (mut g1, mut h1, mut g3, mut h3) = ([0f32; 3], [0f32; 3], [0f32; 3], [0f32; 3]);
            obj.gradient(&m[..k], 1.0, 1.0, &mut g1[..k], &mut h1[..k]);
            obj.gradient(&m[..k], 1.0, 3.0, &mut g3[..k], &mut h3[..k]);
            for c in 0..k {
                assert!(
                    (g3[c] - 3.0 * g1[c]).abs() <= 1e-6 * g3[c].abs().max(1.0),
                    "{kind}"
                );
                assert!(
                    (h3[c] - 3.0 * h1[c]).abs() <= 1e-6 * h3[c].abs().max(1.0),
                    "{kind}"
                );
            }
        }
    }

    #[test]
    fn the_table_exponential_is_close_to_the_real_one() {
        let mut worst = 0.0f64;
        for i in -60_000..=60_000 {
            let x = i as f32 * 1e-3;
            let got = exp_det(x) as f64;
            let want = (x as f64).exp();
            worst = worst.max((got - want).abs() / want);
        }
        // table interpolation and 2^-23 steps; log2(e) in f32 adds |x| * 6e-8
        assert!(worst < 5e-6, "worst relative error {worst}");
        // clamped far out, never infinite or zero
        assert!(exp_det(1e30).is_finite() && exp_det(-1e30) > 0.0);
        assert_eq!(exp_det(f32::NAN), 1.0);
    }

    #[test]
    fn constants_and_labels_are_checked() {
        let bad = |kind, p: ObjectiveParams, name: &str| {
            let e = Objective::with_params(kind, 1, &p).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        };
        let d = ObjectiveParams::default();
        bad(
            ObjectiveKind::QuantileError,
            ObjectiveParams {
                quantile_alpha: vec![1.0],
                ..d.clone()
            },
            "quantile_alpha",
        );
        bad(
            ObjectiveKind::Huber,
            ObjectiveParams {
                huber_slope: 0.0,
                ..d.clone()
            },
            "huber_slope",
        );
        bad(
            ObjectiveKind::Tweedie,
            ObjectiveParams {
                tweedie_variance_power: 2.0,
                ..d.clone()
            },
            "tweedie_variance_power",
        );
        let poisson = Objective::new(ObjectiveKind::Poisson, 1).unwrap();
        assert!(poisson
            .check_label(4, -1.0)
            .unwrap_err()
            .to_string()
            .contains("row 4"));
        poisson.check_label(0, 0.0).unwrap();
        let gamma = Objective::new(ObjectiveKind::Gamma, 1).unwrap();
        assert!(gamma.check_label(0, 0.0).is_err());
        let cox = Objective::new(ObjectiveKind::Cox, 1).unwrap();
        assert!(cox
            .check_label(7, 0.0)
            .unwrap_err()
            .to_string()
            .contains("row 7"));
        cox.check_label(0, -3.0).unwrap();
        bad(
            ObjectiveKind::QuantileError,
            ObjectiveParams {
                quantile_alpha: vec![0.2, 0.0],
                ..d.clone()
            },
            "quantile_alpha",
        );
        bad(
            ObjectiveKind::QuantileError,
            ObjectiveParams {
                quantile_alpha: vec![],
                ..d.clone()
            },
            "quantile_alpha",
        );
        let raw = Objective::new(ObjectiveKind::LogitRaw, 1).unwrap();
        assert!(raw.check_label(0, 1.5).is_err());
    }

    #[test]
    fn outputs_follow_each_link() {
        let m = [0.5f32, -1.0];
        let poisson = Objective::new(ObjectiveKind::Poisson, 1).unwrap();
        assert_eq!(poisson.transform(&m), vec![0.5f32.exp(), (-1.0f32).exp()]);
        let raw = Objective::new(ObjectiveKind::LogitRaw, 1).unwrap();
        assert_eq!(raw.transform(&m), m.to_vec());
        let softmax = Objective::new(ObjectiveKind::Softmax, 2).unwrap();
        assert_eq!(softmax.output_width(), 1);
        assert_eq!(softmax.transform(&[0.1, 0.3, 2.0, -1.0]), vec![1.0, 0.0]);
        assert_eq!(poisson.base_margin_from_score(1.0), vec![0.0]);
    }
}
