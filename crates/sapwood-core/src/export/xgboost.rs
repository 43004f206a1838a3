//! XGBoost JSON model (`xgboost.Booster(model_file=...)`, XGBoost 2.x/3.x schema).
//!
//! * Numeric split: XGBoost sends `x < split_condition` left, so the condition is the f32
//!   right after Sapwood's threshold `T` (`x <= T` ⇔ `x < next_up(T)` for every f32 `x`). A
//!   split sending every non-missing value left gets `1e39`, which XGBoost reads as +inf
//!   (XGBoost refuses infinite inputs, so every value it accepts goes left).
//! * Missing (NaN): `default_left` as learned.
//! * Categorical split: XGBoost sends the listed categories right and every other code
//!   (unlisted, negative, beyond the list) left. The listed codes are those leaving the
//!   default direction; when the default is right the children are swapped (and
//!   `default_left` set; nodes are renumbered breadth-first so XGBoost's left child keeps
//!   the smaller id, as its TreeSHAP expects), so unlisted codes, like Sapwood's unseen levels, take the default
//!   way. Codes are indices into the level lists written in the learner attribute
//!   `sapwood_categories` (JSON `{feature: [level, ...]}`) and in XGBoost 3.x's category
//!   container (`cats`), with which XGBoost re-codes a pandas frame's categories itself
//!   (in any order; a level training never saw is refused by XGBoost). Levels that are not
//!   all ASCII get no container (XGBoost 3.2 cuts such strings by characters, not bytes):
//!   a frame must then list the model's levels in its order. Feature types are `c`, so the
//!   data needs `enable_categorical=True`.
//!   A split sending every level the default way (XGBoost has no empty category list) is
//!   written as the numeric `x < +inf` with the default child on the left.
//! * Base margin: folded into the first tree of each group (see [`super`]); `base_score` is
//!   a margin of 0 (0.5 for `binary:logistic`, whose logit is 0).
//! * Node covers are written as `sum_hessian`, so XGBoost's TreeSHAP matches Sapwood's.

use serde_json::{json, Map, Value};

use super::{check, level_lists, route, split_of, trees_with_base, Route};
use crate::error::Result;
use crate::model::Model;
use crate::objective::ObjectiveKind;
use crate::params::Params;
use crate::tree::Tree;

/// XGBoost's dtype code of 64-bit integer categories in its category container.
const XGB_INT64: i64 = 15;

/// The levels of every feature (None: numeric) as XGBoost 3.x's category container
/// (`cats`): with it XGBoost re-codes a pandas frame's categories to the codes the trees
/// use, whatever their order, and refuses a level training never saw. Levels that are all
/// integers are written as 64-bit integers (pandas' integer categories) unless the feature
/// was trained on text, others as UTF-8 strings; `sorted_idx` orders each feature's levels as XGBoost looks them up (integers
/// by value, strings bytewise with bytes read as signed, as XGBoost's own files have them).
fn category_container(model: &Model, levels: &[Option<&[String]>]) -> Value {
    let mut enc = Vec::new();
    let mut segments = vec![0usize];
    let mut sorted_idx: Vec<usize> = Vec::new();
    for (j, l) in levels.iter().enumerate() {
        let l = l.unwrap_or(&[]);
        let mut order: Vec<usize> = (0..l.len()).collect();
        match super::integer_levels(l, super::input_type(model, j)) {
            Some(ints) => {
                order.sort_by_key(|&i| ints[i]);
                enc.push(json!({ "type": XGB_INT64, "values": ints }));
            }
            None => {
                let signed = |s: &str| s.bytes().map(|b| b as i8).collect::<Vec<i8>>();
                order.sort_by(|&a, &b| signed(&l[a]).cmp(&signed(&l[b])));
                let mut offsets = Vec::with_capacity(l.len() + 1);
                let mut values: Vec<i8> = Vec::new();
                if !l.is_empty() {
                    offsets.push(0usize);
                }
                for v in l {
                    values.extend(signed(v));
                    offsets.push(values.len());
                }
                enc.push(json!({ "offsets": offsets, "values": values }));
            }
        }
        segments.push(segments.last().copied().unwrap_or(0) + l.len());
        sorted_idx.extend(order);
    }
    json!({ "enc": enc, "feature_segments": segments, "sorted_idx": sorted_idx })
}

/// XGBoost's parent of the root.
const NO_PARENT: i64 = 2_147_483_647;

/// The smallest f32 greater than `x` (finite `x` below f32::MAX).
fn next_up(x: f32) -> f32 {
    if x == 0.0 {
        f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(x.to_bits() + 1)
    } else {
        f32::from_bits(x.to_bits() - 1)
    }
}

/// Whether XGBoost's left child is Sapwood's right one at split `s` (see the module docs).
fn swapped(route: &Route, default_left: bool) -> bool {
    matches!(route, Route::Categorical { .. }) && !default_left
}

fn tree_json(model: &Model, t: usize, tree: &Tree) -> Result<Value> {
    let n = tree.nodes.len();
    // XGBoost's TreeSHAP takes the left child to have the smaller id, so nodes are renumbered
    // breadth-first with XGBoost's left child first (children still follow their parents)
    let mut routes = Vec::with_capacity(n);
    for (i, node) in tree.nodes.iter().enumerate() {
        routes.push(match split_of(node) {
            Some(s) => Some(route(model, t, i, s)?),
            None => None,
        });
    }
    let children = |i: usize| -> Option<(usize, usize)> {
        let s = split_of(&tree.nodes[i])?;
        let (l, r) = (s.left.index(), s.right.index());
        let swap = routes[i]
            .as_ref()
            .is_some_and(|r| swapped(r, s.default_left));
        Some(if swap { (r, l) } else { (l, r) })
    };
    let mut order = vec![0usize];
    let mut at = 0;
    while at < order.len() {
        if let Some((l, r)) = children(order[at]) {
            order.push(l);
            order.push(r);
        }
        at += 1;
    }
    let mut new_id = vec![usize::MAX; n];
    for (new, &old) in order.iter().enumerate() {
        new_id[old] = new;
    }
    let m = order.len();
    let mut left = vec![-1i64; m];
    let mut right = vec![-1i64; m];
    let mut parents = vec![NO_PARENT; m];
    let mut feature = vec![0i64; m];
    let mut cond: Vec<Value> = Vec::with_capacity(m);
    let mut default_left = vec![0u8; m];
    let mut split_type = vec![0u8; m];
    let mut loss = vec![0f64; m];
    let (mut cats, mut cat_nodes, mut cat_segments, mut cat_sizes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, &old) in order.iter().enumerate() {
        let node = &tree.nodes[old];
        let (Some(s), Some(rt), Some((l, r))) = (split_of(node), &routes[old], children(old))
        else {
            cond.push(json!(node.value));
            continue;
        };
        // a swapped node's default child is XGBoost's left one
        let dl = s.default_left || swapped(rt, s.default_left);
        match rt {
            Route::Numeric { le } => match le {
                Some(v) if *v < f32::MAX => cond.push(json!(next_up(*v))),
                // 1e39 parses to +inf in XGBoost: every value it accepts goes left
                _ => cond.push(json!(1e39f64)),
            },
            Route::Categorical { off_default } if off_default.is_empty() => {
                // XGBoost refuses an empty category list; every code and NaN go the
                // default way (XGBoost's left here), which a numeric `x < +inf` expresses
                cond.push(json!(1e39f64));
            }
            Route::Categorical { off_default } => {
                split_type[i] = 1;
                cat_nodes.push(i as i64);
                cat_segments.push(cats.len() as i64);
                cat_sizes.push(off_default.len() as i64);
                cats.extend(off_default.iter().map(|&c| c as i64));
                cond.push(json!(0.0f32));
            }
        }
        let (l, r) = (new_id[l], new_id[r]);
        left[i] = l as i64;
        right[i] = r as i64;
        parents[l] = i as i64;
        parents[r] = i as i64;
        feature[i] = s.feature as i64;
        default_left[i] = dl as u8;
        loss[i] = s.gain;
    }
    let base_weights: Vec<f32> = order.iter().map(|&o| tree.nodes[o].value).collect();
    let sum_hessian: Vec<f64> = order.iter().map(|&o| tree.nodes[o].cover).collect();
    Ok(json!({
        "base_weights": base_weights,
        "categories": cats,
        "categories_nodes": cat_nodes,
        "categories_segments": cat_segments,
        "categories_sizes": cat_sizes,
        "default_left": default_left,
        "id": t,
        "left_children": left,
        "loss_changes": loss,
        "parents": parents,
        "right_children": right,
        "split_conditions": cond,
        "split_indices": feature,
        "split_type": split_type,
        "sum_hessian": sum_hessian,
        "tree_param": {
            "num_deleted": "0",
            "num_feature": model.feature_names.len().to_string(),
            "num_nodes": m.to_string(),
            "size_leaf_vector": "1",
        },
    }))
}

/// The model as XGBoost JSON text; a split XGBoost cannot express is an error naming the
/// tree and node.
pub fn to_json(model: &Model) -> Result<String> {
    check(model)?;
    let k = model.groups;
    let trees = trees_with_base(model);
    let tree_values = trees
        .iter()
        .enumerate()
        .map(|(t, tree)| tree_json(model, t, tree))
        .collect::<Result<Vec<_>>>()?;
    let rounds = trees.len() / k;
    let iteration_indptr: Vec<usize> = (0..=rounds).map(|r| r * k).collect();
    let tree_info: Vec<usize> = (0..trees.len()).map(|t| t % k).collect();
    let (objective, base_score, num_class) = objective_json(&model.params, k)?;
    let levels = level_lists(model);
    let feature_types: Vec<&str> = levels
        .iter()
        .map(|l| if l.is_some() { "c" } else { "q" })
        .collect();
    let mut categories = Map::new();
    for (name, l) in model.feature_names.iter().zip(&levels) {
        if let Some(l) = l {
            categories.insert(name.clone(), json!(l));
        }
    }
    let mut attributes = Map::new();
    attributes.insert(
        "sapwood_categories".into(),
        Value::String(Value::Object(categories).to_string()),
    );
    if let Some(b) = model.best_iteration {
        attributes.insert("best_iteration".into(), Value::String(b.to_string()));
    }
    let mut booster_model = json!({
        "gbtree_model_param": {
            "num_parallel_tree": "1",
            "num_trees": trees.len().to_string(),
        },
        "iteration_indptr": iteration_indptr,
        "tree_info": tree_info,
        "trees": tree_values,
    });
    // XGBoost 3.2 slices non-ASCII category strings by characters rather than bytes (its
    // own models then mispredict on reordered categories), so such levels get no container
    // and a frame must list them in the model's order
    let ascii = levels
        .iter()
        .flatten()
        .all(|l| l.iter().all(|v| v.is_ascii()));
    if levels.iter().any(Option::is_some) && ascii {
        booster_model["cats"] = category_container(model, &levels);
    }
    let file = json!({
        "learner": {
            "attributes": attributes,
            "feature_names": model.feature_names,
            "feature_types": feature_types,
            "gradient_booster": {
                "model": booster_model,
                "name": "gbtree",
            },
            "learner_model_param": {
                "base_score": base_score,
                "boost_from_average": "0",
                "num_class": num_class.to_string(),
                "num_feature": model.feature_names.len().to_string(),
                // one target per quantile of a multi-quantile model
                "num_target": (if num_class == 0 { k } else { 1 }).to_string(),
            },
            "objective": objective,
        },
        "version": [3, 0, 0],
    });
    Ok(file.to_string())
}

/// XGBoost's objective section, `base_score` and `num_class` for a model's parameters.
/// `base_score` is in output space: the value whose margin is 0 (the base margin is folded
/// into the first trees).
fn objective_json(p: &Params, k: usize) -> Result<(Value, String, usize)> {
    let name = p.objective.name();
    let reg_loss = json!({"scale_pos_weight": "1"});
    Ok(match p.objective {
        ObjectiveKind::SquaredError
        | ObjectiveKind::AbsoluteError
        | ObjectiveKind::Gamma
        | ObjectiveKind::LogitRaw
        | ObjectiveKind::Logistic => {
            let base = match p.objective {
                ObjectiveKind::Logistic => "[5E-1]",
                // XGBoost takes logitraw's base_score as a margin
                ObjectiveKind::Gamma => "[1E0]",
                _ => "[0E0]",
            };
            let obj = if p.objective == ObjectiveKind::AbsoluteError {
                json!({ "name": name })
            } else {
                json!({ "name": name, "reg_loss_param": reg_loss })
            };
            (obj, base.to_string(), 0)
        }
        ObjectiveKind::QuantileError => {
            let alphas: Vec<String> = p.quantile_alpha.iter().map(f64::to_string).collect();
            (
                json!({"name": name, "quantile_loss_param": {"quantile_alpha": format!("[{}]", alphas.join(","))}}),
                format!("[{}]", vec!["0E0"; k].join(",")),
                0,
            )
        }
        ObjectiveKind::PseudoHuber => (
            json!({"name": name, "pseudo_huber_param": {"huber_slope": p.huber_slope.to_string()}}),
            "[0E0]".to_string(),
            0,
        ),
        ObjectiveKind::Poisson => (
            json!({"name": name, "poisson_regression_param": {"max_delta_step":
                p.poisson_hessian_offset().to_string()}}),
            "[1E0]".to_string(),
            0,
        ),
        // XGBoost's Cox predicts exp(margin) too: base_score 1 is margin 0
        ObjectiveKind::Cox => (json!({ "name": name }), "[1E0]".to_string(), 0),
        ObjectiveKind::Tweedie => (
            json!({"name": name, "tweedie_regression_param": {"tweedie_variance_power": p.tweedie_variance_power.to_string()}}),
            "[1E0]".to_string(),
            0,
        ),
        ObjectiveKind::Softprob | ObjectiveKind::Softmax => (
            json!({"name": name, "softmax_multiclass_param": {"num_class": k.to_string()}}),
            format!("[{}]", vec!["0E0"; k].join(",")),
            k,
        ),
        ObjectiveKind::RankNdcg | ObjectiveKind::RankMap | ObjectiveKind::RankPairwise => (
            json!({"name": name, "lambdarank_param": {
                "lambdarank_num_pair_per_sample": p.lambdarank_num_pair_per_sample
                    .unwrap_or(match p.lambdarank_pair_method {
                        crate::objective::PairMethodKind::TopK => 32,
                        crate::objective::PairMethodKind::Mean => 1,
                    })
                    .to_string(),
                "lambdarank_pair_method": match p.lambdarank_pair_method {
                    crate::objective::PairMethodKind::TopK => "topk",
                    crate::objective::PairMethodKind::Mean => "mean",
                },
                "ndcg_exp_gain": if p.ndcg_exp_gain { "1" } else { "0" },
                "lambdarank_normalization": if p.lambdarank_normalization { "1" } else { "0" },
                "lambdarank_unbiased": "0",
                "lambdarank_bias_norm": "1",
                "lambdarank_score_normalization": "1",
            }}),
            "[0E0]".to_string(),
            0,
        ),
        // XGBoost has no Huber loss of LightGBM's kind
        other => return Err(super::unsupported_objective(other, "XGBoost")),
    })
}
