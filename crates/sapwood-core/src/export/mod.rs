//! Export of a Sapwood model to other libraries' formats: XGBoost JSON, LightGBM text and
//! ONNX (`ai.onnx.ml` TreeEnsembleRegressor).
//!
//! Sapwood routes rows by bin; the exporters translate every split into the target's value
//! comparison so that every f32 input reaches the same leaf:
//!
//! * Numeric: value v falls in bin `1 + #{t : t < v}`, so split bin `b` sends left exactly
//!   the values `v <= T` with `T = thresholds[b - 1]` (every non-missing value when `b` is
//!   the last bin). NaN is missing and follows the learned default direction.
//! * Categorical: level code = the level's index in the model's level list for that feature
//!   (written into each file). Codes are routed one by one through their bins; levels of bin
//!   0 and codes outside the list go the default direction, like Sapwood's unseen levels.
//! * Base margin: added (in f32, as Sapwood adds it) to every node value of each group's
//!   first tree, with the format's own base score set to a margin of exactly 0, so the target
//!   sums the same f32 values in the same order. A model without trees gets one leaf per group.
//!
//! A split a format cannot express is an error naming the tree and node.

pub mod lightgbm;
pub mod onnx;
mod onnx_proto;
pub mod xgboost;

use crate::data::cuts::FeatureCuts;
use crate::error::{Error, Result};
use crate::model::{InputType, Model};
use crate::objective::ftz;
use crate::objective::ObjectiveKind;
use crate::split::SplitRule;
use crate::tree::{Node, Split, Tree};

/// The largest category code the formats take (XGBoost keeps codes exactly below 2^24, and
/// ONNX compares codes as f32, exact below 2^24 too).
const MAX_CATEGORY_CODE: usize = 1 << 24;

/// How one split routes non-missing values, in value space.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Route {
    /// Values `v <= le` go left; `None`: every non-missing value goes left.
    Numeric {
        /// The largest value going left, when some value goes right.
        le: Option<f32>,
    },
    /// Level codes (ascending) that go the way opposite to the default direction; every
    /// other code goes the default way.
    Categorical {
        /// Codes leaving the default direction.
        off_default: Vec<u32>,
    },
}

/// The value-space routing of split `s`, or an error naming tree `t` and node `n`.
pub(crate) fn route(model: &Model, t: usize, n: usize, s: &Split) -> Result<Route> {
    let fail = |what: String| unexpressible(t, n, &what);
    match (&s.rule, model.cuts.feature(s.feature)) {
        (SplitRule::Numeric { bin }, FeatureCuts::Numeric { thresholds }) => {
            let b = *bin as usize;
            let le = if b >= 1 && b <= thresholds.len() {
                let v = thresholds[b - 1];
                // every value is <= +inf: the split sends all non-missing values left
                (v != f32::INFINITY).then_some(v)
            } else {
                None
            };
            Ok(Route::Numeric { le })
        }
        (
            SplitRule::Categorical { left },
            FeatureCuts::Categorical {
                levels, level_bins, ..
            },
        ) => {
            if levels.len() > MAX_CATEGORY_CODE {
                return Err(fail(format!(
                    "feature `{}` has {} levels, more than the {MAX_CATEGORY_CODE} category \
                     codes the formats hold",
                    model.feature_names[s.feature],
                    levels.len()
                )));
            }
            let off_default = level_bins
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b != 0 && left.contains(b) != s.default_left)
                .map(|(c, _)| c as u32)
                .collect();
            Ok(Route::Categorical { off_default })
        }
        _ => Err(fail(format!(
            "its rule does not match the kind of feature {}",
            s.feature
        ))),
    }
}

/// The error for a split a format cannot express.
pub(crate) fn unexpressible(t: usize, n: usize, what: &str) -> Error {
    Error::InvalidModel(format!("tree {t}, node {n}: cannot be exported: {what}"))
}

/// The error for an objective a format's export does not cover yet.
pub(crate) fn unsupported_objective(objective: ObjectiveKind, format: &str) -> Error {
    let lacks = if format == "XGBoost" {
        "XGBoost lacks LightGBM's huber, and a custom objective has no loss to name"
    } else {
        "LightGBM lacks binary:logitraw, reg:pseudohubererror, rank:map, rank:pairwise, \
         survival:cox and several quantiles in one model, and a custom objective has no loss \
         to name"
    };
    Error::InvalidModel(format!(
        "objective {objective} cannot be exported to {format}: it has no loss of that kind \
         ({lacks})"
    ))
}

/// The trees to write: the model's, with each group's base margin added to every node of
/// its first tree (one leaf per group when there are none).
pub(crate) fn trees_with_base(model: &Model) -> Vec<Tree> {
    let k = model.groups.max(1);
    let mut trees = model.trees.clone();
    if trees.is_empty() {
        trees = (0..k).map(|_| Tree::leaf(0.0, 0.0)).collect();
    }
    for (g, tree) in trees.iter_mut().take(k).enumerate() {
        let base = model.base_margin.get(g).copied().unwrap_or(0.0);
        for node in &mut tree.nodes {
            // Sapwood's first step is ftz(base + leaf): the same f32 operation
            node.value = ftz(base + node.value);
        }
    }
    trees
}

/// Refuses what no format can hold: non-finite numbers and structural impossibilities.
pub(crate) fn check(model: &Model) -> Result<()> {
    model.check_finite()?;
    if model.groups == 0 || model.base_margin.len() != model.groups {
        return Err(Error::InvalidModel(format!(
            "{} groups with {} base margins",
            model.groups,
            model.base_margin.len()
        )));
    }
    if model.cuts.n_features() != model.feature_names.len() {
        return Err(Error::InvalidModel(
            "feature names and cuts disagree in number".into(),
        ));
    }
    for (t, tree) in model.trees.iter().enumerate() {
        for (i, node) in tree.nodes.iter().enumerate() {
            if let Some(s) = &node.split {
                if s.feature >= model.cuts.n_features()
                    || s.left.index() <= i
                    || s.right.index() <= i
                    || s.left.index() >= tree.nodes.len()
                    || s.right.index() >= tree.nodes.len()
                {
                    return Err(unexpressible(
                        t,
                        i,
                        "its children or feature are out of range",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The level lists of the categorical features, by feature index (None for numeric ones).
pub(crate) fn level_lists(model: &Model) -> Vec<Option<&[String]>> {
    model
        .cuts
        .features()
        .iter()
        .map(|f| match f {
            FeatureCuts::Categorical { levels, .. } => Some(&levels[..]),
            FeatureCuts::Numeric { .. } => None,
        })
        .collect()
}

/// What feature `j` held in the training data, when the model records it.
pub(crate) fn input_type(model: &Model, j: usize) -> Option<InputType> {
    model.input_types.as_ref().and_then(|t| t.get(j).copied())
}

/// The levels as integers when every one is an integer written plainly (`"17"`, `"-3"`;
/// not `"017"`) and the feature was not trained on text (`input`, when the model records
/// it): they came from integer categories (pandas), which the peers' readers match as
/// numbers, not text.
pub(crate) fn integer_levels(levels: &[String], input: Option<InputType>) -> Option<Vec<i64>> {
    if levels.is_empty() || input == Some(InputType::Strings) {
        return None;
    }
    levels
        .iter()
        .map(|v| v.parse::<i64>().ok().filter(|i| i.to_string() == *v))
        .collect()
}

/// A node's split, if any (helper for the writers).
pub(crate) fn split_of(node: &Node) -> Option<&Split> {
    node.split.as_ref()
}

#[cfg(test)]
mod tests;
