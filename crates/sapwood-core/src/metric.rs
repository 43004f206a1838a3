//! Evaluation metrics, computed in f64 from margins in a fixed row order.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
pub use crate::link::{argmax, sigmoid, softmax};
pub use crate::objective::MetricConstants;
use crate::objective::{Objective, ObjectiveKind};

/// A metric's number parameter (the `1.5` of `tweedie-nloglik@1.5`), as f32 bits so that
/// metrics stay comparable and hashable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MetricParam(u32);

impl MetricParam {
    /// The parameter `v`.
    pub fn new(v: f32) -> Self {
        MetricParam(v.to_bits())
    }

    /// Its value.
    pub fn value(self) -> f32 {
        f32::from_bits(self.0)
    }
}

/// A metric reported on evaluation sets, named as XGBoost names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Root mean squared error.
    Rmse,
    /// Root mean squared logarithmic error, on ln(1 + x).
    Rmsle,
    /// Mean absolute error.
    Mae,
    /// Mean absolute percentage error, |y - p| / |y|.
    Mape,
    /// Mean pseudo-Huber error, with the objective's `huber_slope`.
    Mphe,
    /// Pinball loss at the objective's `quantile_alpha`.
    Quantile,
    /// Negative log-likelihood of a Poisson regression.
    PoissonNLogLik,
    /// Negative log-likelihood of a gamma regression.
    GammaNLogLik,
    /// Residual deviance of a gamma regression.
    GammaDeviance,
    /// Negative log-likelihood of a Tweedie regression, with its variance power (the
    /// objective's when `None`).
    TweedieNLogLik(Option<MetricParam>),
    /// Binary cross-entropy.
    LogLoss,
    /// Binary classification error at threshold 0.5.
    Error,
    /// Area under the ROC curve (ties get half credit); for multiclass, one-vs-rest AUCs
    /// weighted by class prevalence.
    Auc,
    /// Area under the precision-recall curve (average precision, ties grouped).
    AucPr,
    /// Multiclass cross-entropy.
    MLogLoss,
    /// Multiclass error rate.
    MError,
    /// Normalised discounted cumulative gain over the top k of each query (all when `None`),
    /// averaged over queries.
    Ndcg(Option<u32>),
    /// Mean average precision over the top k of each query.
    Map(Option<u32>),
    /// Precision at k, averaged over queries.
    Pre(Option<u32>),
    /// Negative partial log-likelihood of Cox proportional hazards, per event.
    CoxNLogLik,
}

impl Metric {
    /// The name users write, without a parameter (`Display` adds it: `tweedie-nloglik@1.5`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Rmse => "rmse",
            Metric::Rmsle => "rmsle",
            Metric::Mae => "mae",
            Metric::Mape => "mape",
            Metric::Mphe => "mphe",
            Metric::Quantile => "quantile",
            Metric::PoissonNLogLik => "poisson-nloglik",
            Metric::GammaNLogLik => "gamma-nloglik",
            Metric::GammaDeviance => "gamma-deviance",
            Metric::TweedieNLogLik(_) => "tweedie-nloglik",
            Metric::LogLoss => "logloss",
            Metric::Error => "error",
            Metric::Auc => "auc",
            Metric::AucPr => "aucpr",
            Metric::MLogLoss => "mlogloss",
            Metric::MError => "merror",
            Metric::Ndcg(_) => "ndcg",
            Metric::Map(_) => "map",
            Metric::Pre(_) => "pre",
            Metric::CoxNLogLik => "cox-nloglik",
        }
    }

    /// Whether the metric is computed per query group.
    pub fn is_ranking(self) -> bool {
        matches!(self, Metric::Ndcg(_) | Metric::Map(_) | Metric::Pre(_))
    }

    /// The metric reported for `objective` when none is asked for (XGBoost's choice).
    pub fn default_for(objective: ObjectiveKind) -> Metric {
        match objective {
            ObjectiveKind::SquaredError | ObjectiveKind::Huber => Metric::Rmse,
            ObjectiveKind::AbsoluteError => Metric::Mae,
            ObjectiveKind::QuantileError => Metric::Quantile,
            ObjectiveKind::PseudoHuber => Metric::Mphe,
            ObjectiveKind::Poisson => Metric::PoissonNLogLik,
            ObjectiveKind::Gamma => Metric::GammaNLogLik,
            ObjectiveKind::Tweedie => Metric::TweedieNLogLik(None),
            ObjectiveKind::Logistic | ObjectiveKind::LogitRaw => Metric::LogLoss,
            ObjectiveKind::Softprob | ObjectiveKind::Softmax => Metric::MLogLoss,
            ObjectiveKind::RankNdcg | ObjectiveKind::RankPairwise => Metric::Ndcg(None),
            ObjectiveKind::RankMap => Metric::Map(None),
            ObjectiveKind::Cox => Metric::CoxNLogLik,
            ObjectiveKind::Custom => Metric::Rmse,
        }
    }

    /// Whether a larger value is better (for early stopping).
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::Auc | Metric::AucPr | Metric::Ndcg(_) | Metric::Map(_) | Metric::Pre(_)
        )
    }

    /// Refuses a metric that makes no sense for the objective.
    pub fn check_objective(self, objective: ObjectiveKind) -> Result<()> {
        let regression = !objective.is_classification();
        let ok = match self {
            Metric::Auc => objective.is_classification(),
            Metric::LogLoss | Metric::Error | Metric::AucPr => objective.is_binary(),
            // a multiclass custom objective's margins are logits
            Metric::MLogLoss | Metric::MError => {
                objective.is_multiclass() || objective == ObjectiveKind::Custom
            }
            m if m.is_ranking() => objective.is_ranking(),
            // survival times are not values to predict: only the likelihood applies
            Metric::CoxNLogLik => objective == ObjectiveKind::Cox,
            _ => regression && objective != ObjectiveKind::Cox,
        };
        if ok {
            Ok(())
        } else {
            Err(Error::param(
                "eval_metric",
                format!("`{}` does not apply to objective {}", self, objective),
            ))
        }
    }

    /// Evaluates the metric on the margins of a model trained with `objective`: regression
    /// metrics see the predictions (exp(margin) under a log link), classification metrics
    /// the margins; objective constants fill the metric's parameters.
    pub fn evaluate_for(
        self,
        objective: &Objective,
        margins: &[f32],
        labels: &[f32],
        weights: Option<&[f32]>,
    ) -> f64 {
        self.evaluate_on(objective, margins, labels, weights, None)
    }

    /// [`Metric::evaluate_for`] with the rows' query groups, which ranking metrics read (a
    /// set without groups is one query).
    pub fn evaluate_on(
        self,
        objective: &Objective,
        margins: &[f32],
        labels: &[f32],
        weights: Option<&[f32]>,
        queries: Option<&crate::rank::Queries>,
    ) -> f64 {
        if self.is_ranking() {
            return self.evaluate_ranked(
                &objective.rank_params().gains,
                margins,
                labels,
                weights,
                queries,
            );
        }
        if self == Metric::CoxNLogLik {
            return crate::survival::neg_log_likelihood(labels, margins);
        }
        let kind = objective.kind();
        let preds;
        let values = if kind.has_log_link() && !self.on_margins() {
            preds = objective.transform(margins);
            &preds[..]
        } else {
            margins
        };
        let k = objective.groups();
        if k > 1 && !kind.is_classification() && !matches!(self, Metric::MLogLoss | Metric::MError)
        {
            // one output per quantile (or custom output), each scored against the label (a
            // quantile with its own α); the mean over outputs, as XGBoost reports
            // multi-output metrics
            let total: f64 = (0..k)
                .map(|q| {
                    let column: Vec<f32> = values.iter().skip(q).step_by(k).copied().collect();
                    let c = objective.metric_constants(q);
                    self.evaluate_with(&column, 1, labels, weights, c)
                })
                .sum();
            return total / k as f64;
        }
        let constants = objective.metric_constants(0);
        self.evaluate_with(values, k, labels, weights, constants)
    }

    fn evaluate_ranked(
        self,
        gains: &crate::rank::Gains,
        margins: &[f32],
        labels: &[f32],
        weights: Option<&[f32]>,
        queries: Option<&crate::rank::Queries>,
    ) -> f64 {
        use crate::rank::{evaluate, Queries, RankMetric};
        let whole;
        let queries = match queries {
            Some(q) => q,
            None => {
                whole = Queries::from_sizes(&[labels.len() as u32]);
                &whole
            }
        };
        let (metric, k) = match self {
            Metric::Ndcg(k) => (RankMetric::Ndcg, k),
            Metric::Map(k) => (RankMetric::Map, k),
            Metric::Pre(k) => (RankMetric::Precision, k),
            _ => unreachable!("a ranking metric"),
        };
        evaluate(metric, k, gains, queries, labels, weights, margins)
    }

    /// Whether the metric reads margins of a log-link model (its likelihoods) rather than
    /// predictions.
    fn on_margins(self) -> bool {
        matches!(
            self,
            Metric::PoissonNLogLik
                | Metric::GammaNLogLik
                | Metric::GammaDeviance
                | Metric::TweedieNLogLik(_)
        )
    }

    /// Evaluates the metric. `margins` holds `groups` values per row (row-major): values
    /// for regression metrics, log-means for the Poisson, gamma and Tweedie metrics, margins
    /// for classification; `labels` holds values or class indices. Metric parameters take
    /// their defaults (`quantile_alpha` 0.5, `huber_slope` 1, variance power 1.5).
    pub fn evaluate(
        self,
        margins: &[f32],
        groups: usize,
        labels: &[f32],
        weights: Option<&[f32]>,
    ) -> f64 {
        self.evaluate_with(margins, groups, labels, weights, MetricConstants::default())
    }

    fn evaluate_with(
        self,
        margins: &[f32],
        groups: usize,
        labels: &[f32],
        weights: Option<&[f32]>,
        c: MetricConstants,
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
        let p = |i: usize| margins[i] as f64;
        let y = |i: usize| labels[i] as f64;
        match self {
            Metric::Rmse => mean(&|i| (p(i) - y(i)).powi(2)).sqrt(),
            Metric::Rmsle => mean(&|i| (p(i).ln_1p() - y(i).ln_1p()).powi(2)).sqrt(),
            Metric::Mae => mean(&|i| (p(i) - y(i)).abs()),
            Metric::Mape => mean(&|i| ((p(i) - y(i)) / y(i)).abs()),
            Metric::Mphe => {
                let s = c.huber_slope;
                mean(&|i| {
                    let z = (p(i) - y(i)) / s;
                    s * s * ((1.0 + z * z).sqrt() - 1.0)
                })
            }
            Metric::Quantile => {
                let a = c.quantile_alpha;
                mean(&|i| {
                    let d = y(i) - p(i);
                    if d >= 0.0 {
                        a * d
                    } else {
                        (a - 1.0) * d
                    }
                })
            }
            Metric::PoissonNLogLik => mean(&|i| {
                let (m, y) = (p(i), y(i));
                ln_gamma(y + 1.0) + m.exp() - m * y
            }),
            Metric::GammaNLogLik => mean(&|i| {
                // shape 1: -ln f(y; mean e^m) = y / e^m + m
                let (m, y) = (p(i), y(i));
                y * (-m).exp() + m
            }),
            Metric::GammaDeviance => {
                2.0 * mean(&|i| {
                    let ratio = y(i) * (-p(i)).exp();
                    ratio - ratio.ln() - 1.0
                })
            }
            Metric::TweedieNLogLik(rho) => {
                let rho = rho.map_or(c.tweedie_variance_power, |r| r.value() as f64);
                mean(&|i| {
                    let (m, y) = (p(i), y(i));
                    let a = y * ((1.0 - rho) * m).exp() / (1.0 - rho);
                    let b = ((2.0 - rho) * m).exp() / (2.0 - rho);
                    -a + b
                })
            }
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
            Metric::Auc if groups > 1 => multiclass_auc(margins, groups, labels, weights),
            Metric::Auc => auc(margins, labels, weights),
            Metric::AucPr => average_precision(margins, labels, weights),
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
            Metric::Ndcg(_) | Metric::Map(_) | Metric::Pre(_) => self.evaluate_ranked(
                &crate::rank::Gains::Exponential,
                margins,
                labels,
                weights,
                None,
            ),
            Metric::CoxNLogLik => crate::survival::neg_log_likelihood(labels, margins),
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

/// One metric on one evaluation set after one round.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalResult {
    /// The evaluation set's name.
    pub dataset: String,
    /// The metric.
    pub metric: Metric,
    /// Its value.
    pub value: f64,
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Metric::TweedieNLogLik(Some(p)) => write!(f, "tweedie-nloglik@{}", p.value()),
            Metric::Ndcg(Some(k)) | Metric::Map(Some(k)) | Metric::Pre(Some(k)) => {
                write!(f, "{}@{k}", self.name())
            }
            other => f.write_str(other.name()),
        }
    }
}

impl FromStr for Metric {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if let Some(p) = s.strip_prefix("tweedie-nloglik@") {
            let rho: f32 = p.parse().map_err(|_| Error::UnknownMetric(s.to_string()))?;
            if !(1.0..2.0).contains(&rho) {
                return Err(Error::param(
                    "eval_metric",
                    format!("`{s}`: the variance power must be in [1, 2)"),
                ));
            }
            return Ok(Metric::TweedieNLogLik(Some(MetricParam::new(rho))));
        }
        for (prefix, make) in [
            ("ndcg@", Metric::Ndcg as fn(Option<u32>) -> Metric),
            ("map@", Metric::Map),
            ("pre@", Metric::Pre),
        ] {
            if let Some(k) = s.strip_prefix(prefix) {
                return match k.parse::<u32>() {
                    Ok(k) if k > 0 => Ok(make(Some(k))),
                    _ => Err(Error::param(
                        "eval_metric",
                        format!("`{s}`: the cut-off must be a whole number >= 1"),
                    )),
                };
            }
        }
        Ok(match s {
            "ndcg" | "lambdarank" => Metric::Ndcg(None),
            "map" => Metric::Map(None),
            "rmse" | "l2_root" | "root_mean_squared_error" => Metric::Rmse,
            "rmsle" => Metric::Rmsle,
            "mae" | "l1" | "mean_absolute_error" => Metric::Mae,
            "mape" | "mean_absolute_percentage_error" => Metric::Mape,
            "mphe" => Metric::Mphe,
            "quantile" => Metric::Quantile,
            "poisson-nloglik" | "poisson" => Metric::PoissonNLogLik,
            "gamma-nloglik" | "gamma" => Metric::GammaNLogLik,
            "gamma-deviance" => Metric::GammaDeviance,
            "tweedie-nloglik" | "tweedie" => Metric::TweedieNLogLik(None),
            "logloss" | "binary_logloss" => Metric::LogLoss,
            "error" | "binary_error" => Metric::Error,
            "auc" => Metric::Auc,
            "aucpr" | "average_precision" => Metric::AucPr,
            "mlogloss" | "multi_logloss" => Metric::MLogLoss,
            "merror" | "multi_error" => Metric::MError,
            "cox-nloglik" => Metric::CoxNLogLik,
            other => return Err(Error::UnknownMetric(other.to_string())),
        })
    }
}

impl Serialize for Metric {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// ln Γ(x) for x > 0 (Stirling's series after shifting x above 7; error below 1e-12).
pub fn ln_gamma(x: f64) -> f64 {
    let mut x = x;
    let mut shift = 0.0;
    while x < 7.0 {
        shift -= x.ln();
        x += 1.0;
    }
    let z = 1.0 / (x * x);
    let series = (1.0 / 12.0 - z * (1.0 / 360.0 - z * (1.0 / 1260.0 - z / 1680.0))) / x;
    shift + (x - 0.5) * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI).ln() + series
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

/// One-vs-rest AUC of every class present, averaged with weights equal to each class's
/// weight (XGBoost's multiclass `auc`).
fn multiclass_auc(margins: &[f32], k: usize, labels: &[f32], weights: Option<&[f32]>) -> f64 {
    let n = labels.len();
    let w = |i: usize| weights.map_or(1.0, |w| w[i] as f64);
    let (mut total, mut sum) = (0.0f64, 0.0f64);
    for c in 0..k {
        let scores: Vec<f32> = (0..n).map(|i| margins[i * k + c]).collect();
        let is_c: Vec<f32> = labels
            .iter()
            .map(|&y| (y as usize == c) as u8 as f32)
            .collect();
        let class_weight: f64 = (0..n).filter(|&i| is_c[i] > 0.5).map(w).sum();
        let a = auc(&scores, &is_c, weights);
        if class_weight > 0.0 && a.is_finite() {
            sum += class_weight * a;
            total += class_weight;
        }
    }
    if total > 0.0 {
        sum / total
    } else {
        f64::NAN
    }
}

/// Weighted average precision: the area under the precision-recall curve as a step
/// function, rows with tied scores taken together (scikit-learn's `average_precision_score`).
fn average_precision(scores: &[f32], labels: &[f32], weights: Option<&[f32]>) -> f64 {
    let n = labels.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let w = |i: usize| weights.map_or(1.0, |w| w[i] as f64);
    let pos_total: f64 = (0..n).filter(|&i| labels[i] > 0.5).map(w).sum();
    if pos_total <= 0.0 {
        return f64::NAN;
    }
    let (mut tp, mut fp, mut area) = (0.0f64, 0.0f64, 0.0f64);
    let mut i = 0;
    while i < n {
        let mut j = i;
        let mut pos = 0.0;
        while j < n && scores[order[j]] == scores[order[i]] {
            let r = order[j];
            if labels[r] > 0.5 {
                pos += w(r);
            } else {
                fp += w(r);
            }
            j += 1;
        }
        tp += pos;
        if tp + fp > 0.0 {
            area += (pos / pos_total) * (tp / (tp + fp));
        }
        i = j;
    }
    area
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
