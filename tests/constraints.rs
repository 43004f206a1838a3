//! Monotone and interaction constraints, column sampling per level and node, feature
//! weights and extra trees: checked by brute force on the trained models (predictions along
//! grids, every root-to-leaf path), and for the determinism contract (1–4 workers, WGSL).

use sapwood::{
    Booster, Dataset, Device, ObjectiveKind, Output, Params, PredictOptions, Quiet, RunOptions,
    Tree,
};
use sapwood_core::hash::{hash32, Stream};

const LEVELS: [&str; 4] = ["red", "green", "blue", "grey"];

fn uniform(seed: u64, i: usize, j: u32) -> f32 {
    hash32(seed, Stream::RowSample, j, i as u64) as f32 / u32::MAX as f32
}

/// Features x0..x3 (x3 missing for a tenth of the rows), a categorical `colour`, and a
/// signal that rises with x0 and falls with x1 only on the whole (wiggles make an
/// unconstrained model break both), with an x0·x2 interaction.
fn columns(n: usize, seed: u64) -> (Vec<Vec<f32>>, Vec<u32>, Vec<f32>) {
    let mut x: Vec<Vec<f32>> = (0..4).map(|_| Vec::with_capacity(n)).collect();
    let (mut cat, mut s) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let v: Vec<f32> = (0..4).map(|j| 2.0 * uniform(seed, i, j) - 1.0).collect();
        let c = (uniform(seed, i, 9) * 4.0) as u32;
        let signal = 1.5 * v[0] + 0.6 * (9.0 * v[0]).sin() - 1.2 * v[1]
            + 0.5 * (11.0 * v[1]).cos()
            + v[0] * v[2]
            + [0.4, -0.3, 0.0, 0.2][c as usize]
            + 0.3 * (uniform(seed, i, 10) - 0.5);
        for (j, col) in x.iter_mut().enumerate() {
            col.push(if j == 3 && uniform(seed, i, 11) < 0.1 {
                f32::NAN
            } else {
                v[j]
            });
        }
        cat.push(c);
        s.push(signal);
    }
    (x, cat, s)
}

fn dataset(x: &[Vec<f32>], cat: &[u32], label: Vec<f32>) -> Dataset<'static> {
    let mut b = Dataset::builder();
    for (j, col) in x.iter().enumerate() {
        b = b.numeric(format!("x{j}"), col.clone());
    }
    b.categorical("colour", cat.to_vec(), LEVELS.map(String::from).to_vec())
        .label(label)
        .build()
        .unwrap()
}

/// Labels for each objective family from the signal.
fn labels(kind: ObjectiveKind, s: &[f32], seed: u64) -> Vec<f32> {
    s.iter()
        .enumerate()
        .map(|(i, &v)| match kind {
            ObjectiveKind::Logistic => (v > 0.0) as u8 as f32,
            ObjectiveKind::Softprob => ((v.clamp(-1.49, 1.49) + 1.5) as u32) as f32,
            ObjectiveKind::Poisson => ((0.6 * v).exp() * 2.0 * uniform(seed, i, 12)).floor(),
            ObjectiveKind::Gamma | ObjectiveKind::Tweedie => (0.5 * v).exp(),
            ObjectiveKind::RankPairwise | ObjectiveKind::RankNdcg => {
                (v.clamp(-1.0, 1.49) + 1.0).floor()
            }
            _ => v,
        })
        .collect()
}

fn training(kind: ObjectiveKind, n: usize, seed: u64) -> Dataset<'static> {
    let (x, cat, s) = columns(n, seed);
    let mut d = dataset(&x, &cat, labels(kind, &s, seed));
    if kind.is_ranking() {
        let qid: Vec<i64> = (0..n).map(|i| (i / 25) as i64).collect();
        d.set_group(&qid).unwrap();
    }
    d
}

fn params(kind: ObjectiveKind, policy: &str, method: &str) -> Params {
    let mut p = Params {
        objective: kind,
        num_rounds: 12,
        learning_rate: 0.3,
        max_depth: 5,
        seed: 3,
        ..Default::default()
    };
    p.set("grow_policy", policy).unwrap();
    if policy == "lossguide" {
        p.set("max_leaves", "24").unwrap();
        p.set("max_depth", "0").unwrap();
    }
    p.set("monotone_constraints", r#"{"x0": 1, "x1": -1}"#)
        .unwrap();
    p.set("monotone_constraints_method", method).unwrap();
    p
}

/// Rows that differ only in `feature`, swept over a grid, from 40 random base rows: the
/// grid dataset and its sweep length.
fn sweeps(feature: usize, seed: u64) -> (Dataset<'static>, usize) {
    let (base, cat, _) = columns(40, seed);
    let grid: Vec<f32> = (0..81).map(|k| -1.2 + 2.4 * k as f32 / 80.0).collect();
    let mut x: Vec<Vec<f32>> = vec![Vec::new(); 4];
    let mut c = Vec::new();
    for r in 0..40 {
        for &g in &grid {
            for (j, col) in x.iter_mut().enumerate() {
                col.push(if j == feature { g } else { base[j][r] });
            }
            c.push(cat[r]);
        }
    }
    (dataset(&x, &c, vec![0.0; c.len()]), grid.len())
}

/// The first place where a margin moves against `direction` along a sweep, if any.
fn violation(b: &Booster, feature: usize, direction: f32) -> Option<String> {
    let (grid, len) = sweeps(feature, 77);
    let p = b
        .predict_with(
            &grid,
            PredictOptions {
                output: Output::Margin,
                ..Default::default()
            },
        )
        .unwrap();
    let k = p.per_row;
    for row in 0..grid.n_rows() / len {
        for step in 1..len {
            for g in 0..k {
                let (a, z) = (
                    p.values[(row * len + step - 1) * k + g],
                    p.values[(row * len + step) * k + g],
                );
                if (z - a) * direction < 0.0 {
                    return Some(format!(
                        "sweep {row}, step {step}, group {g}: {a} then {z} along x{feature}"
                    ));
                }
            }
        }
    }
    None
}

const FAMILIES: [ObjectiveKind; 10] = [
    ObjectiveKind::SquaredError,
    ObjectiveKind::Logistic,
    ObjectiveKind::Softprob,
    ObjectiveKind::Poisson,
    ObjectiveKind::AbsoluteError,
    ObjectiveKind::QuantileError,
    ObjectiveKind::PseudoHuber,
    ObjectiveKind::Gamma,
    ObjectiveKind::Tweedie,
    ObjectiveKind::RankPairwise,
];

#[test]
fn monotone_predictions_follow_their_direction_for_every_objective_policy_and_method() {
    for kind in FAMILIES {
        let train = training(kind, 1500, 1);
        for policy in ["depthwise", "lossguide"] {
            for method in ["basic", "intermediate"] {
                let p = params(kind, policy, method);
                let b = Booster::train(&p, &train, &[]).unwrap();
                assert!(b.model().trees.iter().any(|t| t.nodes.len() > 5));
                for (feature, direction) in [(0, 1.0), (1, -1.0)] {
                    if let Some(v) = violation(&b, feature, direction) {
                        panic!("{kind} {policy} {method}: {v}");
                    }
                }
            }
        }
        // the data make an unconstrained model break the directions: the check has teeth
        let mut free = params(kind, "depthwise", "basic");
        free.set("monotone_constraints", "()").unwrap();
        let b = Booster::train(&free, &train, &[]).unwrap();
        assert!(
            violation(&b, 0, 1.0).is_some() || violation(&b, 1, -1.0).is_some(),
            "{kind}: the unconstrained model is monotone already"
        );
    }
}

#[test]
fn low_bit_histograms_and_leaf_refits_stay_monotone() {
    for kind in [ObjectiveKind::SquaredError, ObjectiveKind::Logistic] {
        let train = training(kind, 1500, 2);
        for method in ["basic", "intermediate"] {
            for policy in ["depthwise", "lossguide"] {
                let mut p = params(kind, policy, method);
                p.set("grad_bits", "3").unwrap();
                let b = Booster::train(&p, &train, &[]).unwrap();
                for (feature, direction) in [(0, 1.0), (1, -1.0)] {
                    if let Some(v) = violation(&b, feature, direction) {
                        panic!("{kind} grad_bits=3 {policy} {method}: {v}");
                    }
                }
            }
        }
    }
}

#[test]
fn intermediate_bounds_fit_better_than_basic_ones() {
    let train = training(ObjectiveKind::SquaredError, 3000, 4);
    let test = training(ObjectiveKind::SquaredError, 3000, 5);
    let rmse = |method: &str| {
        let mut p = params(ObjectiveKind::SquaredError, "lossguide", method);
        p.num_rounds = 30;
        let b = Booster::train(&p, &train, &[]).unwrap();
        let pred = b.predict(&test).unwrap().values;
        let sapwood::Label::Values(y) = test.label().unwrap() else {
            unreachable!()
        };
        let se: f64 = pred
            .iter()
            .zip(y)
            .map(|(p, y)| ((p - y) as f64).powi(2))
            .sum();
        (se / y.len() as f64).sqrt()
    };
    let (basic, intermediate) = (rmse("basic"), rmse("intermediate"));
    assert!(
        intermediate < basic,
        "intermediate {intermediate} vs basic {basic}"
    );
}

/// Every root-to-leaf path's features, by leaf.
fn paths(tree: &Tree) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut stack = vec![(sapwood::NodeId::ROOT, Vec::<usize>::new())];
    while let Some((id, used)) = stack.pop() {
        match &tree.nodes[id.index()].split {
            None => out.push(used),
            Some(s) => {
                let mut u = used.clone();
                if !u.contains(&s.feature) {
                    u.push(s.feature);
                }
                stack.push((s.left, u.clone()));
                stack.push((s.right, u));
            }
        }
    }
    out
}

fn interaction_params(policy: &str) -> Params {
    let mut p = params(ObjectiveKind::SquaredError, policy, "basic");
    p.set("monotone_constraints", "()").unwrap();
    p.set("interaction_constraints", r#"[["x0", "x2"], [1, 3, 4]]"#)
        .unwrap();
    p
}

#[test]
fn every_path_uses_features_of_one_interaction_set() {
    let train = training(ObjectiveKind::SquaredError, 1500, 6);
    // x0 and x2 interact; x1, x3 and colour (feature 4) may; nothing else
    let sets = [vec![0usize, 2], vec![1, 3, 4]];
    for policy in ["depthwise", "lossguide"] {
        let b = Booster::train(&interaction_params(policy), &train, &[]).unwrap();
        let mut longest = 0;
        for (t, tree) in b.model().trees.iter().enumerate() {
            for path in paths(tree) {
                longest = longest.max(path.len());
                assert!(
                    sets.iter().any(|s| path.iter().all(|f| s.contains(f))),
                    "{policy}: tree {t} has a path over features {path:?}"
                );
            }
        }
        assert!(longest >= 2, "{policy}: no path combines features");
        // without the constraint, paths do cross the sets
        let free = Booster::train(
            &params(ObjectiveKind::SquaredError, policy, "basic"),
            &train,
            &[],
        )
        .unwrap();
        assert!(free
            .model()
            .trees
            .iter()
            .flat_map(paths)
            .any(|path| { !sets.iter().any(|s| path.iter().all(|f| s.contains(f))) }));
    }
}

#[test]
fn zero_weight_features_are_never_sampled_and_heavy_ones_more_often() {
    let train = training(ObjectiveKind::SquaredError, 1500, 7);
    let mut p = params(ObjectiveKind::SquaredError, "depthwise", "basic");
    p.set("monotone_constraints", "()").unwrap();
    p.set("colsample_bynode", "0.4").unwrap();
    p.set("feature_weights", "[0, 1, 1, 1, 1]").unwrap();
    let b = Booster::train(&p, &train, &[]).unwrap();
    let used: Vec<usize> = b
        .model()
        .trees
        .iter()
        .flat_map(|t| {
            t.nodes
                .iter()
                .filter_map(|n| n.split.as_ref().map(|s| s.feature))
        })
        .collect();
    assert!(!used.is_empty() && !used.contains(&0), "x0 was split on");
    // bylevel and bytree honour the weights too
    p.set("colsample_bynode", "1").unwrap();
    p.set("colsample_bylevel", "0.4").unwrap();
    p.set("colsample_bytree", "0.8").unwrap();
    let b = Booster::train(&p, &train, &[]).unwrap();
    assert!(b.model().trees.iter().all(|t| t
        .nodes
        .iter()
        .all(|n| n.split.as_ref().is_none_or(|s| s.feature != 0))));
}

#[test]
fn sampling_per_level_and_node_and_extra_trees_change_the_model_with_the_seed() {
    let train = training(ObjectiveKind::SquaredError, 1500, 8);
    let base = {
        let mut p = params(ObjectiveKind::SquaredError, "depthwise", "basic");
        p.set("monotone_constraints", "()").unwrap();
        p
    };
    let plain = Booster::train(&base, &train, &[]).unwrap();
    for (k, v) in [
        ("colsample_bylevel", "0.5"),
        ("feature_fraction_bynode", "0.5"),
        ("extra_trees", "true"),
    ] {
        let mut p = base.clone();
        p.set(k, v).unwrap();
        let a = Booster::train(&p, &train, &[]).unwrap();
        assert!(
            a.model().trees != plain.model().trees,
            "{k} changed nothing"
        );
        p.seed += 1;
        let c = Booster::train(&p, &train, &[]).unwrap();
        assert!(
            a.model().trees != c.model().trees,
            "{k}: the seed changed nothing"
        );
        // the parameter is saved with the model, and loads back
        let back = Booster::from_json(&a.to_json()).unwrap();
        assert!(back.to_json() == a.to_json());
    }
    // extra trees: a split's threshold is random, so its gain is at most the exhaustive
    // search's at the root
    let mut p = base.clone();
    p.set("extra_trees", "true").unwrap();
    let a = Booster::train(&p, &train, &[]).unwrap();
    let root_gain = |b: &Booster| b.model().trees[0].nodes[0].split.as_ref().unwrap().gain;
    assert!(root_gain(&a) <= root_gain(&plain));
}

/// Every rule at once, under both policies and methods.
fn everything(policy: &str, method: &str) -> Params {
    let mut p = params(ObjectiveKind::SquaredError, policy, method);
    p.num_rounds = 6;
    for (k, v) in [
        ("interaction_constraints", "[[0, 1, 2], [2, 3, 4]]"),
        ("colsample_bylevel", "0.9"),
        ("colsample_bynode", "0.8"),
        ("feature_weights", "1,2,1,3,1"),
        ("extra_trees", "true"),
        ("subsample", "0.8"),
    ] {
        p.set(k, v).unwrap();
    }
    p
}

#[test]
fn constrained_and_sampled_models_are_identical_for_one_to_four_workers_and_on_wgpu() {
    let train = training(ObjectiveKind::SquaredError, 800, 9);
    for policy in ["depthwise", "lossguide"] {
        for method in ["basic", "intermediate"] {
            for all in [false, true] {
                let p = if all {
                    everything(policy, method)
                } else {
                    params(ObjectiveKind::SquaredError, policy, method)
                };
                let one = Booster::train(&p, &train, &[]).unwrap();
                for workers in 2..=4 {
                    let run = RunOptions {
                        workers,
                        threads: 1,
                        ..Default::default()
                    };
                    let b = Booster::train_with(&p, &run, &train, &[], &mut Quiet).unwrap();
                    assert!(
                        b.to_json() == one.to_json(),
                        "{policy} {method} (all rules: {all}): {workers} workers differ"
                    );
                }
                if !all {
                    continue;
                }
                let run = RunOptions {
                    device: Device::Wgpu,
                    ..Default::default()
                };
                match Booster::train_with(&p, &run, &train, &[], &mut Quiet) {
                    Ok(b) => assert!(
                        b.to_json() == one.to_json(),
                        "{policy} {method}: wgpu differs"
                    ),
                    Err(e) => assert!(
                        std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_none(),
                        "wgpu failed: {e}"
                    ),
                }
            }
        }
    }
}

#[test]
fn wide_batches_reduced_by_feature_block_keep_constraints_and_one_model() {
    // many features make depth-wise batches large enough to be reduce-scattered by feature
    // block: each worker then evaluates its own block, and the bounds must still agree
    let n = 1200;
    let (x, cat, s) = columns(n, 10);
    let mut b = Dataset::builder();
    for j in 0..60 {
        let col: Vec<f32> = match x.get(j) {
            Some(known) => known.clone(),
            None => (0..n).map(|i| uniform(10, i, 20 + j as u32)).collect(),
        };
        b = b.numeric(format!("x{j}"), col);
    }
    let train = b
        .categorical("colour", cat, LEVELS.map(String::from).to_vec())
        .label(s)
        .build()
        .unwrap();
    for method in ["basic", "intermediate"] {
        let mut p = params(ObjectiveKind::SquaredError, "depthwise", method);
        p.max_depth = 7;
        p.num_rounds = 4;
        p.set("max_bin", "1024").unwrap();
        let one = Booster::train(&p, &train, &[]).unwrap();
        for workers in [2, 3] {
            let run = RunOptions {
                workers,
                threads: 1,
                ..Default::default()
            };
            let b = Booster::train_with(&p, &run, &train, &[], &mut Quiet).unwrap();
            assert!(
                b.to_json() == one.to_json(),
                "{method}: {workers} workers differ"
            );
        }
    }
}

#[test]
fn bad_constraints_are_errors_naming_the_parameter_and_the_feature() {
    let train = training(ObjectiveKind::SquaredError, 300, 11);
    let err = |k: &str, v: &str| {
        let mut p = params(ObjectiveKind::SquaredError, "depthwise", "basic");
        // Booster::train checks the parameters before any work
        p.set(k, v)
            .and_then(|_| Booster::train(&p, &train, &[]).map(|_| ()))
            .unwrap_err()
            .to_string()
    };
    let e = err("monotone_constraints", r#"{"colour": 1}"#);
    assert!(
        e.contains("monotone_constraints") && e.contains("colour") && e.contains("categorical"),
        "{e}"
    );
    let e = err("monotone_constraints", "(0,0,0,0,-1)");
    assert!(e.contains("colour"), "{e}");
    let e = err("monotone_constraints", r#"{"x9": 1}"#);
    assert!(
        e.contains("monotone_constraints") && e.contains("x9"),
        "{e}"
    );
    let e = err("monotone_constraints", "(1,0,3)");
    assert!(e.contains("monotone_constraints") && e.contains('3'), "{e}");
    let e = err("monotone_constraints_method", "advanced");
    assert!(
        e.contains("monotone_constraints_method") && e.contains("advanced"),
        "{e}"
    );
    let e = err("interaction_constraints", r#"[["x0", "x7"]]"#);
    assert!(
        e.contains("interaction_constraints") && e.contains("x7"),
        "{e}"
    );
    let e = err("feature_weights", "1,2");
    assert!(e.contains("feature_weights"), "{e}");
    let e = err("colsample_bynode", "0");
    assert!(e.contains("colsample_bynode"), "{e}");
}

#[test]
fn constrained_models_export_to_xgboost_and_lightgbm() {
    let train = training(ObjectiveKind::SquaredError, 600, 12);
    let b = Booster::train(&everything("lossguide", "intermediate"), &train, &[]).unwrap();
    for format in [
        sapwood::ExportFormat::XGBoost,
        sapwood::ExportFormat::LightGBM,
    ] {
        let text = b.export_string(format).unwrap();
        assert!(!text.is_empty());
    }
}
