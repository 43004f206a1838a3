//! Losses: per-row gradients computed so that every backend gets the same bits.
//!
//! Only single IEEE f32 operations that cannot be fused (no `a * b + c`), integer arithmetic
//! and lookup tables are used. The logistic and softmax functions are read from fixed-point
//! tables with integer interpolation; the tables come from [`crate::detmath`], so they are the
//! same on every machine. The WGSL and CUDA kernels upload the same tables. Subnormal inputs
//! and results are flushed to zero explicitly, so a GPU that flushes them agrees too.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::detmath;
use crate::error::{Error, Result};

/// The loss being minimised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectiveKind {
    /// `reg:squarederror`: squared error on a real label.
    #[serde(rename = "reg:squarederror")]
    SquaredError,
    /// `binary:logistic`: log loss on a 0/1 (or probability) label; outputs probabilities.
    #[serde(rename = "binary:logistic")]
    Logistic,
    /// `multi:softprob`: softmax cross-entropy; one tree per class per round.
    #[serde(rename = "multi:softprob")]
    Softprob,
}

impl ObjectiveKind {
    /// The XGBoost-style name.
    pub fn name(self) -> &'static str {
        match self {
            ObjectiveKind::SquaredError => "reg:squarederror",
            ObjectiveKind::Logistic => "binary:logistic",
            ObjectiveKind::Softprob => "multi:softprob",
        }
    }

    /// Whether labels are class indices.
    pub fn is_classification(self) -> bool {
        !matches!(self, ObjectiveKind::SquaredError)
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
        match s {
            "reg:squarederror" | "regression" | "l2" => Ok(ObjectiveKind::SquaredError),
            "binary:logistic" | "binary" => Ok(ObjectiveKind::Logistic),
            "multi:softprob" | "multi:softmax" | "multiclass" => Ok(ObjectiveKind::Softprob),
            other => Err(Error::UnknownObjective(other.to_string())),
        }
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

const ONE: u32 = 1 << PROB_BITS;

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
    (m * (1u32 << MARGIN_FRAC_BITS) as f32).round_ties_even() as i32
}

/// sigmoid(m) as an integer in [1, 2^24 - 1] (units of 2^-24), by table interpolation.
#[inline]
pub fn sigmoid_fixed(m: f32) -> u32 {
    let t = sigmoid_table();
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
    let d = ftz(d);
    if d.is_nan() || d >= EXP_RANGE as f32 {
        return 0;
    }
    let t = exp_table();
    let fixed = (d.max(0.0) * (1u32 << MARGIN_FRAC_BITS) as f32).round_ties_even() as u32;
    let shift = MARGIN_FRAC_BITS - EXP_STEP_BITS;
    let i = (fixed >> shift) as usize;
    if i + 1 >= t.len() {
        return 0;
    }
    let f = fixed & ((1 << shift) - 1);
    t[i] - (((t[i] - t[i + 1]) * f) >> shift)
}

/// A loss with its number of output groups (classes for softmax, else 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Objective {
    kind: ObjectiveKind,
    groups: usize,
}

impl Objective {
    /// The objective `kind` with `num_class` classes (ignored unless softmax).
    pub fn new(kind: ObjectiveKind, num_class: usize) -> Result<Self> {
        let groups = match kind {
            ObjectiveKind::Softprob => {
                if num_class < 2 {
                    return Err(Error::param(
                        "num_class",
                        format!("multi:softprob needs at least 2 classes, got {num_class}"),
                    ));
                }
                num_class
            }
            _ => 1,
        };
        Ok(Objective { kind, groups })
    }

    /// Which loss this is.
    pub fn kind(&self) -> ObjectiveKind {
        self.kind
    }

    /// Margins (and trees) per row per round.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// Checks one label, naming its row when it is refused.
    pub fn check_label(&self, row: usize, y: f32) -> Result<()> {
        let bad = |reason: &str| {
            Err(Error::InvalidLabel {
                row,
                value: y.to_string(),
                reason: reason.to_string(),
            })
        };
        if !y.is_finite() {
            return bad("labels must be finite numbers");
        }
        match self.kind {
            ObjectiveKind::SquaredError => Ok(()),
            ObjectiveKind::Logistic if !(0.0..=1.0).contains(&y) => {
                bad("binary:logistic needs labels in [0, 1]")
            }
            ObjectiveKind::Logistic => Ok(()),
            ObjectiveKind::Softprob if y < 0.0 || y.fract() != 0.0 || y as usize >= self.groups => {
                bad(&format!(
                    "multi:softprob needs class indices 0..{}",
                    self.groups
                ))
            }
            ObjectiveKind::Softprob => Ok(()),
        }
    }

    /// Gradient and hessian of one row for every group, written to `g` and `h` (length
    /// `groups`). The arithmetic is the contract every backend reproduces bit for bit.
    #[inline]
    pub fn gradient(&self, margins: &[f32], label: f32, weight: f32, g: &mut [f32], h: &mut [f32]) {
        let y = ftz(label);
        let w = ftz(weight);
        match self.kind {
            ObjectiveKind::SquaredError => {
                g[0] = ftz(ftz(ftz(margins[0]) - y) * w);
                h[0] = w;
            }
            ObjectiveKind::Logistic => {
                let p = sigmoid_fixed(margins[0]) as f32 * (1.0 / ONE as f32);
                g[0] = ftz(ftz(p - y) * w);
                h[0] = ftz((p * (1.0 - p)).max(MIN_HESSIAN) * w);
            }
            ObjectiveKind::Softprob => {
                // recomputing the cheap table lookups avoids any scratch allocation per row
                let k = self.groups;
                let max = margins[..k]
                    .iter()
                    .fold(f32::NEG_INFINITY, |a, &m| a.max(ftz(m)));
                let e = |c: usize| exp_neg_fixed(max - ftz(margins[c])) as u64;
                // only all-NaN margins can make the sum zero; keep the division defined
                let sum: u64 = (0..k).map(e).sum::<u64>().max(1);
                let class = y as usize;
                for c in 0..k {
                    let pk = (e(c) << PROB_BITS) / sum;
                    let p = pk as f32 * (1.0 / ONE as f32);
                    let t = if c == class { 1.0 } else { 0.0 };
                    g[c] = ftz(ftz(p - t) * w);
                    h[c] = ftz((2.0 * (p * (1.0 - p))).max(MIN_HESSIAN) * w);
                }
            }
        }
    }

    /// Margins that correspond to `base_score` in output space.
    pub fn base_margin_from_score(&self, base_score: f64) -> Vec<f32> {
        let m = match self.kind {
            ObjectiveKind::SquaredError | ObjectiveKind::Softprob => base_score,
            ObjectiveKind::Logistic => {
                let p = base_score.clamp(1e-7, 1.0 - 1e-7);
                detmath::ln(p / (1.0 - p))
            }
        };
        vec![m as f32; self.groups]
    }

    /// Output-space predictions from margins (`groups` per row): identity, probability,
    /// or class probabilities.
    pub fn transform(&self, margins: &[f32]) -> Vec<f32> {
        match self.kind {
            ObjectiveKind::SquaredError => margins.to_vec(),
            ObjectiveKind::Logistic => margins
                .iter()
                .map(|&m| crate::metric::sigmoid(m as f64) as f32)
                .collect(),
            ObjectiveKind::Softprob => {
                let k = self.groups;
                let mut p = vec![0.0f64; k];
                let mut out = Vec::with_capacity(margins.len());
                for row in margins.chunks_exact(k) {
                    crate::metric::softmax(row, &mut p);
                    out.extend(p.iter().map(|&v| v as f32));
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        crate::metric::softmax(&m, &mut p);
        for c in 0..3 {
            let t = if c == 2 { 1.0 } else { 0.0 };
            assert!((g[c] as f64 - (p[c] - t)).abs() < 1e-6);
            assert!((h[c] as f64 - 2.0 * p[c] * (1.0 - p[c])).abs() < 1e-6);
        }
        assert!(g.iter().map(|&x| x as f64).sum::<f64>().abs() < 1e-6);
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
}
