//! LightGBM text model (`lightgbm.Booster(model_file=...)`, model version v4).
//!
//! * Numeric split: LightGBM compares the f64 input and sends `x <= threshold` left, while
//!   Sapwood rounds the input to f32 first (to nearest, ties to even) and compares that with
//!   its f32 threshold `T`. So the threshold written is the largest f64 that still rounds to
//!   an f32 at most `T` (`f64_threshold`): every f64 input, not only every f32 one, routes
//!   as Sapwood routes it (x = 1.857, not an f32, lies between `T` = 1.857f32 and that
//!   threshold, and goes left in both). A split sending every
//!   non-missing value left gets the largest finite f64 (only +inf, which Sapwood sends left,
//!   goes right there). LightGBM itself reads every input with |x| <= 1e-35 as 0
//!   (`kZeroThreshold`), so such inputs route as 0 does.
//! * Missing (NaN): missing type NaN with the learned default direction (decision bits 8, +2
//!   when default left).
//! * Categorical split: LightGBM sends the codes in the node's bitset left and everything
//!   else (NaN, negative codes, codes beyond the bitset) right. The bitset holds the codes
//!   leaving the default direction; when the default is left the children are swapped, so
//!   missing values and codes outside the level list take the default way. Codes are indices
//!   into the level lists of the file's `pandas_categorical` line (LightGBM's own mapping
//!   for pandas categories, in categorical-feature order).
//! * Base margin: folded into the first tree of each group (see [`super`]); LightGBM has no
//!   base score. Leaf values are the f32 values written exactly as f64; LightGBM sums them in
//!   f64 where Sapwood sums in f32, so margins agree to f32 rounding (relative ~1e-7 per tree).
//! * Feature names: whitespace (LightGBM's separator) becomes `_`, as LightGBM itself does.

use std::fmt::Write;

use serde_json::Value;

use super::{check, level_lists, route, split_of, trees_with_base, Route};
use crate::error::Result;
use crate::model::Model;
use crate::objective::ObjectiveKind;
use crate::tree::{NodeId, Tree};

/// Decision-type bits: categorical, default left, missing type NaN.
const CATEGORICAL: u8 = 1;
const DEFAULT_LEFT: u8 = 2;
const MISSING_NAN: u8 = 2 << 2;

/// An f32 written as the f64 of the same value, shortest text that reads back exactly.
fn exact(x: f32) -> String {
    format!("{:?}", f64::from(x))
}

/// The largest f64 whose nearest f32 (ties to even, as Rust's, NumPy's and C's casts round)
/// is at most `t`: `x <= f64_threshold(t)` ⇔ `(x as f32) <= t` for every f64 `x`, NaN aside.
/// The f64 halfway between `t` and the next f32 up is exact (25 significant bits); it rounds
/// to whichever of the two has an even significand.
pub(crate) fn f64_threshold(t: f32) -> f64 {
    debug_assert!(t != f32::INFINITY && !t.is_nan());
    let up = if t == f32::MAX {
        // the next f32 "up" is past the range: values from halfway on round to +inf
        2f64.powi(128)
    } else {
        f64::from(t.next_up())
    };
    // -inf stands where the next f32 below -MAX would be: doubles from halfway down round
    // to it (-1e39 is -inf in f32, so it goes where -inf goes)
    let t64 = if t == f32::NEG_INFINITY {
        -(2f64.powi(128))
    } else {
        f64::from(t)
    };
    let half = (t64 + up) / 2.0;
    if t.to_bits() & 1 == 0 {
        half
    } else {
        half.next_down()
    }
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(" ")
}

fn tree_text(model: &Model, t: usize, tree: &Tree, out: &mut String) -> Result<()> {
    // LightGBM numbers internal nodes and leaves separately; a leaf child is ~leaf
    let mut internal = vec![0i64; tree.nodes.len()];
    let mut leaf = vec![0i64; tree.nodes.len()];
    let (mut ni, mut nl) = (0i64, 0i64);
    for (i, node) in tree.nodes.iter().enumerate() {
        if node.split.is_some() {
            internal[i] = ni;
            ni += 1;
        } else {
            leaf[i] = nl;
            nl += 1;
        }
    }
    let child = |id: NodeId| -> i64 {
        if tree.nodes[id.index()].split.is_some() {
            internal[id.index()]
        } else {
            !leaf[id.index()]
        }
    };
    let (mut feature, mut gain, mut threshold, mut decision) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut left, mut right, mut ivalue, mut iweight, mut icount) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut cat_boundaries, mut cat_threshold) = (vec![0usize], Vec::<u32>::new());
    let (mut lvalue, mut lweight, mut lcount) = (Vec::new(), Vec::new(), Vec::new());
    for (i, node) in tree.nodes.iter().enumerate() {
        let Some(s) = split_of(node) else {
            lvalue.push(exact(node.value));
            lweight.push(format!("{:?}", node.cover));
            lcount.push(node.cover.round().max(0.0) as u64);
            continue;
        };
        let (mut l, mut r) = (child(s.left), child(s.right));
        match route(model, t, i, s)? {
            Route::Numeric { le } => {
                threshold.push(format!("{:?}", le.map_or(f64::MAX, f64_threshold)));
                decision.push(MISSING_NAN | if s.default_left { DEFAULT_LEFT } else { 0 });
            }
            Route::Categorical { off_default } => {
                if s.default_left {
                    // the bitset's codes go left and the rest right: swap so the rest
                    // (NaN and unknown codes among them) take the default way
                    std::mem::swap(&mut l, &mut r);
                }
                let words = off_default.last().map_or(1, |&c| c as usize / 32 + 1);
                let mut bits = vec![0u32; words];
                for c in off_default {
                    bits[c as usize / 32] |= 1 << (c % 32);
                }
                threshold.push((cat_boundaries.len() - 1).to_string());
                cat_threshold.extend(bits);
                cat_boundaries.push(cat_threshold.len());
                decision.push(CATEGORICAL);
            }
        }
        feature.push(s.feature);
        gain.push(format!("{:?}", s.gain));
        left.push(l);
        right.push(r);
        ivalue.push(exact(node.value));
        iweight.push(format!("{:?}", node.cover));
        icount.push(node.cover.round().max(0.0) as u64);
    }
    let num_cat = cat_boundaries.len() - 1;
    let _ = writeln!(out, "Tree={t}");
    let _ = writeln!(out, "num_leaves={nl}");
    let _ = writeln!(out, "num_cat={num_cat}");
    if ni > 0 {
        let _ = writeln!(out, "split_feature={}", join(&feature));
        let _ = writeln!(out, "split_gain={}", gain.join(" "));
        let _ = writeln!(out, "threshold={}", threshold.join(" "));
        let _ = writeln!(out, "decision_type={}", join(&decision));
        let _ = writeln!(out, "left_child={}", join(&left));
        let _ = writeln!(out, "right_child={}", join(&right));
    }
    let _ = writeln!(out, "leaf_value={}", lvalue.join(" "));
    if ni > 0 {
        let _ = writeln!(out, "leaf_weight={}", lweight.join(" "));
        let _ = writeln!(out, "leaf_count={}", join(&lcount));
        let _ = writeln!(out, "internal_value={}", ivalue.join(" "));
        let _ = writeln!(out, "internal_weight={}", iweight.join(" "));
        let _ = writeln!(out, "internal_count={}", join(&icount));
    }
    if num_cat > 0 {
        let _ = writeln!(out, "cat_boundaries={}", join(&cat_boundaries));
        let _ = writeln!(out, "cat_threshold={}", join(&cat_threshold));
    }
    let _ = writeln!(out, "is_linear=0");
    let _ = writeln!(out, "shrinkage=1");
    let _ = writeln!(out);
    let _ = writeln!(out);
    Ok(())
}

/// The feature name as LightGBM can hold it: whitespace separates names in its files.
fn lightgbm_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    if s.is_empty() {
        "_".into()
    } else {
        s
    }
}

/// The model as LightGBM text; a split LightGBM cannot express is an error naming the tree
/// and node.
pub fn to_text(model: &Model) -> Result<String> {
    check(model)?;
    let k = model.groups;
    let trees = trees_with_base(model);
    let objective = match model.params.objective {
        ObjectiveKind::SquaredError => "regression".to_string(),
        ObjectiveKind::Logistic => "binary sigmoid:1".to_string(),
        ObjectiveKind::Softprob | ObjectiveKind::Softmax => format!("multiclass num_class:{k}"),
        ObjectiveKind::AbsoluteError => "regression_l1".to_string(),
        ObjectiveKind::QuantileError if k == 1 => "quantile".to_string(),
        ObjectiveKind::Huber => "huber".to_string(),
        // LightGBM exponentiates the scores of these three, as Sapwood does
        ObjectiveKind::Poisson => "poisson".to_string(),
        ObjectiveKind::Tweedie => "tweedie".to_string(),
        ObjectiveKind::Gamma => "gamma".to_string(),
        ObjectiveKind::RankNdcg => "lambdarank".to_string(),
        // no LightGBM loss of these kinds (nor several quantiles in one model): refused
        // rather than mislabelled
        other => return Err(super::unsupported_objective(other, "LightGBM")),
    };
    let levels = level_lists(model);
    let infos: Vec<String> = model
        .cuts
        .features()
        .iter()
        .zip(&levels)
        .map(|(f, l)| match l {
            Some(l) if !l.is_empty() => (0..l.len())
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(":"),
            Some(_) => "none".into(),
            None => match f {
                crate::data::cuts::FeatureCuts::Numeric { thresholds } => {
                    match (thresholds.first(), thresholds.last()) {
                        (Some(a), Some(b)) if a.is_finite() && b.is_finite() => {
                            format!("[{}:{}]", exact(*a), exact(*b))
                        }
                        _ => "none".into(),
                    }
                }
                _ => "none".into(),
            },
        })
        .collect();
    let names: Vec<String> = model
        .feature_names
        .iter()
        .map(|n| lightgbm_name(n))
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "tree");
    let _ = writeln!(out, "version=v4");
    let _ = writeln!(out, "num_class={k}");
    let _ = writeln!(out, "num_tree_per_iteration={k}");
    let _ = writeln!(out, "label_index=0");
    let _ = writeln!(out, "max_feature_idx={}", names.len().saturating_sub(1));
    let _ = writeln!(out, "objective={objective}");
    let _ = writeln!(out, "feature_names={}", names.join(" "));
    let _ = writeln!(out, "feature_infos={}", infos.join(" "));
    let _ = writeln!(out);
    for (t, tree) in trees.iter().enumerate() {
        tree_text(model, t, tree, &mut out)?;
    }
    let _ = writeln!(out, "end of trees");
    let _ = writeln!(out);
    let _ = writeln!(out, "parameters:");
    let _ = writeln!(
        out,
        "[objective: {}]",
        objective.split(' ').next().unwrap_or("")
    );
    let _ = writeln!(out, "[num_class: {k}]");
    let _ = writeln!(out, "end of parameters");
    let _ = writeln!(out);
    let cats: Vec<Value> = levels
        .iter()
        .enumerate()
        .filter_map(|(j, l)| l.map(|l| (j, l)))
        // integer categories as numbers: LightGBM sets a frame's categories from this list
        .map(
            |(j, l)| match super::integer_levels(l, super::input_type(model, j)) {
                Some(ints) => Value::from(ints),
                None => Value::from(l.to_vec()),
            },
        )
        .collect();
    let pandas = if cats.is_empty() {
        "null".to_string()
    } else {
        Value::from(cats).to_string()
    };
    let _ = writeln!(out, "pandas_categorical:{pandas}");
    Ok(out)
}
