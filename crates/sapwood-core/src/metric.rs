//! Evaluation metrics, computed in f64 from margins in a fixed row order.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::objective::ObjectiveKind;

/// A metric reported on evaluation sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Root mean squared error.
    Rmse,
    /// Mean absolute error.
    Mae,
    /// Binary cross-entropy.
    #[serde(rename = "logloss")]
    LogLoss,
    /// Binary classification error at threshold 0.5.
    Error,
    /// Area under the ROC curve (ties get half credit).
    Auc,
    /// Multiclass cross-entropy.
    #[serde(rename = "mlogloss")]
    MLogLoss,
    /// Multiclass error rate.
    #[serde(rename = "merror")]
    MError,
}

impl Metric {
    /// The name users write.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Rmse => "rmse",
            Metric::Mae => "mae",
            Metric::LogLoss => "logloss",
            Metric::Error => "error",
            Metric::Auc => "auc",
            Metric::MLogLoss => "mlogloss",
            Metric::MError => "merror",
        }
    }

    /// The metric reported for `objective` when none is asked for.
    pub fn default_for(objective: ObjectiveKind) -> Metric {
        match objective {
            ObjectiveKind::SquaredError => Metric::Rmse,
            ObjectiveKind::Logistic => Metric::LogLoss,
            ObjectiveKind::Softprob => Metric::MLogLoss,
        }
    }

    /// Whether a larger value is better (for early stopping).
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::Auc)
    }

    /// Refuses a metric that makes no sense for the objective.
    pub fn check_objective(self, objective: ObjectiveKind) -> Result<()> {
        let ok = match self {
            Metric::Rmse | Metric::Mae => objective == ObjectiveKind::SquaredError,
            Metric::LogLoss | Metric::Error | Metric::Auc => objective == ObjectiveKind::Logistic,
            Metric::MLogLoss | Metric::MError => objective == ObjectiveKind::Softprob,
        };
        if ok {
            Ok(())
        } else {
            Err(Error::param(
                "eval_metric",
                format!(
                    "`{}` does not apply to objective {}",
                    self.name(),
                    objective
                ),
            ))
        }
    }

    /// Evaluates the metric. `margins` holds `groups` values per row (row-major);
    /// `labels` holds values (regression, binary) or class indices (multiclass).
    pub fn evaluate(
        self,
        margins: &[f32],
        groups: usize,
        labels: &[f32],
        weights: Option<&[f32]>,
    ) -> f64 {
        let n = labels.len();
        debug_assert_eq!(margins.len(), n * groups);
        let w = |i: usize| weights.map_or(1.0, |w| w[i] as f64);
        let mean = |f: &dyn Fn(usize) -> f64| {
            let (mut s, mut sw) = (0.0f64, 0.0f64);
            for i in 0..n {
                s += w(i) * f(i);
                sw += w(i);
            }
            if sw > 0.0 {
                s / sw
            } else {
                f64::NAN
            }
        };
        match self {
            Metric::Rmse => mean(&|i| (margins[i] as f64 - labels[i] as f64).powi(2)).sqrt(),
            Metric::Mae => mean(&|i| (margins[i] as f64 - labels[i] as f64).abs()),
            Metric::LogLoss => mean(&|i| {
                let p = sigmoid(margins[i] as f64).clamp(1e-16, 1.0 - 1e-16);
                let y = labels[i] as f64;
                -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
            }),
            Metric::Error => mean(&|i| {
                let predicted = margins[i] > 0.0;
                let actual = labels[i] > 0.5;
                if predicted == actual {
                    0.0
                } else {
                    1.0
                }
            }),
            Metric::Auc => auc(margins, labels, weights),
            Metric::MLogLoss => {
                let mut p = vec![0.0f64; groups];
                let (mut s, mut sw) = (0.0f64, 0.0f64);
                for i in 0..n {
                    softmax(&margins[i * groups..(i + 1) * groups], &mut p);
                    s -= w(i) * p[labels[i] as usize].clamp(1e-16, 1.0).ln();
                    sw += w(i);
                }
                if sw > 0.0 {
                    s / sw
                } else {
                    f64::NAN
                }
            }
            Metric::MError => mean(&|i| {
                let row = &margins[i * groups..(i + 1) * groups];
                if argmax(row) == labels[i] as usize {
                    0.0
                } else {
                    1.0
                }
            }),
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "rmse" => Metric::Rmse,
            "mae" => Metric::Mae,
            "logloss" => Metric::LogLoss,
            "error" => Metric::Error,
            "auc" => Metric::Auc,
            "mlogloss" => Metric::MLogLoss,
            "merror" => Metric::MError,
            other => return Err(Error::UnknownMetric(other.to_string())),
        })
    }
}

/// The logistic function in f64, for outputs and metrics.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Softmax of `margins` into `out`, in f64, for outputs and metrics.
pub fn softmax(margins: &[f32], out: &mut [f64]) {
    let max = margins
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let mut sum = 0.0;
    for (o, &m) in out.iter_mut().zip(margins) {
        *o = (m as f64 - max).exp();
        sum += *o;
    }
    for o in out.iter_mut() {
        *o /= sum;
    }
}

/// Index of the largest value; the first one on ties.
pub fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

/// Weighted area under the ROC curve; tied scores count half.
fn auc(scores: &[f32], labels: &[f32], weights: Option<&[f32]>) -> f64 {
    let n = labels.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)));
    let w = |i: usize| weights.map_or(1.0, |w| w[i] as f64);
    let (mut neg_below, mut area, mut pos_total, mut neg_total) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    let mut i = 0;
    while i < n {
        let mut j = i;
        let (mut pos, mut neg) = (0.0, 0.0);
        while j < n && scores[order[j]] == scores[order[i]] {
            let r = order[j];
            if labels[r] > 0.5 {
                pos += w(r);
            } else {
                neg += w(r);
            }
            j += 1;
        }
        area += pos * (neg_below + 0.5 * neg);
        neg_below += neg;
        pos_total += pos;
        neg_total += neg;
        i = j;
    }
    if pos_total == 0.0 || neg_total == 0.0 {
        f64::NAN
    } else {
        area / (pos_total * neg_total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn auc_matches_pairwise_count() {
        let scores = [0.1f32, 0.4, 0.35, 0.8, 0.4, -1.0];
        let labels = [0.0f32, 0.0, 1.0, 1.0, 1.0, 0.0];
        let mut good = 0.0;
        let mut pairs = 0.0;
        for i in 0..6 {
            for j in 0..6 {
                if labels[i] > 0.5 && labels[j] < 0.5 {
                    pairs += 1.0;
                    if scores[i] > scores[j] {
                        good += 1.0;
                    } else if scores[i] == scores[j] {
                        good += 0.5;
                    }
                }
            }
        }
        assert_relative_eq!(
            Metric::Auc.evaluate(&scores, 1, &labels, None),
            good / pairs
        );
    }

    #[test]
    fn simple_metrics() {
        let m = [1.0f32, 3.0];
        let y = [0.0f32, 3.0];
        assert_relative_eq!(Metric::Rmse.evaluate(&m, 1, &y, None), (0.5f64).sqrt());
        assert_relative_eq!(Metric::Mae.evaluate(&m, 1, &y, Some(&[1.0, 3.0])), 0.25);
        let margins = [0.0f32, 0.0, 2.0, 1.0, 0.0, 0.0];
        assert_relative_eq!(Metric::MError.evaluate(&margins, 3, &[1.0, 0.0], None), 0.5);
        let ml = Metric::MLogLoss.evaluate(&[0.0, 0.0], 2, &[1.0], None);
        assert_relative_eq!(ml, 2f64.ln(), epsilon = 1e-12);
    }
}
