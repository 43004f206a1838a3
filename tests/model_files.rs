//! Model files: round trips, atomic saves, and hostile or truncated input.

use sapwood::{Booster, ObjectiveKind, Params};
use sapwood_tests::synthetic;

fn trained(objective: ObjectiveKind, task: &str) -> (Booster, sapwood::Dataset<'static>) {
    let d = synthetic(1_500, task, 11);
    let params = Params {
        objective,
        num_rounds: 8,
        ..Default::default()
    };
    (Booster::train(&params, &d, &[]).unwrap(), d)
}

#[test]
fn json_round_trip_gives_identical_predictions() {
    for (objective, task) in [
        (ObjectiveKind::SquaredError, "regression"),
        (ObjectiveKind::Logistic, "binary"),
        (ObjectiveKind::Softprob, "multiclass"),
    ] {
        let (b, d) = trained(objective, task);
        let dir = std::env::temp_dir().join(format!(
            "sapwood-model-{}-{objective:?}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.json");
        b.save(&path).unwrap();
        let loaded = Booster::load(&path).unwrap();
        assert_eq!(loaded.predict(&d).unwrap(), b.predict(&d).unwrap());
        let (a, b2) = (loaded.to_json(), b.to_json());
        if let Some(i) = a.bytes().zip(b2.bytes()).position(|(x, y)| x != y) {
            panic!(
                "re-saved model differs at byte {i}: {} vs {}",
                &a[i.saturating_sub(80)..(i + 40).min(a.len())],
                &b2[i.saturating_sub(80)..(i + 40).min(b2.len())]
            );
        }
        assert_eq!(a.len(), b2.len());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file is left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn saving_into_a_missing_directory_fails_cleanly() {
    let (b, _) = trained(ObjectiveKind::SquaredError, "regression");
    let e = b
        .save("/nonexistent-sapwood-dir/m.json")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent-sapwood-dir/m.json"), "{e}");
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let (b, _) = trained(ObjectiveKind::Softprob, "multiclass");
    let json = b.to_json();
    let step = (json.len() / 2000).max(1);
    for cut in (0..json.len()).step_by(step) {
        if json.is_char_boundary(cut) {
            assert!(
                Booster::from_json(&json[..cut]).is_err(),
                "prefix of {cut} bytes was accepted"
            );
        }
    }
}

fn mutate(json: &str, f: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    f(&mut v);
    v.to_string()
}

#[test]
fn hostile_models_are_refused_with_a_reason() {
    let (b, _) = trained(ObjectiveKind::Logistic, "binary");
    let json = b.to_json();
    let first_split = |v: &serde_json::Value| {
        v["trees"][0]["left"]
            .as_array()
            .unwrap()
            .iter()
            .position(|x| x.as_i64() != Some(-1))
            .unwrap()
    };
    let cases: Vec<(&str, String)> = vec![
        ("version", mutate(&json, |v| v["version"] = 99.into())),
        ("format", mutate(&json, |v| v["format"] = "xgboost".into())),
        (
            "outside",
            mutate(&json, |v| {
                let i = first_split(v);
                v["trees"][0]["left"][i] = 100_000.into();
            }),
        ),
        (
            "outside",
            mutate(&json, |v| {
                let i = first_split(v);
                v["trees"][0]["left"][i] = (i as i64).into();
            }),
        ),
        (
            "feature",
            mutate(&json, |v| {
                let i = first_split(v);
                v["trees"][0]["feature"][i] = 999.into();
            }),
        ),
        (
            "bin",
            mutate(&json, |v| {
                let i = first_split(v);
                v["trees"][0]["split_bin"][i] = 60_000.into();
            }),
        ),
        (
            "entries",
            mutate(&json, |v| {
                v["trees"][0]["value"].as_array_mut().unwrap().pop();
            }),
        ),
        (
            "expected f32",
            mutate(&json, |v| v["trees"][0]["value"][0] = "nan".into()),
        ),
        (
            "base_margin",
            mutate(&json, |v| v["base_margin"] = serde_json::json!([0.0, 1.0])),
        ),
        (
            "increasing",
            mutate(&json, |v| {
                v["features"][0]["thresholds"] = serde_json::json!([2.0, 1.0])
            }),
        ),
        (
            "group",
            mutate(&json, |v| v["trees"][1]["group"] = 3.into()),
        ),
        ("not a Sapwood model", "{\"hello\": 1}".to_string()),
        ("not a Sapwood model", "\u{0}\u{1}binary junk".to_string()),
        ("not a Sapwood model", "[".repeat(10_000)),
    ];
    for (want, text) in cases {
        let e = Booster::from_json(&text).unwrap_err().to_string();
        assert!(e.contains(want), "expected `{want}` in: {e}");
    }
}

#[test]
fn a_missing_file_names_the_path() {
    let e = Booster::load("/no/such/model.json")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/no/such/model.json"), "{e}");
}

/// A regression model whose first tree is a chain `depth` splits deep (each split's left
/// child a leaf), built on a trained model's features.
fn deep_model(depth: usize) -> String {
    let (b, _) = trained(ObjectiveKind::SquaredError, "regression");
    mutate(&b.to_json(), |v| {
        let f = v["features"]
            .as_array()
            .unwrap()
            .iter()
            .position(|f| f["thresholds"].as_array().is_some_and(|t| !t.is_empty()))
            .unwrap();
        let n = 2 * depth + 1;
        let (mut left, mut right, mut feature) = (vec![-1i64; n], vec![-1i64; n], vec![-1i64; n]);
        let mut split_bin = vec![0u32; n];
        for j in 0..depth {
            let i = 2 * j;
            left[i] = (i + 1) as i64;
            right[i] = (i + 2) as i64;
            feature[i] = f as i64;
            split_bin[i] = 1;
        }
        v["trees"][0] = serde_json::json!({
            "group": 0, "left": left, "right": right, "feature": feature,
            "split_bin": split_bin, "default_left": vec![false; n], "categories": [],
            "value": vec![0.5f32; n], "gain": vec![1.0f64; n], "cover": vec![1.0f64; n],
        });
    })
}

#[test]
fn a_30000_deep_tree_loads_measures_and_predicts_without_recursion() {
    let json = deep_model(30_000);
    // on a small stack, as a deep recursion would overflow it
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let b = Booster::from_json(&json).unwrap();
            let t = &b.model().trees[0];
            (
                t.depth(),
                t.num_leaves(),
                b.feature_importance(sapwood::Importance::Weight),
            )
        })
        .unwrap();
    let (depth, leaves, splits) = handle.join().expect("no stack overflow");
    assert_eq!(depth, 30_000);
    assert_eq!(leaves, 30_001);
    assert!(splits.values().sum::<f64>() >= 30_000.0);
    let (_, d) = trained(ObjectiveKind::SquaredError, "regression");
    let b = Booster::from_json(&deep_model(30_000)).unwrap();
    assert_eq!(b.predict(&d).unwrap().n_rows(), d.n_rows());
}

#[test]
fn unsorted_or_repeated_classes_and_non_finite_values_are_refused() {
    let (b, _) = trained(ObjectiveKind::Softprob, "multiclass");
    let json = b.to_json();
    let k = b.model().groups;
    for classes in [(0..k as i64).rev().collect::<Vec<_>>(), vec![0; k]] {
        let bad = mutate(&json, |v| v["classes"] = serde_json::json!(classes));
        let e = Booster::from_json(&bad).unwrap_err().to_string();
        assert!(e.contains("sorted and distinct"), "{e}");
    }
    // a model holding NaN is never written (JSON would say `null`, which nothing reads)
    let mut m = b.model().clone();
    assert!(m.check_finite().is_ok());
    m.trees[1].nodes[0].value = f32::NAN;
    let e = m.check_finite().unwrap_err().to_string();
    assert!(e.contains("tree 1") && e.contains("node 0"), "{e}");
}
