//! The names users write: canonical names, XGBoost/LightGBM aliases, "did you mean", and
//! the parsing of one value, for [`super::Settings`] to send each name where it belongs.

use std::str::FromStr;

use crate::error::{Error, Result};

/// Canonical model parameter names and the aliases users bring from XGBoost and LightGBM.
pub const PARAM_NAMES: &[(&str, &[&str])] = &[
    ("objective", &["objective_type"]),
    ("num_class", &["num_classes"]),
    (
        "num_rounds",
        &[
            "num_boost_round",
            "n_estimators",
            "num_iterations",
            "rounds",
        ],
    ),
    ("learning_rate", &["eta", "shrinkage_rate"]),
    ("max_depth", &[]),
    ("max_leaves", &["num_leaves"]),
    ("grow_policy", &[]),
    ("max_bin", &["max_bins"]),
    ("max_cat_bin", &["max_cat_bins"]),
    ("min_child_weight", &["min_sum_hessian_in_leaf"]),
    ("lambda", &["reg_lambda", "lambda_l2"]),
    ("alpha", &["reg_alpha", "lambda_l1"]),
    (
        "gamma",
        &["min_split_loss", "min_gain_to_split", "min_split_gain"],
    ),
    ("max_delta_step", &[]),
    ("poisson_leaf_bound", &[]),
    ("min_data_in_leaf", &["min_child_samples"]),
    ("subsample", &["bagging_fraction"]),
    ("colsample_bytree", &["feature_fraction"]),
    ("colsample_bylevel", &[]),
    (
        "colsample_bynode",
        &["feature_fraction_bynode", "sub_feature_bynode"],
    ),
    ("feature_weights", &[]),
    ("extra_trees", &["extra_tree"]),
    ("monotone_constraints", &["monotone_constraint", "mc"]),
    (
        "monotone_constraints_method",
        &["monotone_constraining_method", "mc_method"],
    ),
    ("interaction_constraints", &["interaction_constraint"]),
    ("seed", &["random_state"]),
    ("grad_bits", &[]),
    ("base_score", &[]),
    ("max_cat_to_onehot", &[]),
    ("max_cat_threshold", &[]),
    ("cat_smooth", &[]),
    ("cat_l2", &[]),
    ("cat_noise", &[]),
    ("min_data_per_group", &[]),
    ("min_data_in_bin", &[]),
    ("heavy_value_bins", &[]),
    ("min_category_count", &[]),
    ("bin_sample_rows", &["bin_construct_sample_cnt"]),
    ("eval_metric", &["metric"]),
    ("early_stopping_rounds", &["early_stopping"]),
    ("quantile_alpha", &[]),
    ("huber_slope", &[]),
    ("tweedie_variance_power", &[]),
    (
        "lambdarank_num_pair_per_sample",
        &["lambdarank_truncation_level"],
    ),
    ("lambdarank_pair_method", &[]),
    ("ndcg_exp_gain", &[]),
    ("label_gain", &[]),
    ("lambdarank_normalization", &["lambdarank_norm"]),
    ("multiclass_hessian", &[]),
    ("lambdarank_hessian", &[]),
];

/// Canonical run option names and their aliases.
pub const RUN_OPTION_NAMES: &[(&str, &[&str])] = &[
    ("threads", &["nthread", "n_jobs", "num_threads"]),
    ("device", &[]),
    ("workers", &[]),
    ("collective", &[]),
    ("comm_codec", &[]),
    ("comm_overlap", &[]),
    ("comm_timeout", &[]),
];

/// A known name, resolved to its canonical form and its kind.
pub(super) enum Setting {
    Param(&'static str),
    Run(&'static str),
}

fn all_names() -> impl Iterator<Item = &'static (&'static str, &'static [&'static str])> {
    PARAM_NAMES.iter().chain(RUN_OPTION_NAMES)
}

pub(super) fn canonical(key: &str) -> Result<Setting> {
    let k = key.trim().replace('-', "_");
    let find = |table: &'static [(&'static str, &'static [&'static str])]| {
        table
            .iter()
            .find(|(n, aliases)| *n == k || aliases.contains(&k.as_str()))
            .map(|(n, _)| *n)
    };
    if let Some(n) = find(PARAM_NAMES) {
        return Ok(Setting::Param(n));
    }
    if let Some(n) = find(RUN_OPTION_NAMES) {
        return Ok(Setting::Run(n));
    }
    Err(Error::UnknownParam {
        name: key.to_string(),
        suggestion: closest_name(key),
    })
}

/// The canonical name of a parameter or run option written as `key` (by an alias, with
/// hyphens, ...); an unknown name is an error suggesting the closest known one.
pub fn canonical_name(key: &str) -> Result<&'static str> {
    match canonical(key)? {
        Setting::Param(name) | Setting::Run(name) => Ok(name),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + (ca != cb) as usize)
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The known name (or alias) closest to `key`, if any is reasonably close.
fn closest_name(key: &str) -> Option<String> {
    let key = key.trim().replace('-', "_");
    all_names()
        .flat_map(|(n, a)| std::iter::once(*n).chain(a.iter().copied()))
        .map(|n| (edit_distance(&key, n), n))
        .min()
        .filter(|(d, n)| *d <= (n.len() / 2).max(2))
        .map(|(_, n)| n.to_string())
}

pub(super) fn num<T: FromStr>(name: &'static str, v: &str) -> Result<T> {
    v.parse::<T>()
        .map_err(|_| Error::param(name, format!("`{v}` is not a valid number")))
}

pub(super) fn opt<T: FromStr>(name: &'static str, v: &str) -> Result<Option<T>> {
    if v.is_empty() || v == "none" || v == "null" {
        Ok(None)
    } else {
        num(name, v).map(Some)
    }
}
