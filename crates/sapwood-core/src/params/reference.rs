//! What every parameter and run option is, for the parameter reference that `sapwood params`
//! prints and the user guide renders: one entry per canonical name of [`PARAM_NAMES`] and
//! [`RUN_OPTION_NAMES`], in their order, checked against them and against the defaults by
//! the tests below, so that the reference cannot drift from the code.

use super::names::{PARAM_NAMES, RUN_OPTION_NAMES};

/// One parameter or run option as the reference documents it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamDoc {
    /// The canonical name.
    pub name: &'static str,
    /// The default as it would be written (`--set name=default`); empty where the default
    /// is "unset" and `about` says what unset means.
    pub default: &'static str,
    /// The kind of value: integer, number, boolean, text, or a list.
    pub kind: &'static str,
    /// The values accepted.
    pub range: &'static str,
    /// The objectives, backends or jobs it applies to.
    pub applies: &'static str,
    /// What it does.
    pub about: &'static str,
    /// True for a run option (how a job runs, never saved, never changes the model).
    pub run_option: bool,
}

const ALL: &str = "all";

const fn param(
    name: &'static str,
    default: &'static str,
    kind: &'static str,
    range: &'static str,
    applies: &'static str,
    about: &'static str,
) -> ParamDoc {
    ParamDoc {
        name,
        default,
        kind,
        range,
        applies,
        about,
        run_option: false,
    }
}

const fn run(
    name: &'static str,
    default: &'static str,
    kind: &'static str,
    range: &'static str,
    applies: &'static str,
    about: &'static str,
) -> ParamDoc {
    ParamDoc {
        run_option: true,
        ..param(name, default, kind, range, applies, about)
    }
}

/// Every model parameter, then every run option, in the order of [`PARAM_NAMES`] and
/// [`RUN_OPTION_NAMES`].
pub const PARAM_DOCS: &[ParamDoc] = &[
    param(
        "objective",
        "reg:squarederror",
        "text",
        "reg:squarederror, reg:absoluteerror, reg:quantileerror, reg:pseudohubererror, huber, \
         count:poisson, reg:tweedie, reg:gamma, binary:logistic, binary:logitraw, \
         multi:softprob, multi:softmax, rank:ndcg, rank:map, rank:pairwise, survival:cox, \
         custom (and LightGBM's names: regression, regression_l1, quantile, poisson, tweedie, \
         gamma, binary, multiclass, lambdarank)",
        ALL,
        "The loss the trees minimise; it also sets the default metric and how margins turn \
         into predictions (identity, sigmoid, softmax, exp).",
    ),
    param(
        "num_class",
        "",
        "integer",
        ">= 2",
        "multi:softprob, multi:softmax, custom",
        "Number of classes; unset, it is taken from the labels (the largest label plus one).",
    ),
    param(
        "num_rounds",
        "100",
        "integer",
        ">= 1",
        ALL,
        "Boosting rounds: one tree per round per output (class or quantile).",
    ),
    param(
        "learning_rate",
        "0.1",
        "number",
        "> 0",
        ALL,
        "Shrinkage applied to every leaf value; smaller values need more rounds and usually \
         generalise better. 0.1 as LightGBM (XGBoost's default is 0.3).",
    ),
    param(
        "max_depth",
        "6",
        "integer",
        "0..=63; 0 means no limit (then max_leaves must be set)",
        ALL,
        "Maximum depth of a tree.",
    ),
    param(
        "max_leaves",
        "0",
        "integer",
        "0 (no limit) or >= 2",
        ALL,
        "Maximum leaves of a tree: a cap under depthwise growth, the size of the tree under \
         lossguide growth.",
    ),
    param(
        "grow_policy",
        "depthwise",
        "text",
        "depthwise, lossguide (alias leafwise)",
        ALL,
        "depthwise grows level by level up to max_depth (XGBoost's default); lossguide splits \
         the leaf with the largest gain first up to max_leaves (LightGBM's habit).",
    ),
    param(
        "max_bin",
        "256",
        "integer",
        "2..=65536",
        "numeric features",
        "Bins per numeric feature, the missing-value bin included; above 256 the binned \
         matrix takes 16 bits a value.",
    ),
    param(
        "max_cat_bin",
        "65535",
        "integer",
        "0 or 3..=65535",
        "categorical features",
        "Bins per categorical feature, the missing bin and the bin that rare levels share \
         included: the most frequent levels get a bin of their own. 0 (models saved before \
         this parameter existed) means max_bin.",
    ),
    param(
        "min_child_weight",
        "1",
        "number",
        ">= 0",
        ALL,
        "Minimum sum of hessians in a child: a split leaving less on either side is not made.",
    ),
    param(
        "lambda",
        "1",
        "number",
        ">= 0",
        ALL,
        "L2 regularisation of leaf values.",
    ),
    param(
        "alpha",
        "0",
        "number",
        ">= 0",
        ALL,
        "L1 regularisation of leaf values. Beside LightGBM's objectives `quantile` and `huber`, \
         `alpha` is their quantile or Huber slope, as in LightGBM.",
    ),
    param(
        "gamma",
        "0",
        "number",
        ">= 0",
        ALL,
        "Minimum loss reduction a split must bring.",
    ),
    param(
        "max_delta_step",
        "0",
        "number",
        ">= 0; 0 means no bound (count:poisson: poisson_leaf_bound)",
        ALL,
        "Bound on a leaf's value before shrinkage. For count:poisson also the hessian's offset \
         (the hessian is taken at margin + it, 0.7 when it is 0), as in XGBoost; when it is 0, \
         count:poisson leaves are bounded by poisson_leaf_bound.",
    ),
    param(
        "poisson_leaf_bound",
        "2",
        "number",
        "> 0",
        "count:poisson",
        "Bound on a count:poisson leaf's value before shrinkage when max_delta_step is 0 \
         (XGBoost bounds by 0.7, LightGBM not at all: a very large value); models saved \
         before it read as 0.7, and training a model on keeps the model's.",
    ),
    param(
        "min_data_in_leaf",
        "0",
        "integer",
        ">= 0",
        ALL,
        "Minimum rows in a child, estimated from hessians as LightGBM does; 0 means none.",
    ),
    param(
        "subsample",
        "1",
        "number",
        "(0, 1]",
        ALL,
        "Fraction of rows sampled each round (by hash of row and round: the same rows on any \
         number of workers).",
    ),
    param(
        "colsample_bytree",
        "1",
        "number",
        "(0, 1]",
        ALL,
        "Fraction of features sampled for each tree.",
    ),
    param(
        "colsample_bylevel",
        "1",
        "number",
        "(0, 1]",
        ALL,
        "Fraction of the tree's features sampled for each depth level.",
    ),
    param(
        "colsample_bynode",
        "1",
        "number",
        "(0, 1]",
        ALL,
        "Fraction of the level's features sampled for each node.",
    ),
    param(
        "feature_weights",
        "",
        "list of numbers",
        ">= 0 each, one per feature, not all 0",
        "with colsample_* < 1",
        "Relative chance of each feature to be drawn by the column sampling; unset, every \
         feature is equally likely.",
    ),
    param(
        "extra_trees",
        "false",
        "boolean",
        "true, false",
        ALL,
        "One random threshold per feature and node instead of the best one (LightGBM's \
         extra_trees).",
    ),
    param(
        "monotone_constraints",
        "",
        "list or map",
        "-1, 0, +1 per feature: `(1,0,-1)` or `{\"age\": 1}`",
        "single-output objectives",
        "Direction the prediction must follow along each feature: +1 never decreasing, -1 \
         never increasing, 0 free.",
    ),
    param(
        "monotone_constraints_method",
        "basic",
        "text",
        "basic, intermediate",
        "with monotone_constraints",
        "How monotone constraints bound leaf values: basic (XGBoost's) or intermediate \
         (LightGBM's, tighter bounds that lose less accuracy).",
    ),
    param(
        "interaction_constraints",
        "",
        "list of lists",
        "features by index or name: `[[0, 1], [\"age\", \"income\"]]`",
        ALL,
        "Sets of features allowed to appear together on a root-to-leaf path; features in no \
         set may only be used alone.",
    ),
    param(
        "seed",
        "0",
        "integer",
        "0..=2^64-1",
        ALL,
        "Seed of every random choice (row and column sampling, extra trees, stochastic \
         rounding of low-bit gradients).",
    ),
    param(
        "grad_bits",
        "0",
        "integer",
        "0 or 64 (exact), 2..=16",
        ALL,
        "Gradient quantisation: 0 is 64-bit fixed point, as accurate as f64 sums; 2..=16 \
         bits use stochastic rounding and smaller histograms, with leaves refit from exact \
         sums.",
    ),
    param(
        "base_score",
        "",
        "number",
        "in the output space: (0, 1) for probabilities, > 0 for log links",
        ALL,
        "Initial prediction of every row; unset, it is estimated from the labels.",
    ),
    param(
        "max_cat_to_onehot",
        "4",
        "integer",
        ">= 0",
        "categorical features",
        "Categorical features with at most this many levels use one-vs-rest splits.",
    ),
    param(
        "max_cat_threshold",
        "64",
        "integer",
        ">= 1",
        "categorical features",
        "Maximum levels sent to the smaller side by one many-level categorical split.",
    ),
    param(
        "cat_smooth",
        "100",
        "number",
        ">= 0",
        "categorical features",
        "Largest prior weight, in hessian units, shrinking each level's mean gradient toward \
         the node's when levels are ordered and splits scored; each node estimates its own \
         prior from how much its levels differ, between 1 and this. 0 for none. Nodes with \
         at most 32 levels (or max_cat_threshold, if fewer) keep the unshrunk search.",
    ),
    param(
        "cat_l2",
        "1",
        "number",
        ">= 0",
        "categorical features",
        "Extra L2 regularisation of many-level categorical splits.",
    ),
    param(
        "cat_noise",
        "measured",
        "text",
        "measured, fitted",
        "categorical features",
        "How a node with more than 32 levels (or max_cat_threshold, if fewer) estimates the \
         noise in its levels' means, which sets how far they shrink toward the node's: \
         measured from its rows' squared gradients, or fitted from the levels alone, which \
         cannot tell noise from signal where every level holds about the same rows (ID-like \
         columns). Where measured levels differ far beyond the noise, a node scans up to \
         cat_smooth / prior times max_cat_threshold levels from either end (at most 256). \
         Models saved before it read as fitted.",
    ),
    param(
        "min_data_per_group",
        "0",
        "integer",
        ">= 0",
        "categorical features",
        "Minimum estimated rows on each side of a categorical split.",
    ),
    param(
        "min_data_in_bin",
        "3",
        "integer",
        ">= 1",
        "numeric features",
        "Sampled rows a numeric bin must hold before the next starts (LightGBM's \
         min_data_in_bin and its default); 1 gives each distinct value its own bin while \
         they fit, as XGBoost does.",
    ),
    param(
        "heavy_value_bins",
        "true",
        "boolean",
        "true or false",
        "numeric features",
        "With more distinct values than bins, a value that alone weighs a mean bin is \
         bounded by thresholds on both sides (LightGBM's rule); false: bins of balanced \
         weight only, as models saved before it.",
    ),
    param(
        "min_category_count",
        "1",
        "integer",
        ">= 0",
        "categorical features",
        "Levels seen fewer times than this in the binning sample share one bin of rare levels.",
    ),
    param(
        "bin_sample_rows",
        "200000",
        "integer",
        ">= 1",
        ALL,
        "Rows sampled (by hash of the row's global index: the same sample on any sharding) \
         to compute the bins.",
    ),
    param(
        "eval_metric",
        "",
        "list of text",
        "rmse, rmsle, mae, mape, mphe, quantile, logloss, error, auc, aucpr, mlogloss, \
         merror, ndcg, ndcg@K, map, map@K, pre@K, poisson-nloglik, gamma-nloglik, \
         gamma-deviance, tweedie-nloglik, tweedie-nloglik@RHO, cox-nloglik (and LightGBM's \
         names)",
        ALL,
        "Metrics reported on every evaluation set, comma-separated; unset, the objective's \
         own. The last one drives early stopping.",
    ),
    param(
        "early_stopping_rounds",
        "",
        "integer",
        ">= 1",
        "with a validation set",
        "Stop when the last metric of the last validation set has not improved for this many \
         rounds; the model keeps its best round for prediction. Unset: never stop early.",
    ),
    param(
        "quantile_alpha",
        "0.5",
        "number or list",
        "each in (0, 1): `0.9` or `0.1,0.5,0.9`",
        "reg:quantileerror",
        "The quantiles fitted: one output, and one tree a round, each.",
    ),
    param(
        "huber_slope",
        "1",
        "number",
        "> 0",
        "reg:pseudohubererror, huber",
        "Where the Huber losses turn from quadratic to linear.",
    ),
    param(
        "tweedie_variance_power",
        "1.5",
        "number",
        "[1, 2)",
        "reg:tweedie",
        "Variance power of the Tweedie distribution: near 1 like Poisson, near 2 like gamma.",
    ),
    param(
        "lambdarank_num_pair_per_sample",
        "",
        "integer",
        ">= 1",
        "rank:ndcg, rank:map, rank:pairwise",
        "With topk pairs, the truncation level: only documents within the top this many of \
         a query's current ranking take part (32 when unset); with mean pairs, the partners \
         drawn per document (1 when unset).",
    ),
    param(
        "lambdarank_pair_method",
        "topk",
        "text",
        "topk, mean",
        "rank:ndcg, rank:map, rank:pairwise",
        "How pairs of documents are chosen: every pair touching the top of the ranking, or \
         random partners per document (XGBoost's methods).",
    ),
    param(
        "ndcg_exp_gain",
        "true",
        "boolean",
        "true, false",
        "rank:ndcg, ndcg metrics",
        "NDCG gains are 2^label - 1; false uses the label itself as the gain. Labels are \
         0..=31 either way.",
    ),
    param(
        "label_gain",
        "",
        "list of numbers",
        "each >= 0",
        "rank:ndcg, ndcg metrics",
        "The NDCG gain of each relevance label, LightGBM's parameter: \"0,1,3,7\" gives \
         label 2 the gain 3. Labels must then be integers below the list's length. Unset, \
         ndcg_exp_gain decides.",
    ),
    param(
        "lambdarank_normalization",
        "true",
        "boolean",
        "true, false",
        "rank:ndcg, rank:map, rank:pairwise",
        "Scale each query's gradients by log2(1 + sum|lambda|) / sum|lambda|, so that long \
         queries do not dominate.",
    ),
    param(
        "multiclass_hessian",
        "lightgbm",
        "text",
        "lightgbm, xgboost",
        "multi:softprob, multi:softmax",
        "The softmax hessian: LightGBM's K/(K - 1) p(1 - p) for K classes, whose leaves step \
         about twice as far as with XGBoost's 2p(1 - p) with many classes (1.6 times with \
         five); models saved before it read as xgboost.",
    ),
    param(
        "lambdarank_hessian",
        "xgboost",
        "text",
        "xgboost, lightgbm",
        "rank:ndcg, rank:map, rank:pairwise",
        "A pair's hessian: XGBoost's 2p(1 - p)|delta|, or LightGBM's p(1 - p)|delta|, whose \
         leaves step twice as far at the same learning rate and weigh lambda and \
         min_child_weight twice as much; a model continues with the hessian it began with.",
    ),
    run(
        "threads",
        "0",
        "integer",
        ">= 0; 0 means every core",
        "CPU backend",
        "Threads of the process, shared by its workers. Never changes the model.",
    ),
    run(
        "device",
        "cpu",
        "text",
        "cpu, wgpu, cuda (alias gpu), with an index (`cuda:1`) or one per worker \
         (`cuda:0,cuda:1`)",
        ALL,
        "Where histograms are built. Every device gives the same model bytes.",
    ),
    run(
        "workers",
        "1",
        "integer",
        ">= 1",
        "in-process collective",
        "In-process workers, each with its own shard of rows and its own backend; the model \
         is the same for any number.",
    ),
    run(
        "collective",
        "in-process",
        "text",
        "in-process, mpi, tcp",
        ALL,
        "How workers exchange histograms: threads of one process, MPI ranks, or TCP ranks \
         started on each host.",
    ),
    run(
        "comm_codec",
        "auto",
        "text",
        "none, packed, sparse, auto",
        "several workers or ranks",
        "Lossless encoding of exchanged histograms: lanes packed to the width their bounds \
         prove, groups of 32 values each at its own width, or the smaller of the two for each \
         exchange.",
    ),
    run(
        "comm_overlap",
        "true",
        "boolean",
        "true, false",
        "several workers or ranks",
        "Exchange a level's histograms in chunks, each behind the build of the next.",
    ),
    run(
        "comm_timeout",
        "60",
        "number",
        "> 0 seconds",
        "MPI and TCP ranks",
        "Longest wait for a peer before the job fails naming the rank.",
    ),
];

/// The entry of a canonical name.
pub fn param_doc(name: &str) -> Option<&'static ParamDoc> {
    PARAM_DOCS.iter().find(|d| d.name == name)
}

/// The aliases of a canonical name (XGBoost's and LightGBM's names for it).
pub fn aliases(name: &str) -> &'static [&'static str] {
    PARAM_NAMES
        .iter()
        .chain(RUN_OPTION_NAMES)
        .find(|(n, _)| *n == name)
        .map_or(&[], |(_, a)| *a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Params, RunOptions};

    #[test]
    fn every_name_is_documented_once_in_table_order() {
        let names: Vec<&str> = PARAM_NAMES
            .iter()
            .chain(RUN_OPTION_NAMES)
            .map(|(n, _)| *n)
            .collect();
        let documented: Vec<&str> = PARAM_DOCS.iter().map(|d| d.name).collect();
        let undocumented: Vec<&str> = names
            .iter()
            .filter(|n| !documented.contains(n))
            .copied()
            .collect();
        assert!(
            undocumented.is_empty(),
            "no entry in PARAM_DOCS (the parameter reference) for {undocumented:?}"
        );
        assert_eq!(
            documented, names,
            "PARAM_DOCS must list every name of PARAM_NAMES and RUN_OPTION_NAMES, in order"
        );
        for d in PARAM_DOCS {
            let run = RUN_OPTION_NAMES.iter().any(|(n, _)| *n == d.name);
            assert_eq!(d.run_option, run, "{}: run_option", d.name);
            for (what, text) in [
                ("kind", d.kind),
                ("range", d.range),
                ("applies", d.applies),
                ("about", d.about),
            ] {
                assert!(!text.trim().is_empty(), "{}: `{what}` is empty", d.name);
            }
        }
    }

    #[test]
    fn documented_defaults_are_the_defaults() {
        for d in PARAM_DOCS {
            if d.run_option {
                let mut o = RunOptions::default();
                o.set(d.name, d.default)
                    .unwrap_or_else(|e| panic!("{}: default `{}`: {e}", d.name, d.default));
                assert_eq!(o, RunOptions::default(), "{}: `{}`", d.name, d.default);
            } else {
                let mut p = Params::default();
                p.set(d.name, d.default)
                    .unwrap_or_else(|e| panic!("{}: default `{}`: {e}", d.name, d.default));
                assert_eq!(p, Params::default(), "{}: `{}`", d.name, d.default);
            }
        }
    }

    #[test]
    fn a_wrong_documented_default_would_be_caught() {
        // the check above sets each documented default on the defaults and compares: a
        // default the code does not have changes the parameters
        let mut p = Params::default();
        p.set("max_depth", "7").unwrap();
        assert_ne!(p, Params::default());
        let mut o = RunOptions::default();
        o.set("comm_timeout", "61").unwrap();
        assert_ne!(o, RunOptions::default());
    }

    #[test]
    fn aliases_come_from_the_name_tables() {
        assert!(aliases("learning_rate").contains(&"eta"));
        assert!(aliases("threads").contains(&"nthread"));
        assert!(aliases("max_depth").is_empty());
        assert_eq!(param_doc("max_bin").map(|d| d.default), Some("256"));
    }
}
