//! Every metric against independent references: values computed once by scikit-learn and
//! SciPy (`tests/metric_refs/make_refs.py`, stored in `tests/metric_refs/refs.json`) on
//! small fixed inputs, with and without weights, through the public `Metric` API only.

use std::path::PathBuf;
use std::str::FromStr;

use sapwood_core::metric::Metric;

/// Relative agreement: f64 sums in another order, and libraries that compute a log or a
/// power another way, differ in the last digits only.
const RELATIVE: f64 = 1e-9;

fn refs() -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/metric_refs/refs.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn f32s(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| {
            let x = x.as_f64().expect("a number");
            // the script writes f32 values: reading them back must be exact
            assert_eq!(x as f32 as f64, x, "{x} is not an f32");
            x as f32
        })
        .collect()
}

#[test]
fn every_metric_matches_scikit_learn_and_scipy() {
    let refs = refs();
    let mut checked = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for case in refs["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().unwrap();
        let groups = case["groups"].as_u64().unwrap() as usize;
        let labels = f32s(&case["labels"]);
        let margins = f32s(&case["margins"]);
        let weights = (!case["weights"].is_null()).then(|| f32s(&case["weights"]));
        assert_eq!(margins.len(), labels.len() * groups, "{name}");
        for (metric_name, want) in case["expected"].as_object().unwrap() {
            let metric = Metric::from_str(metric_name)
                .unwrap_or_else(|e| panic!("{name}: {metric_name}: {e}"));
            let want = want.as_f64().unwrap();
            let got = metric.evaluate(&margins, groups, &labels, weights.as_deref());
            let ok = (got - want).abs() <= RELATIVE * want.abs().max(1e-3);
            println!("{name:>20} {metric_name:>20}: sapwood {got:.15} reference {want:.15}");
            if !ok {
                failures.push(format!(
                    "{name}: {metric_name}: sapwood {got} vs reference {want}"
                ));
            }
            checked.insert(metric.name());
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // every metric is covered, weighted and not
    let all = [
        "rmse",
        "rmsle",
        "mae",
        "mape",
        "mphe",
        "quantile",
        "poisson-nloglik",
        "gamma-nloglik",
        "gamma-deviance",
        "tweedie-nloglik",
        "logloss",
        "error",
        "auc",
        "aucpr",
        "mlogloss",
        "merror",
    ];
    for m in all {
        assert!(checked.contains(m), "no reference for {m}");
    }
}
