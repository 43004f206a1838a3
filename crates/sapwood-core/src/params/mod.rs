//! What defines a model ([`Params`], saved with it) and how a job runs ([`RunOptions`],
//! never saved): parameters named as XGBoost names them where it has the same one.
//!
//! - `run`: the run options (threads, device, workers, collective, codec);
//! - `names`: every name and alias users write, and [`Settings`], which routes each to its
//!   half;
//! - `reference`: what each one is, for `sapwood params` and the user guide.

mod checked;
mod constraints;
mod names;
mod reference;
mod run;
mod settings;

pub use checked::{Check, Checked};
pub use constraints::{
    parse_interactions, parse_weights, resolve_interactions, FeatureRef, MonotoneConstraints,
    MonotoneMethod,
};
pub use names::{canonical_name, PARAM_NAMES, RUN_OPTION_NAMES};
pub use reference::{aliases, param_doc, ParamDoc, PARAM_DOCS};
pub use run::{
    parse_devices, CollectiveKind, CommCodec, Device, DeviceIndices, RunOptions, MAX_DEVICES,
};
pub use settings::{CheckedSettings, Settings};

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::metric::Metric;
pub use crate::objective::{MulticlassHessian, PairMethodKind, RankHessian};
use crate::objective::{Objective, ObjectiveKind, ObjectiveParams, POISSON_MAX_DELTA_STEP};
pub use crate::split::CatNoise;
use names::{canonical, num, opt, Setting};

/// How trees grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum GrowPolicy {
    /// Level by level up to `max_depth` (XGBoost's `depthwise`).
    #[default]
    #[serde(rename = "depthwise")]
    Depthwise,
    /// Best leaf first up to `max_leaves` (XGBoost's `lossguide`, LightGBM's leaf-wise).
    #[serde(rename = "lossguide")]
    Lossguide,
}

impl FromStr for GrowPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "depthwise" => Ok(GrowPolicy::Depthwise),
            "lossguide" | "leafwise" => Ok(GrowPolicy::Lossguide),
            other => Err(Error::param(
                "grow_policy",
                format!("`{other}` is not depthwise or lossguide"),
            )),
        }
    }
}

/// How gradients are turned into integers for the histograms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Quantisation {
    /// 64-bit fixed point with a scale that cannot overflow: as accurate as f64 sums.
    #[default]
    Exact,
    /// Low-bit values (2..=16 bits) with stochastic rounding; leaves refit from exact sums.
    Bits(u8),
}

impl Quantisation {
    /// `grad_bits` as users write it: 0 (or 64) for exact, 2..=16 for low-bit.
    pub fn from_grad_bits(bits: u32) -> Result<Self> {
        match bits {
            0 | 64 => Ok(Quantisation::Exact),
            2..=16 => Ok(Quantisation::Bits(bits as u8)),
            _ => Err(Error::param(
                "grad_bits",
                format!("{bits} is not 0 (exact) or 2..=16"),
            )),
        }
    }
}

/// What defines a model, with XGBoost's defaults where it has the same parameter (but
/// `learning_rate` 0.1, as LightGBM). Saved
/// with the model; how training runs (threads, device, workers) is [`RunOptions`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Params {
    /// The loss.
    pub objective: ObjectiveKind,
    /// Classes for `multi:softprob`; taken from the labels when `None`.
    pub num_class: Option<usize>,
    /// Boosting rounds.
    pub num_rounds: usize,
    /// Shrinkage applied to every leaf (`eta`).
    pub learning_rate: f64,
    /// Maximum depth; 0 means no limit (only with `lossguide`).
    pub max_depth: usize,
    /// Maximum leaves per tree; 0 means no limit (only with `depthwise`).
    pub max_leaves: usize,
    /// Level-by-level or best-first growth.
    pub grow_policy: GrowPolicy,
    /// Bins per numeric feature, including the missing-value bin.
    pub max_bin: usize,
    /// Bins per categorical feature, including the missing-value bin and the bin that levels
    /// beyond the most frequent ones share; 0 (models saved before it existed) is `max_bin`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_cat_bin: usize,
    /// Minimum hessian sum in a child.
    pub min_child_weight: f64,
    /// L2 regularisation on leaf weights (`reg_lambda`).
    pub lambda: f64,
    /// L1 regularisation on leaf weights (`reg_alpha`).
    pub alpha: f64,
    /// Minimum loss reduction to split (`min_split_loss`).
    pub gamma: f64,
    /// Maximum absolute leaf weight before shrinkage; 0 means none (`count:poisson`:
    /// [`Params::poisson_leaf_bound`]). For `count:poisson` also the hessian's offset, as in
    /// XGBoost.
    pub max_delta_step: f64,
    /// `count:poisson` with `max_delta_step` 0: the bound on a leaf's weight before
    /// shrinkage (the hessian's offset stays XGBoost's 0.7). Models saved before it read
    /// as XGBoost's 0.7.
    #[serde(
        default = "xgboost_poisson_bound",
        skip_serializing_if = "is_xgboost_poisson_bound"
    )]
    pub poisson_leaf_bound: f64,
    /// Minimum rows in a child (estimated from hessians, as LightGBM does); 0 means none.
    pub min_data_in_leaf: usize,
    /// Fraction of rows sampled each round.
    pub subsample: f64,
    /// Fraction of features sampled for each tree.
    pub colsample_bytree: f64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Gradient quantisation (`grad_bits`).
    pub quantisation: Quantisation,
    /// Initial prediction (in output space); estimated from the labels when `None`.
    pub base_score: Option<f64>,
    /// Categorical features with at most this many levels use one-vs-rest splits.
    pub max_cat_to_onehot: usize,
    /// Maximum levels sent left by one categorical split.
    pub max_cat_threshold: usize,
    /// Prior weight (hessian units) shrinking each level's mean gradient toward the node's
    /// when ordering and scoring many-level categorical splits; 0 for none.
    pub cat_smooth: f64,
    /// Extra L2 regularisation for many-level categorical splits.
    pub cat_l2: f64,
    /// How a many-level categorical node estimates the noise in its levels' means (models
    /// saved before the choice existed read as `fitted`, which they were trained with).
    #[serde(default, skip_serializing_if = "is_fitted")]
    pub cat_noise: CatNoise,
    /// Minimum estimated rows per group of levels in a categorical split.
    pub min_data_per_group: usize,
    /// Sampled rows a numeric bin must hold before the next bin starts (LightGBM's
    /// `min_data_in_bin` and its default, 3; 1 gives every distinct value its own bin while
    /// they fit, as XGBoost does). Model files without the key, written before it was
    /// saved, read as 1, the default then.
    #[serde(default = "a_bin_for_every_value")]
    pub min_data_in_bin: usize,
    /// Where a numeric feature has more distinct values than bins, a value that alone
    /// weighs a mean bin is bounded by thresholds on both sides (LightGBM's binning; lighter
    /// values just below it may share its bin); false bins by balanced
    /// weight only, as models saved before it (which read as false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub heavy_value_bins: bool,
    /// Levels seen fewer times than this in the binning sample share one "other" bin.
    pub min_category_count: usize,
    /// Rows sampled (by hash of the global row index) to compute the cuts.
    pub bin_sample_rows: usize,
    /// Metrics reported on evaluation sets; the objective's default when empty.
    pub eval_metric: Vec<Metric>,
    /// Stop when the last metric of the last evaluation set has not improved for this many rounds.
    pub early_stopping_rounds: Option<usize>,
    /// The quantiles `reg:quantileerror` fits: one output (and one tree per round) each.
    #[serde(skip_serializing_if = "is_half", with = "one_or_many")]
    pub quantile_alpha: Vec<f64>,
    /// Where `reg:pseudohubererror` and `huber` turn from quadratic to linear.
    #[serde(skip_serializing_if = "is_one")]
    pub huber_slope: f64,
    /// The variance power of `reg:tweedie`, in [1, 2).
    #[serde(skip_serializing_if = "is_one_and_a_half")]
    pub tweedie_variance_power: f64,
    /// Ranking: the truncation level of `topk` pairs (32 when unset), or the partners
    /// drawn per document by `mean` (1 when unset), as XGBoost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lambdarank_num_pair_per_sample: Option<u32>,
    /// Ranking: how pairs are chosen (`topk` or `mean`).
    #[serde(skip_serializing_if = "is_topk")]
    pub lambdarank_pair_method: PairMethodKind,
    /// Ranking: NDCG gains are 2^label - 1 (else the label).
    #[serde(skip_serializing_if = "is_true")]
    pub ndcg_exp_gain: bool,
    /// Ranking: the NDCG gain of each integer label, LightGBM's `label_gain` (empty:
    /// `ndcg_exp_gain` decides).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub label_gain: Vec<f64>,
    /// Ranking: each query's gradients are scaled by log2(1 + Σ|λ|) / Σ|λ|.
    #[serde(skip_serializing_if = "is_true")]
    pub lambdarank_normalization: bool,
    /// Multiclass: the softmax hessian, LightGBM's K/(K - 1) · p(1 - p) or XGBoost's
    /// 2p(1 - p) (models saved before it, which read as XGBoost's).
    #[serde(default, skip_serializing_if = "is_xgboost_hessian")]
    pub multiclass_hessian: MulticlassHessian,
    /// Ranking: a pair's hessian, XGBoost's 2p(1 - p)·|Δ| (the default, and what models
    /// saved before the choice existed read as) or LightGBM's p(1 - p)·|Δ|.
    #[serde(default, skip_serializing_if = "is_xgboost_rank_hessian")]
    pub lambdarank_hessian: RankHessian,
    /// Direction (+1, -1, 0) the prediction must follow along each feature.
    #[serde(skip_serializing_if = "MonotoneConstraints::is_empty")]
    pub monotone_constraints: MonotoneConstraints,
    /// How monotone constraints bound leaf values (`basic` or `intermediate`).
    #[serde(skip_serializing_if = "is_basic")]
    pub monotone_constraints_method: MonotoneMethod,
    /// Sets of features allowed to appear together on a root-to-leaf path; features in
    /// no set may only be used alone. Empty: no constraint.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interaction_constraints: Vec<Vec<FeatureRef>>,
    /// Fraction of the tree's features sampled for each depth level.
    #[serde(skip_serializing_if = "is_one")]
    pub colsample_bylevel: f64,
    /// Fraction of the level's features sampled for each node.
    #[serde(skip_serializing_if = "is_one")]
    pub colsample_bynode: f64,
    /// Relative chance of each feature to be sampled by the colsample fractions; empty: equal.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub feature_weights: Vec<f64>,
    /// One random threshold per feature and node instead of every one (LightGBM's
    /// `extra_trees`).
    #[serde(skip_serializing_if = "is_false")]
    pub extra_trees: bool,
}

fn is_false(v: &bool) -> bool {
    !*v
}
fn is_basic(v: &MonotoneMethod) -> bool {
    *v == MonotoneMethod::Basic
}

/// A boolean as users write it: true/false, 1/0.
fn flag(name: &'static str, v: &str) -> Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        other => Err(Error::param(
            name,
            format!("`{other}` is not true or false"),
        )),
    }
}

fn is_true(v: &bool) -> bool {
    *v
}

// parameters added after the first release are written only when set, so that models of
// the earlier objectives keep their exact bytes
fn is_half(v: &[f64]) -> bool {
    v == [0.5]
}
fn is_topk(v: &PairMethodKind) -> bool {
    *v == PairMethodKind::TopK
}

fn is_fitted(v: &CatNoise) -> bool {
    *v == CatNoise::Fitted
}
fn is_xgboost_hessian(v: &MulticlassHessian) -> bool {
    *v == MulticlassHessian::XGBoost
}
fn is_xgboost_rank_hessian(v: &RankHessian) -> bool {
    *v == RankHessian::XGBoost
}
fn a_bin_for_every_value() -> usize {
    1
}
fn xgboost_poisson_bound() -> f64 {
    POISSON_MAX_DELTA_STEP
}
fn is_xgboost_poisson_bound(v: &f64) -> bool {
    *v == POISSON_MAX_DELTA_STEP
}

/// One number, or a list of them, as `quantile_alpha` is written: models with one value
/// keep the bytes they had before lists existed.
mod one_or_many {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(f64),
        Many(Vec<f64>),
    }

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        match v {
            [one] => one.serialize(s),
            many => many.serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Ok(match OneOrMany::deserialize(d)? {
            OneOrMany::One(v) => vec![v],
            OneOrMany::Many(v) => v,
        })
    }
}

fn is_zero(v: &usize) -> bool {
    *v == 0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}
fn is_one_and_a_half(v: &f64) -> bool {
    *v == 1.5
}

impl Default for Params {
    fn default() -> Self {
        Params {
            objective: ObjectiveKind::SquaredError,
            num_class: None,
            num_rounds: 100,
            // LightGBM's and CatBoost's habit rather than XGBoost's 0.3: at each library's
            // defaults (100 rounds) 0.3 left Sapwood as far behind LightGBM as XGBoost is
            // (median +1.6% over bench/defaults_suite.py's 27 tables, 15 more than 1%
            // behind, log losses 5-15%); 0.1 is -0.2%, 4 behind (count tables want more)
            learning_rate: 0.1,
            max_depth: 6,
            max_leaves: 0,
            grow_policy: GrowPolicy::Depthwise,
            max_bin: 256,
            // XGBoost gives every level a bin and LightGBM keeps levels until 99% of the
            // rows are covered, both past `max_bin`. Capped at 256 like numeric features,
            // ID-like columns lost their long tail: 4096 cut Poisson deviance by 40% on
            // bench/categorical_suite.py's `baseball` and `innovation` and RMSE by 11% on
            // `inspections`; with the prior estimated per node, every level of scorecard's
            // 6,247 institutions in a bin cut its RMSE by a further 15%
            max_cat_bin: 65_535,
            min_child_weight: 1.0,
            lambda: 1.0,
            alpha: 0.0,
            gamma: 0.0,
            max_delta_step: 0.0,
            // XGBoost bounds Poisson leaves by 0.7 (its hessian's offset), LightGBM not at
            // all. Over seven public count tables (bench/objectives.py's txhousing, the
            // count tables of bench/defaults_suite.py and bench/categorical_suite.py) 2 beat
            // 0.7 on six (txhousing 5.951 -> 5.640 against LightGBM's 5.740, innovation
            // 5.143 -> 4.803) and lost 0.3% on baseball; no bound lost badly where few rows
            // hold large counts (innovation 8.79)
            poisson_leaf_bound: 2.0,
            min_data_in_leaf: 0,
            subsample: 1.0,
            colsample_bytree: 1.0,
            seed: 0,
            quantisation: Quantisation::Exact,
            base_score: None,
            max_cat_to_onehot: 4,
            // chosen on bench/categoricals.py (4 public tables, 6 columns of 104 to 13,492
            // levels, 5 folds) with txhousing's 46-level `city` (Poisson) and the other
            // bundled categorical sets beside: a prior of 100 hessian units per level and
            // at most 20 levels sent left keep native splits within fold noise of the
            // better of integer codes and dropping the column on every study column
            // (worst mean margin -0.0010 AUC, sd 0.0034), where 32 / 40 lost up to 0.008
            // AUC to dropping flights' `dest`, and 8 cost `city` 31% of Poisson deviance
            // (a prior of 200 did as well on the table but cost txhousing's quantile loss
            // 5%).
            // Columns with at most 20 levels in a node keep the unshrunk search. Models
            // saved before keep their own values (`cat_smooth: 0` is the unshrunk search).
            // Since nodes measure their noise (`cat_noise`), LightGBM's 32: flights' `dest`
            // stays within fold noise of dropping it (-0.0018 AUC), and at 32 rather than
            // 20 bench/categorical_suite.py's median moved from -0.35% to -1.31% (ahead of
            // the better peer), `innovation` from +1.07% to -3.35%, txhousing's absolute
            // error (bench/objectives.py) from 0.6% behind XGBoost to 0.4% ahead; the
            // defaults suite's median stayed at -0.28%. Since the search is unshrunk only
            // in nodes of at most 32 levels (split::evaluate::UNSHRUNK_LEVELS), whatever
            // the levels scanned, XGBoost's 64: the suite's median from -1.31% to -1.82%,
            // `scorecard` and `inspections` 0.9% and 1.2% closer, `hotel` 0.17% further,
            // and flights' `tailnum` and `dest` ahead of dropping them (+0.0005, +0.0001
            // AUC).
            max_cat_threshold: 64,
            // the most a node's own prior may be: each node estimates it from its levels
            // (split::evaluate::node_prior), so 100 now only bounds columns of pure noise
            cat_smooth: 100.0,
            // lighter than LightGBM's 10 / 100, which cost accuracy on the bundled datasets
            // against XGBoost's unregularised partition splits
            cat_l2: 1.0,
            // the fitted line's intercept cannot tell noise from signal where every level
            // holds about the same hessian: measured, bench/categorical_suite.py's College
            // Scorecard (6,247 institutions, about five rows each) went from 72% behind
            // XGBoost to 6% ahead, flights' tail numbers staying within fold noise of
            // dropping them (docs/guide/accuracy.md)
            cat_noise: CatNoise::Measured,
            min_data_per_group: 0,
            min_data_in_bin: 3,
            // a value many rows share is often where the label turns: the bins of a
            // salary converted from five currencies took the Stack Overflow survey's
            // country log loss from 0.6736 to 0.6442 (LightGBM 0.6292)
            heavy_value_bins: true,
            // every level seen gets a bin, as XGBoost's: the per-node prior shrinks a
            // level of one or two rows almost to the node's mean where levels are noise
            // (loans' 4,411 job titles stay within 0.1% of dropping the column), and lets it
            // count where they are not (3 rows a level hid ID-like columns, 1 took
            // bench/categorical_suite.py's `tate` 12% and `innovation` 22% closer)
            min_category_count: 1,
            bin_sample_rows: 200_000,
            eval_metric: Vec::new(),
            early_stopping_rounds: None,
            quantile_alpha: vec![0.5],
            huber_slope: 1.0,
            tweedie_variance_power: 1.5,
            lambdarank_num_pair_per_sample: None,
            lambdarank_pair_method: PairMethodKind::TopK,
            ndcg_exp_gain: true,
            label_gain: Vec::new(),
            lambdarank_normalization: true,
            // LightGBM's: at 100 rounds of 0.1 its larger steps fit four of the defaults
            // suite's five multiclass tables better (the Stack Overflow survey's country
            // 0.6442 -> 0.6246, beside LightGBM's 0.6292) and a 50-class task far better
            // (1.7963 -> 1.5846); two lose at most 0.4%
            multiclass_hessian: MulticlassHessian::LightGBM,
            lambdarank_hessian: RankHessian::XGBoost,
            monotone_constraints: MonotoneConstraints::default(),
            monotone_constraints_method: MonotoneMethod::Basic,
            interaction_constraints: Vec::new(),
            colsample_bylevel: 1.0,
            colsample_bynode: 1.0,
            feature_weights: Vec::new(),
            extra_trees: false,
        }
    }
}

/// Whether `v` may bound `count:poisson` leaves: finite and above 0 (checked where params
/// are set and where a model is continued with its own).
pub(crate) fn poisson_leaf_bound_valid(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

fn finite_at_least(name: &'static str, v: f64, min: f64) -> Result<()> {
    if v.is_finite() && v >= min {
        Ok(())
    } else {
        Err(Error::param(
            name,
            format!("{v} must be a finite number >= {min}"),
        ))
    }
}

fn fraction(name: &'static str, v: f64) -> Result<()> {
    if v > 0.0 && v <= 1.0 {
        Ok(())
    } else {
        Err(Error::param(name, format!("{v} must be in (0, 1]")))
    }
}

impl Check for Params {
    fn check(&self) -> Result<()> {
        self.validate()
    }
}

impl Checked<Params> {
    /// The parameters with the class count the training labels give, checking only that
    /// count (the rest was checked).
    pub fn with_num_class(&self, k: usize) -> Result<Self> {
        if self.objective.is_multiclass() && k < 2 {
            return Err(Error::param(
                "num_class",
                format!(
                    "the labels have {k} class: {} needs at least 2",
                    self.objective
                ),
            ));
        }
        if !self.objective.takes_num_class() {
            return Err(Error::param(
                "num_class",
                format!("{} has one output", self.objective),
            ));
        }
        Ok(Checked::derived(Params {
            num_class: Some(k),
            ..Params::clone(self)
        }))
    }
}

impl Params {
    /// Checks every parameter's range and their combinations (through [`Checked::new`]
    /// where parameters enter, and on loading a model file).
    pub(crate) fn validate(&self) -> Result<()> {
        if self.num_rounds == 0 {
            return Err(Error::param("num_rounds", "must be at least 1"));
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return Err(Error::param(
                "learning_rate",
                format!("{} must be a finite number > 0", self.learning_rate),
            ));
        }
        if self.max_depth > 63 {
            return Err(Error::param(
                "max_depth",
                format!("{} exceeds 63", self.max_depth),
            ));
        }
        if self.max_depth == 0 && self.max_leaves == 0 {
            return Err(Error::param(
                "max_depth",
                "0 (unlimited) needs max_leaves > 0 to bound the tree",
            ));
        }
        if self.max_leaves == 1 {
            return Err(Error::param(
                "max_leaves",
                "must be 0 (unlimited) or at least 2",
            ));
        }
        if self.grow_policy == GrowPolicy::Lossguide && self.max_leaves == 0 && self.max_depth == 0
        {
            return Err(Error::param(
                "max_leaves",
                "lossguide needs max_leaves or max_depth",
            ));
        }
        if !(2..=65_536).contains(&self.max_bin) {
            return Err(Error::param(
                "max_bin",
                format!("{} must be in 2..=65536", self.max_bin),
            ));
        }
        if self.max_cat_bin != 0 && !(3..=65_535).contains(&self.max_cat_bin) {
            return Err(Error::param(
                "max_cat_bin",
                format!(
                    "{} must be 0 (as max_bin) or in 3..=65535",
                    self.max_cat_bin
                ),
            ));
        }
        if self.min_data_in_bin == 0 {
            return Err(Error::param("min_data_in_bin", "must be at least 1"));
        }
        finite_at_least("min_child_weight", self.min_child_weight, 0.0)?;
        finite_at_least("lambda", self.lambda, 0.0)?;
        finite_at_least("alpha", self.alpha, 0.0)?;
        finite_at_least("gamma", self.gamma, 0.0)?;
        finite_at_least("max_delta_step", self.max_delta_step, 0.0)?;
        if !poisson_leaf_bound_valid(self.poisson_leaf_bound) {
            return Err(Error::param(
                "poisson_leaf_bound",
                format!("{} must be a finite number > 0", self.poisson_leaf_bound),
            ));
        }
        finite_at_least("cat_smooth", self.cat_smooth, 0.0)?;
        finite_at_least("cat_l2", self.cat_l2, 0.0)?;
        fraction("subsample", self.subsample)?;
        fraction("colsample_bytree", self.colsample_bytree)?;
        fraction("colsample_bylevel", self.colsample_bylevel)?;
        fraction("colsample_bynode", self.colsample_bynode)?;
        self.monotone_constraints.validate()?;
        for &w in &self.feature_weights {
            finite_at_least("feature_weights", w, 0.0)?;
        }
        if !self.feature_weights.is_empty() && self.feature_weights.iter().all(|&w| w == 0.0) {
            return Err(Error::param(
                "feature_weights",
                "every weight is 0: no feature could be sampled",
            ));
        }
        if let Quantisation::Bits(b) = self.quantisation {
            Quantisation::from_grad_bits(b as u32)?;
        }
        if let Some(k) = self.num_class {
            if self.objective.is_multiclass() && k < 2 {
                return Err(Error::param("num_class", format!("{k} must be at least 2")));
            }
            if !self.objective.takes_num_class() {
                return Err(Error::param(
                    "num_class",
                    format!(
                        "{k} given but {} has one output; num_class is for multi:softprob, \
                         multi:softmax and custom",
                        self.objective
                    ),
                ));
            }
        }
        self.objective_params().validate(self.objective)?;
        if let Some(b) = self.base_score {
            if !Objective::accepts_base_score(self.objective, b) {
                return Err(Error::param(
                    "base_score",
                    format!("{b} is out of range for {}", self.objective),
                ));
            }
        }
        if self.max_cat_threshold == 0 {
            return Err(Error::param("max_cat_threshold", "must be at least 1"));
        }
        if self.bin_sample_rows == 0 {
            return Err(Error::param("bin_sample_rows", "must be at least 1"));
        }
        if self.early_stopping_rounds == Some(0) {
            return Err(Error::param("early_stopping_rounds", "must be at least 1"));
        }
        for m in &self.eval_metric {
            m.check_objective(self.objective)?;
        }
        Ok(())
    }

    /// Sets one parameter from text, by its name or an XGBoost/LightGBM alias
    /// (`eta`, `reg_lambda`, `num_leaves`, `n_estimators`, ...). An unknown name is an
    /// error suggesting the closest known one; a run option's name is an error saying so.
    /// `alpha` is always the L1 penalty here: [`Settings::set`] reads
    /// it as LightGBM does beside the objectives `quantile` and `huber`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match canonical(key)? {
            Setting::Param(name) => self.set_canonical(name, value.trim()),
            Setting::Run(name) => Err(Error::param(
                name,
                "is a run option (it never changes the model): set it on RunOptions",
            )),
        }
    }

    pub(super) fn set_canonical(&mut self, name: &'static str, v: &str) -> Result<()> {
        match name {
            "objective" => self.objective = v.parse()?,
            "num_class" => self.num_class = opt(name, v)?,
            "num_rounds" => self.num_rounds = num(name, v)?,
            "learning_rate" => self.learning_rate = num(name, v)?,
            "max_depth" => self.max_depth = num(name, v)?,
            "max_leaves" => self.max_leaves = num(name, v)?,
            "grow_policy" => self.grow_policy = v.parse()?,
            "max_bin" => self.max_bin = num(name, v)?,
            "max_cat_bin" => self.max_cat_bin = num(name, v)?,
            "min_child_weight" => self.min_child_weight = num(name, v)?,
            "lambda" => self.lambda = num(name, v)?,
            "alpha" => self.alpha = num(name, v)?,
            "gamma" => self.gamma = num(name, v)?,
            "max_delta_step" => self.max_delta_step = num(name, v)?,
            "poisson_leaf_bound" => self.poisson_leaf_bound = num(name, v)?,
            "min_data_in_leaf" => self.min_data_in_leaf = num(name, v)?,
            "subsample" => self.subsample = num(name, v)?,
            "colsample_bytree" => self.colsample_bytree = num(name, v)?,
            "seed" => self.seed = num(name, v)?,
            "grad_bits" => self.quantisation = Quantisation::from_grad_bits(num(name, v)?)?,
            "base_score" => self.base_score = opt(name, v)?,
            "max_cat_to_onehot" => self.max_cat_to_onehot = num(name, v)?,
            "max_cat_threshold" => self.max_cat_threshold = num(name, v)?,
            "cat_smooth" => self.cat_smooth = num(name, v)?,
            "cat_l2" => self.cat_l2 = num(name, v)?,
            "min_data_per_group" => self.min_data_per_group = num(name, v)?,
            "min_data_in_bin" => self.min_data_in_bin = num(name, v)?,
            "heavy_value_bins" => self.heavy_value_bins = flag(name, v)?,
            "min_category_count" => self.min_category_count = num(name, v)?,
            "bin_sample_rows" => self.bin_sample_rows = num(name, v)?,
            "eval_metric" => {
                self.eval_metric = v
                    .split(',')
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(str::parse)
                    .collect::<Result<_>>()?
            }
            "early_stopping_rounds" => self.early_stopping_rounds = opt(name, v)?,
            "quantile_alpha" => {
                // "0.1,0.5,0.9", or a list as JSON and Python print it
                let list = v.trim_start_matches('[').trim_end_matches(']');
                self.quantile_alpha = list
                    .split(',')
                    .map(|a| num(name, a.trim()))
                    .collect::<Result<_>>()?
            }
            "huber_slope" => self.huber_slope = num(name, v)?,
            "tweedie_variance_power" => self.tweedie_variance_power = num(name, v)?,
            "lambdarank_num_pair_per_sample" => {
                self.lambdarank_num_pair_per_sample = opt(name, v)?;
                if self.lambdarank_num_pair_per_sample == Some(0) {
                    return Err(Error::param(name, "must be at least 1"));
                }
            }
            "ndcg_exp_gain" => self.ndcg_exp_gain = flag(name, v)?,
            "label_gain" => {
                // "0,1,3,7", or a list as JSON and Python print it
                let list = v.trim().trim_start_matches('[').trim_end_matches(']');
                self.label_gain = if list.trim().is_empty() {
                    Vec::new()
                } else {
                    list.split(',')
                        .map(|g| num(name, g.trim()))
                        .collect::<Result<_>>()?
                }
            }
            "lambdarank_normalization" => self.lambdarank_normalization = flag(name, v)?,
            "monotone_constraints" => self.monotone_constraints = v.parse()?,
            "monotone_constraints_method" => self.monotone_constraints_method = v.parse()?,
            "interaction_constraints" => {
                self.interaction_constraints = constraints::parse_interactions(v)?
            }
            "colsample_bylevel" => self.colsample_bylevel = num(name, v)?,
            "colsample_bynode" => self.colsample_bynode = num(name, v)?,
            "feature_weights" => self.feature_weights = constraints::parse_weights(v)?,
            "extra_trees" => self.extra_trees = flag(name, v)?,
            "lambdarank_pair_method" => {
                self.lambdarank_pair_method = match v {
                    "topk" => PairMethodKind::TopK,
                    "mean" => PairMethodKind::Mean,
                    other => {
                        return Err(Error::param(name, format!("`{other}` is not topk or mean")))
                    }
                }
            }
            "lambdarank_hessian" => {
                self.lambdarank_hessian = match v {
                    "xgboost" => RankHessian::XGBoost,
                    "lightgbm" => RankHessian::LightGBM,
                    other => {
                        return Err(Error::param(
                            name,
                            format!("`{other}` is not xgboost or lightgbm"),
                        ))
                    }
                }
            }
            "cat_noise" => {
                self.cat_noise = match v {
                    "measured" => CatNoise::Measured,
                    "fitted" => CatNoise::Fitted,
                    other => {
                        return Err(Error::param(
                            name,
                            format!("`{other}` is not measured or fitted"),
                        ))
                    }
                }
            }
            "multiclass_hessian" => {
                self.multiclass_hessian = match v {
                    "xgboost" => MulticlassHessian::XGBoost,
                    "lightgbm" => MulticlassHessian::LightGBM,
                    other => {
                        return Err(Error::param(
                            name,
                            format!("`{other}` is not xgboost or lightgbm"),
                        ))
                    }
                }
            }
            _ => unreachable!("PARAM_NAMES lists only names handled here"),
        }
        Ok(())
    }
}

impl Params {
    /// The bound on a leaf's weight before shrinkage that trees grow with: `max_delta_step`,
    /// or for `count:poisson` without one `poisson_leaf_bound`: a leaf of a few rows with
    /// counts far above the prediction would otherwise take a step of tens of units of
    /// log-mean, and rows beyond the training range that share only that leaf were
    /// predicted 10^4 times their mean (a public table of firms' patent counts,
    /// bench/categorical_suite.py's `innovation`).
    pub fn leaf_delta_bound(&self) -> f64 {
        match self.objective {
            ObjectiveKind::Poisson if self.max_delta_step == 0.0 => self.poisson_leaf_bound,
            _ => self.max_delta_step,
        }
    }

    /// `count:poisson`'s hessian offset: [`ObjectiveParams::poisson_hessian_offset`].
    pub fn poisson_hessian_offset(&self) -> f64 {
        self.objective_params().poisson_hessian_offset()
    }

    /// The constants of the loss.
    pub fn objective_params(&self) -> ObjectiveParams {
        ObjectiveParams {
            quantile_alpha: self.quantile_alpha.clone(),
            huber_slope: self.huber_slope,
            tweedie_variance_power: self.tweedie_variance_power,
            max_delta_step: self.max_delta_step,
            lambdarank_num_pair_per_sample: self.lambdarank_num_pair_per_sample,
            lambdarank_pair_method: self.lambdarank_pair_method,
            ndcg_exp_gain: self.ndcg_exp_gain,
            label_gain: self.label_gain.clone(),
            lambdarank_normalization: self.lambdarank_normalization,
            multiclass_hessian: self.multiclass_hessian,
            lambdarank_hessian: self.lambdarank_hessian,
        }
    }

    /// The loss with `num_class` classes (ignored unless multiclass) and its constants.
    pub fn objective_with(&self, num_class: usize) -> Result<Objective> {
        Objective::with_params(self.objective, num_class, &self.objective_params())
    }

    /// The metrics reported for every evaluation set.
    pub fn metrics(&self) -> Vec<Metric> {
        if self.eval_metric.is_empty() {
            vec![Metric::default_for(self.objective)]
        } else {
            self.eval_metric.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_trees_take_their_leaf_bound_only_when_none_is_set() {
        let poisson = Params {
            objective: ObjectiveKind::Poisson,
            ..Default::default()
        };
        assert_eq!(poisson.leaf_delta_bound(), 2.0);
        assert_eq!(poisson.poisson_hessian_offset(), 0.7);
        let xgboost = Params {
            poisson_leaf_bound: 0.7,
            ..poisson.clone()
        };
        assert_eq!(xgboost.leaf_delta_bound(), 0.7);
        let set = Params {
            max_delta_step: 3.0,
            ..poisson.clone()
        };
        assert_eq!(set.leaf_delta_bound(), 3.0);
        assert_eq!(set.poisson_hessian_offset(), 3.0);
        assert_eq!(Params::default().leaf_delta_bound(), 0.0);
    }

    /// `poisson_leaf_bound` is set by name and refused unless above 0 (naming the
    /// parameter), saved unless it is XGBoost's 0.7, and a model saved without it (before
    /// it was a parameter) reads back XGBoost's 0.7.
    #[test]
    fn the_poisson_leaf_bound_is_set_saved_and_read_back() {
        let mut p = Params::default();
        let saved = serde_json::to_string(&p).unwrap();
        assert!(saved.contains(r#""poisson_leaf_bound":2.0"#), "{saved}");
        assert_eq!(serde_json::from_str::<Params>(&saved).unwrap(), p);
        p.set("poisson_leaf_bound", "0.7").unwrap();
        let before = serde_json::to_string(&p).unwrap();
        assert!(!before.contains("poisson_leaf_bound"), "{before}");
        let old: Params = serde_json::from_str(&before).unwrap();
        assert_eq!(old.poisson_leaf_bound, 0.7);
        for bad in ["0", "-1", "inf"] {
            p.set("poisson_leaf_bound", bad).unwrap();
            let err = p.validate().unwrap_err().to_string();
            assert!(err.contains("poisson_leaf_bound"), "{bad}: {err}");
        }
    }

    /// `min_data_in_bin` is saved (3 by default) and read back; a model saved without the
    /// key, before it was written, reads back 1, the default then.
    #[test]
    fn min_data_in_bin_is_saved_and_read_back_as_it_was() {
        let p = Params::default();
        assert_eq!(p.min_data_in_bin, 3);
        let saved = serde_json::to_string(&p).unwrap();
        assert!(saved.contains(r#""min_data_in_bin":3"#), "{saved}");
        assert_eq!(serde_json::from_str::<Params>(&saved).unwrap(), p);
        let before = saved.replace(r#""min_data_in_bin":3,"#, "");
        assert!(!before.contains("min_data_in_bin"), "{before}");
        let old: Params = serde_json::from_str(&before).unwrap();
        assert_eq!(old.min_data_in_bin, 1);
    }

    /// `multiclass_hessian` is read from its two names, refused otherwise (naming the
    /// parameter), saved only when it is LightGBM's (models saved before it, with XGBoost's,
    /// keep their bytes and read back as XGBoost's) and read back.
    #[test]
    fn the_multiclass_hessian_is_set_saved_and_read_back() {
        let mut p = Params::default();
        assert_eq!(p.multiclass_hessian, MulticlassHessian::LightGBM);
        let saved = serde_json::to_string(&p).unwrap();
        assert!(
            saved.contains(r#""multiclass_hessian":"lightgbm""#),
            "{saved}"
        );
        let back: Params = serde_json::from_str(&saved).unwrap();
        assert_eq!(back, p);
        p.set("multiclass_hessian", "xgboost").unwrap();
        let before = serde_json::to_string(&p).unwrap();
        assert!(!before.contains("multiclass_hessian"));
        let old: Params = serde_json::from_str(&before).unwrap();
        assert_eq!(old.multiclass_hessian, MulticlassHessian::XGBoost);
        p.set("multiclass_hessian", "lightgbm").unwrap();
        assert_eq!(p.multiclass_hessian, MulticlassHessian::LightGBM);
        let err = p
            .set("multiclass_hessian", "catboost")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("multiclass_hessian") && err.contains("catboost"),
            "{err}"
        );
        p.set("multiclass_hessian", "xgboost").unwrap();
        assert_eq!(p.multiclass_hessian, MulticlassHessian::XGBoost);
    }

    /// `lambdarank_hessian` is XGBoost's unless set, saved only when it is LightGBM's (so
    /// ranking models keep their bytes), read back, and refused by name otherwise;
    /// `label_gain` is saved only when given.
    #[test]
    fn the_ranking_hessian_and_gains_are_set_saved_and_read_back() {
        let mut p = Params::default();
        assert_eq!(p.lambdarank_hessian, RankHessian::XGBoost);
        let plain = serde_json::to_string(&p).unwrap();
        assert!(!plain.contains("lambdarank_hessian") && !plain.contains("label_gain"));
        p.set("lambdarank_hessian", "lightgbm").unwrap();
        p.set("label_gain", "0,1,3").unwrap();
        let saved = serde_json::to_string(&p).unwrap();
        assert!(
            saved.contains(r#""lambdarank_hessian":"lightgbm""#)
                && saved.contains(r#""label_gain":[0.0,1.0,3.0]"#),
            "{saved}"
        );
        let back: Params = serde_json::from_str(&saved).unwrap();
        assert_eq!(back, p);
        let old: Params = serde_json::from_str(&plain).unwrap();
        assert_eq!(old.lambdarank_hessian, RankHessian::XGBoost);
        let err = p
            .set("lambdarank_hessian", "catboost")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("lambdarank_hessian") && err.contains("catboost"),
            "{err}"
        );
    }

    #[test]
    fn defaults_are_valid() {
        Params::default().validate().unwrap();
    }

    #[test]
    fn out_of_range_parameters_are_named() {
        let cases: Vec<(Params, &str)> = vec![
            (
                Params {
                    learning_rate: -1.0,
                    ..Default::default()
                },
                "learning_rate",
            ),
            (
                Params {
                    max_bin: 1,
                    ..Default::default()
                },
                "max_bin",
            ),
            (
                Params {
                    max_cat_bin: 2,
                    ..Default::default()
                },
                "max_cat_bin",
            ),
            (
                Params {
                    subsample: 0.0,
                    ..Default::default()
                },
                "subsample",
            ),
            (
                Params {
                    colsample_bytree: 1.5,
                    ..Default::default()
                },
                "colsample_bytree",
            ),
            (
                Params {
                    lambda: f64::NAN,
                    ..Default::default()
                },
                "lambda",
            ),
            (
                Params {
                    num_rounds: 0,
                    ..Default::default()
                },
                "num_rounds",
            ),
            (
                Params {
                    quantisation: Quantisation::Bits(1),
                    ..Default::default()
                },
                "grad_bits",
            ),
            (
                Params {
                    max_depth: 0,
                    max_leaves: 0,
                    ..Default::default()
                },
                "max_depth",
            ),
            (
                Params {
                    min_data_in_bin: 0,
                    ..Default::default()
                },
                "min_data_in_bin",
            ),
        ];
        for (p, name) in cases {
            let err = p.validate().unwrap_err().to_string();
            assert!(err.contains(name), "{err} should name {name}");
        }
    }

    #[test]
    fn parameters_are_set_by_name_and_alias() {
        let mut p = Params::default();
        for (k, v) in [
            ("eta", "0.05"),
            ("num_leaves", "31"),
            ("n_estimators", "7"),
            ("grad_bits", "8"),
            ("eval_metric", "auc,logloss"),
            ("objective", "binary:logistic"),
            ("reg-lambda", "2"),
            ("early_stopping_rounds", "none"),
        ] {
            p.set(k, v).unwrap();
        }
        assert_eq!(p.learning_rate, 0.05);
        assert_eq!(p.max_leaves, 31);
        assert_eq!(p.num_rounds, 7);
        assert_eq!(p.quantisation, Quantisation::Bits(8));
        assert_eq!(p.eval_metric, vec![Metric::Auc, Metric::LogLoss]);
        assert_eq!(p.lambda, 2.0);
        let e = p.set("nthread", "3").unwrap_err().to_string();
        assert!(e.contains("threads") && e.contains("run option"), "{e}");
        let e = p.set("max_dept", "3").unwrap_err().to_string();
        assert!(e.contains("max_dept") && e.contains("max_depth"), "{e}");
        let e = p.set("max_depth", "deep").unwrap_err().to_string();
        assert!(e.contains("max_depth") && e.contains("deep"), "{e}");
    }

    #[test]
    fn objective_names_parse_and_unknown_is_an_error() {
        assert_eq!(
            "binary:logistic".parse::<ObjectiveKind>().unwrap(),
            ObjectiveKind::Logistic
        );
        for kind in ObjectiveKind::ALL {
            assert_eq!(kind.name().parse::<ObjectiveKind>().unwrap(), kind);
        }
        // LightGBM's names are aliases
        assert_eq!(
            "regression_l1".parse::<ObjectiveKind>().unwrap(),
            ObjectiveKind::AbsoluteError
        );
        assert_eq!(
            "poisson".parse::<ObjectiveKind>().unwrap(),
            ObjectiveKind::Poisson
        );
        let e = "reg:tweedy"
            .parse::<ObjectiveKind>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("reg:tweedy") && e.contains("reg:tweedie"), "{e}");
    }
}
