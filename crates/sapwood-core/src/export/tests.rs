//! Every bin boundary of a hand-built model, routed by independent evaluators of the
//! exported XGBoost and LightGBM structures (written here from the formats' documented
//! rules), must reach a leaf of the same value as Sapwood's binned routing.

use std::collections::HashMap;

use super::*;
use crate::model::Model;
use crate::objective::ObjectiveKind;
use crate::params::Params;
use crate::split::BinSet;
use crate::tree::NodeId;

const THRESHOLDS: [f32; 5] = [-1.5, -0.0, 1e-30, 2.5, f32::MAX];
const LEVELS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
/// level -> bin: `d` has bin 0 (routed as missing), `c` and `e` share the rare bin.
const LEVEL_BINS: [u16; 6] = [1, 2, 3, 0, 3, 4];

fn node(value: f32, split: Option<Split>) -> Node {
    Node {
        split,
        value,
        cover: 1.0 + value.abs() as f64,
    }
}

fn numeric(bin: u16, default_left: bool) -> Option<Split> {
    Some(Split {
        feature: 0,
        rule: SplitRule::Numeric { bin },
        default_left,
        left: NodeId(1),
        right: NodeId(2),
        gain: 1.0,
    })
}

fn categorical(bins: &[u16], default_left: bool) -> Option<Split> {
    Some(Split {
        feature: 1,
        rule: SplitRule::Categorical {
            left: BinSet::from_bins(bins.iter().copied()),
        },
        default_left,
        left: NodeId(1),
        right: NodeId(2),
        gain: 1.0,
    })
}

fn stump(split: Option<Split>, l: f32, r: f32) -> Tree {
    Tree {
        nodes: vec![node(0.5, split), node(l, None), node(r, None)],
    }
}

/// Two groups, one stump per split kind and default direction, and a deeper tree mixing both.
fn model() -> Model {
    let mut trees = Vec::new();
    for b in 1..=THRESHOLDS.len() as u16 + 1 {
        for dl in [false, true] {
            trees.push(stump(numeric(b, dl), 0.25 * b as f32, -0.125));
        }
    }
    for bins in [&[1u16][..], &[2, 3], &[4], &[1, 2, 3, 4], &[]] {
        for dl in [false, true] {
            trees.push(stump(categorical(bins, dl), 0.75, -0.5));
        }
    }
    let mut deep = stump(numeric(2, true), 0.0, 0.0);
    deep.nodes[1].split = categorical(&[1, 3], false).map(|mut s| {
        s.left = NodeId(3);
        s.right = NodeId(4);
        s
    });
    deep.nodes.push(node(1.5, None));
    deep.nodes.push(node(-2.5, None));
    trees.push(deep);
    if trees.len() % 2 == 1 {
        trees.push(Tree::leaf(0.0625, 3.0));
    }
    let params = Params {
        objective: ObjectiveKind::Softprob,
        ..Params::default()
    };
    Model {
        params,
        groups: 2,
        classes: None,
        feature_names: vec!["x value".into(), "c".into()],
        cuts: crate::data::cuts::Cuts::new(vec![
            FeatureCuts::Numeric {
                thresholds: THRESHOLDS.to_vec(),
            },
            FeatureCuts::Categorical {
                levels: LEVELS.iter().map(|s| s.to_string()).collect(),
                level_bins: LEVEL_BINS.to_vec(),
                n_bins: 5,
            },
        ]),
        base_margin: vec![0.3, -1.7],
        trees,
        best_iteration: None,
        label_name: None,
        input_types: None,
    }
}

fn below(x: f32) -> f32 {
    if x == 0.0 {
        -f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(x.to_bits() - 1)
    } else {
        f32::from_bits(x.to_bits() + 1)
    }
}

fn above(x: f32) -> f32 {
    -below(-x)
}

/// Numeric probes: just below, at and just above every threshold, and the extremes.
fn numeric_probes() -> Vec<f32> {
    let mut v = vec![f32::NAN, f32::MIN, 0.0, -0.0, f32::from_bits(1), 1.0];
    for t in THRESHOLDS {
        v.extend([below(t), t]);
        if t < f32::MAX {
            v.push(above(t));
        }
    }
    v
}

/// Category probes: every code, codes beyond the list (an unseen level fed as a code) and NaN.
fn category_probes() -> Vec<f32> {
    let mut v: Vec<f32> = (0..LEVELS.len() as u32 + 2).map(|c| c as f32).collect();
    v.push(f32::NAN);
    v
}

/// Sapwood's margins for (x, category code), routed by bins.
fn sapwood_margins(m: &Model, x: f32, c: f32) -> Vec<f32> {
    let bx = FeatureCuts::bin_value(&THRESHOLDS, x);
    let code = if c.is_nan() {
        crate::data::matrix::MISSING_CATEGORY
    } else {
        c as u32
    };
    let bc = FeatureCuts::bin_code(&LEVEL_BINS, code);
    let mut out = m.base_margin.clone();
    for (t, tree) in m.trees.iter().enumerate() {
        let leaf = tree.leaf_by(|f| if f == 0 { bx } else { bc });
        out[t % m.groups] = ftz(out[t % m.groups] + tree.value(leaf));
    }
    out
}

/// XGBoost's rules: NaN takes `default_left`; a categorical node sends listed categories
/// right and everything else (unlisted, negative, too large) left; numeric `x < cond` left.
fn xgboost_margins(file: &serde_json::Value, row: [f32; 2]) -> Vec<f32> {
    let learner = &file["learner"];
    let k: usize = learner["learner_model_param"]["num_class"]
        .as_str()
        .unwrap()
        .parse::<usize>()
        .unwrap()
        .max(1);
    let model = &learner["gradient_booster"]["model"];
    let info: Vec<u64> = serde_json::from_value(model["tree_info"].clone()).unwrap();
    // every prediction starts from base_score, a value in output space: its margin is what
    // the objective's link makes of it (as XGBoost reads it), one per output or one for all
    let scores: Vec<f64> = learner["learner_model_param"]["base_score"]
        .as_str()
        .unwrap()
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let link = |b: f64| -> f64 {
        match learner["objective"]["name"].as_str().unwrap() {
            "binary:logistic" => (b / (1.0 - b)).ln(),
            "reg:gamma" | "count:poisson" | "reg:tweedie" | "survival:cox" => b.ln(),
            _ => b,
        }
    };
    let mut out: Vec<f32> = (0..k)
        .map(|g| link(scores[g.min(scores.len() - 1)]) as f32)
        .collect();
    for (t, tree) in model["trees"].as_array().unwrap().iter().enumerate() {
        let get = |k: &str| -> Vec<f64> { serde_json::from_value(tree[k].clone()).unwrap() };
        let (left, right, feat) = (
            get("left_children"),
            get("right_children"),
            get("split_indices"),
        );
        let (cond, dl, kind) = (
            get("split_conditions"),
            get("default_left"),
            get("split_type"),
        );
        let (cats, cnodes, csegs, csizes) = (
            get("categories"),
            get("categories_nodes"),
            get("categories_segments"),
            get("categories_sizes"),
        );
        let mut n = 0usize;
        while left[n] >= 0.0 {
            let x = row[feat[n] as usize];
            let go_left = if x.is_nan() {
                dl[n] == 1.0
            } else if kind[n] == 1.0 {
                let j = cnodes.iter().position(|&c| c as usize == n).unwrap();
                let set = &cats[csegs[j] as usize..(csegs[j] + csizes[j]) as usize];
                x < 0.0 || !set.contains(&(x.trunc() as f64))
            } else {
                x < cond[n] as f32
            };
            n = if go_left { left[n] } else { right[n] } as usize;
        }
        out[info[t] as usize] += cond[n] as f32;
    }
    out
}

/// LightGBM's rules: inputs with |x| <= 1e-35 read as 0; numeric NaN with missing type NaN takes the default bit, else
/// `(f64)x <= threshold`; categorical NaN and negative codes go right, codes in the bitset
/// left, all others right. Sums in f64, as LightGBM does.
fn lightgbm_margins(text: &str, row: [f64; 2]) -> Vec<f64> {
    let header: HashMap<&str, &str> = text
        .lines()
        .take_while(|l| !l.starts_with("Tree="))
        .filter_map(|l| l.split_once('='))
        .collect();
    let k: usize = header["num_tree_per_iteration"].parse().unwrap();
    let mut out = vec![0f64; k];
    let body = text.split("end of trees").next().unwrap();
    for (t, block) in body.split("Tree=").skip(1).enumerate() {
        let kv: HashMap<&str, &str> = block.lines().filter_map(|l| l.split_once('=')).collect();
        let nums = |key: &str| -> Vec<f64> {
            kv.get(key)
                .map(|s| s.split(' ').map(|x| x.parse::<f64>().unwrap()).collect())
                .unwrap_or_default()
        };
        let leaves = nums("leaf_value");
        if kv["num_leaves"] == "1" {
            out[t % k] += leaves[0];
            continue;
        }
        let (feat, thr, dt) = (
            nums("split_feature"),
            nums("threshold"),
            nums("decision_type"),
        );
        let (left, right) = (nums("left_child"), nums("right_child"));
        let (bounds, bits) = (nums("cat_boundaries"), nums("cat_threshold"));
        let mut n: i64 = 0;
        while n >= 0 {
            let i = n as usize;
            let x = row[feat[i] as usize];
            // LightGBM reads inputs within kZeroThreshold (1e-35) of zero as zero
            let x = if x.abs() <= 1e-35 { 0.0 } else { x };
            let d = dt[i] as u8;
            let go_left = if d & CAT_BIT != 0 {
                if x.is_nan() || (x as i32) < 0 {
                    false
                } else {
                    let c = x as i32 as usize;
                    let (a, b) = (
                        bounds[thr[i] as usize] as usize,
                        bounds[thr[i] as usize + 1] as usize,
                    );
                    c / 32 < b - a && (bits[a + c / 32] as u32 >> (c % 32)) & 1 == 1
                }
            } else if x.is_nan() {
                assert_eq!((d >> 2) & 3, 2, "missing type must be NaN");
                d & 2 != 0
            } else {
                x <= thr[i]
            };
            n = if go_left { left[i] } else { right[i] } as i64;
        }
        out[t % k] += leaves[!n as usize];
    }
    out
}

const CAT_BIT: u8 = 1;

#[test]
fn every_boundary_routes_the_same_in_xgboost() {
    let m = model();
    let file: serde_json::Value = serde_json::from_str(&xgboost::to_json(&m).unwrap()).unwrap();
    let mut checked = 0;
    for x in numeric_probes() {
        for c in category_probes() {
            let want = sapwood_margins(&m, x, c);
            let got = xgboost_margins(&file, [x, c]);
            // same f32 values summed in the same order: bit-identical
            assert_eq!(
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "x={x:e} c={c}: sapwood {want:?} xgboost {got:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 100);
    // XGBoost's TreeSHAP needs the left child to have the smaller id
    for tree in file["learner"]["gradient_booster"]["model"]["trees"]
        .as_array()
        .unwrap()
    {
        let (l, r) = (&tree["left_children"], &tree["right_children"]);
        for (i, (l, r)) in l
            .as_array()
            .unwrap()
            .iter()
            .zip(r.as_array().unwrap())
            .enumerate()
        {
            let (l, r) = (l.as_i64().unwrap(), r.as_i64().unwrap());
            assert!(l == -1 || (i as i64) < l && l < r, "node {i}: {l} {r}");
        }
    }
    let attrs = &file["learner"]["attributes"]["sapwood_categories"];
    let cats: serde_json::Value = serde_json::from_str(attrs.as_str().unwrap()).unwrap();
    assert_eq!(cats["c"], serde_json::json!(LEVELS));
    assert_eq!(
        file["learner"]["feature_types"],
        serde_json::json!(["q", "c"])
    );
}

#[test]
fn every_boundary_routes_the_same_in_lightgbm() {
    let m = model();
    let text = lightgbm::to_text(&m).unwrap();
    let mut probes = numeric_probes();
    // +inf is the one input LightGBM routes differently (right at an all-values split)
    probes.push(f32::NEG_INFINITY);
    // LightGBM reads inputs within 1e-35 of zero as 0 (documented): they route as 0 does
    for x in probes
        .into_iter()
        .filter(|x| !(x.abs() <= 1e-35 && *x != 0.0))
    {
        for c in category_probes() {
            let want = sapwood_margins(&m, x, c);
            let got = lightgbm_margins(&text, [x as f64, c as f64]);
            for (w, g) in want.iter().zip(&got) {
                assert!(
                    (*w as f64 - g).abs() <= 1e-5,
                    "x={x:e} c={c}: sapwood {want:?} lightgbm {got:?}"
                );
            }
        }
    }
    assert!(text.contains("feature_names=x_value c\n"));
    assert!(text.ends_with("pandas_categorical:[[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]]\n"));
}

/// Every f64 near an f32 `T` (T itself, the halfway values to its neighbours and the f64s
/// beside those) routes through `x <= f64_threshold(T)` as `(x as f32) <= T` does, for edge
/// values (zeros, subnormals, f32::MAX, both signs, both significand parities) and a sweep of
/// ordinary ones: a brute-force check of the rule behind LightGBM's thresholds.
#[test]
fn f64_thresholds_route_every_f64_as_its_f32_rounding() {
    let mut ts: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        1.0,
        -1.5,
        1.857,
        1.857f32.next_up(),
        16_777_216.0,
        16_777_217.0,
        f32::NEG_INFINITY,
    ];
    let mut bits = 0x9e37_79b9u32;
    for _ in 0..20_000 {
        bits = bits.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let t = f32::from_bits(bits);
        if t.is_finite() {
            ts.push(t);
        }
    }
    let mut checked = 0;
    for t in ts {
        let thr = lightgbm::f64_threshold(t);
        let mut xs = vec![
            f64::from(t),
            thr,
            thr.next_up(),
            thr.next_down(),
            -1e39,
            -1e300,
        ];
        for n in [t.next_up(), t.next_down()] {
            if n.is_finite() {
                let half = (f64::from(t) + f64::from(n)) / 2.0;
                xs.extend([half, half.next_up(), half.next_down(), f64::from(n)]);
            }
        }
        for x in xs {
            assert_eq!(
                x <= thr,
                (x as f32) <= t,
                "t={t:e} ({:#x}) x={x:e}: threshold {thr:e}",
                t.to_bits()
            );
            checked += 1;
        }
    }
    assert!(checked > 100_000);
}

/// f64 inputs that are not f32 values (1.857, halfway values, their neighbours) reach the
/// leaf in the LightGBM export that Sapwood, rounding them to f32, reaches: LightGBM compares
/// the f64 itself. With thresholds widened exactly from f32, x = 1.857 went the other way.
#[test]
fn f64_inputs_route_in_lightgbm_as_in_sapwood() {
    let m = model();
    let text = lightgbm::to_text(&m).unwrap();
    let mut checked = 0;
    for p in numeric_probes() {
        let mut xs = vec![f64::from(p)];
        for n in [p.next_up(), p.next_down()] {
            if n.is_finite() && p.is_finite() {
                let half = (f64::from(p) + f64::from(n)) / 2.0;
                xs.extend([half, half.next_up(), half.next_down()]);
            }
        }
        // LightGBM reads inputs within 1e-35 of zero as 0 (documented): left out
        for x in xs.into_iter().filter(|x| !(x.abs() <= 1e-35 && *x != 0.0)) {
            for c in category_probes() {
                let want = sapwood_margins(&m, x as f32, c);
                let got = lightgbm_margins(&text, [x, f64::from(c)]);
                for (w, g) in want.iter().zip(&got) {
                    assert!(
                        (f64::from(*w) - g).abs() <= 1e-5,
                        "x={x:e} (f32 {:e}) c={c}: sapwood {want:?} lightgbm {got:?}",
                        x as f32
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 200, "{checked}");
}

#[test]
fn thresholds_are_written_exactly() {
    let m = model();
    let text = lightgbm::to_text(&m).unwrap();
    let tree0 = text.split("Tree=0").nth(1).unwrap();
    let thr = tree0.lines().find(|l| l.starts_with("threshold=")).unwrap();
    // the largest f64 that still rounds to -1.5f32 or below: half an f32 step above -1.5
    // (-1.5 has an even significand, so that halfway value rounds to it)
    let t: f64 = thr["threshold=".len()..].parse().unwrap();
    assert_eq!(t, -1.5 + f64::from(f32::EPSILON) * 0.5);
    assert_eq!(t as f32, -1.5);
    assert!(t.next_up() as f32 > -1.5);
    let file: serde_json::Value = serde_json::from_str(&xgboost::to_json(&m).unwrap()).unwrap();
    let t2 = &file["learner"]["gradient_booster"]["model"]["trees"][2];
    // bin 2 ends at -0.0: XGBoost's `x < 1e-45` holds for -0.0 and 0.0 alike
    assert_eq!(
        t2["split_conditions"][0].as_f64().unwrap() as f32,
        f32::from_bits(1)
    );
}

/// Every objective's `base_score` is written as the output whose margin is exactly 0 (the
/// base margin is folded into the first trees): the reader above applies XGBoost's link to
/// it, so a base_score of 0.5001 where 0.5 is meant, or a link forgotten, moves the margins.
#[test]
fn every_objectives_base_score_is_a_margin_of_zero_in_xgboost() {
    use ObjectiveKind as O;
    for (objective, groups) in [
        (O::Logistic, 1),
        (O::LogitRaw, 1),
        (O::SquaredError, 1),
        (O::AbsoluteError, 1),
        (O::PseudoHuber, 1),
        (O::QuantileError, 1),
        (O::Gamma, 1),
        (O::Poisson, 1),
        (O::Tweedie, 1),
        (O::Cox, 1),
        (O::Softprob, 2),
    ] {
        let mut m = model();
        m.trees.clear();
        m.params.objective = objective;
        m.groups = groups;
        m.base_margin = [0.3f32, -1.7][..groups].to_vec();
        let text = xgboost::to_json(&m).unwrap();
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        let got = xgboost_margins(&file, [0.0, 0.0]);
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            m.base_margin
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            "{objective}: margins {got:?} from base_score {}",
            file["learner"]["learner_model_param"]["base_score"]
        );
    }
}

/// XGBoost reads `poisson_regression_param.max_delta_step` as the Poisson hessian's offset
/// (for training on), which is 0.7 whatever Sapwood's leaf bound, unless `max_delta_step`
/// sets both.
#[test]
fn poissons_hessian_offset_is_exported_not_its_leaf_bound() {
    let offset = |max_delta_step: f64, poisson_leaf_bound: f64| {
        let mut m = model();
        m.params.objective = ObjectiveKind::Poisson;
        m.params.max_delta_step = max_delta_step;
        m.params.poisson_leaf_bound = poisson_leaf_bound;
        let file: serde_json::Value = serde_json::from_str(&xgboost::to_json(&m).unwrap()).unwrap();
        file["learner"]["objective"]["poisson_regression_param"]["max_delta_step"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(offset(0.0, 2.0), "0.7");
    assert_eq!(offset(0.0, 1.4), "0.7");
    assert_eq!(offset(3.0, 2.0), "3");
}

#[test]
fn base_margin_is_folded_into_each_groups_first_tree() {
    let mut m = model();
    m.trees.clear();
    let file: serde_json::Value = serde_json::from_str(&xgboost::to_json(&m).unwrap()).unwrap();
    assert_eq!(xgboost_margins(&file, [0.0, 0.0]), vec![0.3, -1.7]);
    let text = lightgbm::to_text(&m).unwrap();
    let got = lightgbm_margins(&text, [0.0, 0.0]);
    assert_eq!(got, vec![0.3f32 as f64, -1.7f32 as f64]);
}

#[test]
fn malformed_models_are_errors_naming_tree_and_node() {
    let mut m = model();
    // a numeric rule on the categorical feature: no format has it
    m.trees[3].nodes[0].split.as_mut().unwrap().feature = 1;
    for err in [
        xgboost::to_json(&m).unwrap_err().to_string(),
        lightgbm::to_text(&m).unwrap_err().to_string(),
    ] {
        assert!(err.contains("tree 3, node 0"), "{err}");
    }
    let mut m = model();
    m.trees[5].nodes[2].value = f32::NAN;
    assert!(xgboost::to_json(&m)
        .unwrap_err()
        .to_string()
        .contains("tree 5"));
    let mut m = model();
    m.trees[1].nodes[0].split.as_mut().unwrap().right = NodeId(0);
    let err = lightgbm::to_text(&m).unwrap_err().to_string();
    assert!(err.contains("tree 1, node 0"), "{err}");
}

/// TreeEnsembleRegressor's rules (ONNX operator definition, as onnxruntime runs them with
/// f32 input and thresholds): from each tree's node 0, `BRANCH_LEQ` takes the true branch
/// when `x <= value`, `BRANCH_EQ` when `x == value`, `BRANCH_NEQ` when `x != value`, and NaN
/// takes it when `missing_value_tracks_true`; leaf weights are summed per target, in f32,
/// tree by tree.
fn onnx_margins(e: &onnx::Ensemble, row: [f32; 2]) -> Vec<f32> {
    let at: HashMap<(i64, i64), usize> = (0..e.node.len())
        .map(|i| ((e.tree[i], e.node[i]), i))
        .collect();
    let mut trees: Vec<i64> = e.tree.clone();
    trees.dedup();
    let mut out = vec![0f32; e.n_targets];
    for t in trees {
        let mut i = at[&(t, 0)];
        let mut steps = 0;
        while e.mode[i] != onnx::Mode::Leaf {
            let next = onnx_next(e, i, row[e.feature[i] as usize]);
            i = at[&(t, next)];
            steps += 1;
            assert!(steps < 100, "tree {t} loops");
        }
        for w in 0..e.weight.len() {
            if e.target_tree[w] == t && e.target_node[w] == e.node[i] {
                out[e.target[w] as usize] += e.weight[w];
            }
        }
    }
    out
}

/// The node id that internal node `i` of `e` sends `x` to (see [`onnx_margins`]).
fn onnx_next(e: &onnx::Ensemble, i: usize, x: f32) -> i64 {
    let hit = if x.is_nan() {
        e.missing_true[i] == 1
    } else {
        match e.mode[i] {
            onnx::Mode::Leq => x <= e.value[i],
            onnx::Mode::Eq => x == e.value[i],
            onnx::Mode::Neq => x != e.value[i],
            onnx::Mode::Leaf => unreachable!("a leaf routes nothing"),
        }
    };
    if hit {
        e.true_id[i]
    } else {
        e.false_id[i]
    }
}

#[test]
fn every_boundary_routes_the_same_in_onnx() {
    let m = model();
    let e = onnx::ensemble(&m).unwrap();
    let mut probes = numeric_probes();
    probes.extend([f32::INFINITY, f32::NEG_INFINITY]);
    let mut codes = category_probes();
    // a non-integer and a negative code: unknown, the default way in both
    codes.extend([1.5, -1.0]);
    let mut checked = 0;
    for x in probes {
        for &c in &codes {
            let sap_c = if c.fract() != 0.0 || c < 0.0 {
                // Sapwood sees an unknown level: what a code beyond the list gives it
                LEVELS.len() as f32 + 5.0
            } else {
                c
            };
            let want = sapwood_margins(&m, x, sap_c);
            let got = onnx_margins(&e, [x, c]);
            // the same f32 values summed in the same order (no flush of subnormals
            // arises here): bit-identical
            assert_eq!(
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "x={x:e} c={c}: sapwood {want:?} onnx {got:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 100);
    // node ids count from 0 in each tree, with no gaps, as the operator requires
    let mut expected = HashMap::new();
    for (t, n) in e.tree.iter().zip(&e.node) {
        let next = expected.entry(*t).or_insert(0i64);
        assert_eq!(*n, *next, "tree {t}");
        *next += 1;
    }
    // the base margin sits in each group's first tree, as for the other formats
    let mut empty = model();
    empty.trees.clear();
    let e = onnx::ensemble(&empty).unwrap();
    assert_eq!(onnx_margins(&e, [0.0, 0.0]), vec![0.3, -1.7]);
}

#[test]
fn categorical_splits_become_balanced_searches_of_equalities() {
    let m = model();
    let e = onnx::ensemble(&m).unwrap();
    // tree 12 is the first categorical stump, bins {1} left, default right: level `a`
    // (code 0) is the one code leaving the default way
    let nodes: Vec<usize> = (0..e.tree.len()).filter(|&i| e.tree[i] == 12).collect();
    let root = nodes[0];
    // a bucket of one code: "not `a`" goes the default way (NaN too)
    assert_eq!(e.mode[root], onnx::Mode::Neq);
    assert_eq!(e.value[root], 0.0);
    assert_eq!(e.missing_true[root], 1);
    // bins {2, 3}: codes 1, 2 and 4 (`e` shares the rare bin with `c`): one bucket, a
    // chain of equalities ending in an inequality
    let tree14 = |mode| {
        (0..e.tree.len())
            .filter(|&i| e.tree[i] == 14 && e.mode[i] == mode)
            .map(|i| e.value[i])
            .collect::<Vec<f32>>()
    };
    assert_eq!(tree14(onnx::Mode::Eq), vec![1.0, 2.0]);
    assert_eq!(tree14(onnx::Mode::Neq), vec![4.0]);
    false_edges_lead_to_nodes_of_their_own(&e);
}

/// What onnxruntime requires: no node is the false child of two nodes (it places each
/// false child right after its parent).
fn false_edges_lead_to_nodes_of_their_own(e: &onnx::Ensemble) {
    let mut seen = std::collections::HashSet::new();
    for i in 0..e.node.len() {
        if e.mode[i] != onnx::Mode::Leaf {
            assert!(
                seen.insert((e.tree[i], e.false_id[i])),
                "tree {}: node {} is a second false child",
                e.tree[i],
                e.false_id[i]
            );
        }
    }
}

#[test]
fn thousands_of_codes_are_searched_in_logarithmic_depth() {
    // every third code of 0..30,000 leaves the default way
    let codes: Vec<u32> = (0..30_000).step_by(3).collect();
    let (other, default) = (1_000_000, 1_000_001);
    let search = onnx::CodeSearch {
        t: 0,
        group: 0,
        feature: 0,
        other,
        default,
    };
    let mut e = onnx::Ensemble::default();
    let end = search.push(&codes, 0, &mut e);
    assert_eq!(end, onnx::CodeSearch::size(codes.len()));
    let mut ids = e.node.clone();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..end as i64).collect::<Vec<_>>(),
        "every id once, no gaps"
    );
    let at: HashMap<usize, usize> = (0..e.node.len()).map(|i| (e.node[i] as usize, i)).collect();
    false_edges_lead_to_nodes_of_their_own(&e);
    // the other child and the default child are reached by true edges only
    assert!(e
        .false_id
        .iter()
        .all(|&f| f as usize != other && f as usize != default));
    let walk = |x: f32| {
        let (mut id, mut depth) = (0usize, 0);
        while id != other && id != default {
            let i = at[&id];
            assert!(
                e.mode[i] != onnx::Mode::Leaf,
                "x {x} reached the unreachable leaf {id}"
            );
            id = onnx_next(&e, i, x) as usize;
            depth += 1;
        }
        (id == other, depth)
    };
    let mut deepest = 0;
    for c in 0..30_010u32 {
        let (off, depth) = walk(c as f32);
        assert_eq!(off, c < 30_000 && c % 3 == 0, "code {c}");
        deepest = deepest.max(depth);
    }
    // 1,250 buckets of 8: 11 halvings, then at most 8 links and the always-true node
    assert!(deepest <= 20, "{deepest}");
    // non-integers, negatives and NaN take the default way
    for x in [0.5, 2.999, 3.0001, -3.0, 29_999.5, f32::NAN, f32::INFINITY] {
        assert!(!walk(x).0, "{x}");
    }
}

#[test]
fn onnx_errors_name_tree_and_node() {
    let mut m = model();
    m.trees[3].nodes[0].split.as_mut().unwrap().feature = 1;
    let err = onnx::to_bytes(&m).unwrap_err().to_string();
    assert!(err.contains("tree 3, node 0"), "{err}");
    let mut m = model();
    m.trees[1].nodes[0].split.as_mut().unwrap().right = NodeId(0);
    let err = onnx::to_bytes(&m).unwrap_err().to_string();
    assert!(err.contains("tree 1, node 0"), "{err}");
    let mut m = model();
    m.base_margin.pop();
    assert!(onnx::to_bytes(&m).is_err());
}

#[test]
fn integer_looking_levels_are_integers_unless_trained_on_text() {
    use crate::model::InputType;
    let mut m = model();
    let ints: Vec<String> = ["7", "12", "305", "-4", "0", "9"]
        .map(String::from)
        .to_vec();
    m.cuts = crate::data::cuts::Cuts::new(vec![
        m.cuts.feature(0).clone(),
        FeatureCuts::Categorical {
            levels: ints,
            level_bins: LEVEL_BINS.to_vec(),
            n_bins: 5,
        },
    ]);
    let cats = |m: &Model| {
        let file: serde_json::Value = serde_json::from_str(&xgboost::to_json(m).unwrap()).unwrap();
        let enc = file["learner"]["gradient_booster"]["model"]["cats"]["enc"][1].clone();
        let text = lightgbm::to_text(m).unwrap();
        let pandas = text
            .lines()
            .find(|l| l.starts_with("pandas_categorical:"))
            .unwrap()
            .to_string();
        (enc, pandas)
    };
    for types in [None, Some(vec![InputType::Number, InputType::Text])] {
        m.input_types = types;
        let (enc, pandas) = cats(&m);
        assert_eq!(
            enc["values"],
            serde_json::json!([7, 12, 305, -4, 0, 9]),
            "{enc}"
        );
        assert_eq!(pandas, "pandas_categorical:[[7,12,305,-4,0,9]]");
    }
    m.input_types = Some(vec![InputType::Number, InputType::Strings]);
    let (enc, pandas) = cats(&m);
    assert!(enc.get("offsets").is_some(), "text levels: {enc}");
    assert_eq!(
        pandas,
        r#"pandas_categorical:[["7","12","305","-4","0","9"]]"#
    );
}
