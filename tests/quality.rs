//! Test-set quality against XGBoost `hist` with matched parameters (depth 6, 256 bins,
//! learning rate 0.1, 200 rounds), from the golden file made by `datasets/make_golden.py`.
//!
//! Tolerances are fractions of XGBoost's *error* (1 − AUC, RMSE, mlogloss), not of the
//! metric: 0.5% of an AUC of 0.999 would allow five times XGBoost's error. Exact and 8-bit
//! gradients are held to the same bar, except 8-bit on `breast_cancer` (see its test).

use sapwood::{Booster, Metric, Params, Quantisation};
use sapwood_tests::{bundled, repo_root};

/// The error a metric value stands for: 1 − AUC for AUC, the metric itself otherwise.
fn error_of(metric: Metric, value: f64) -> f64 {
    if metric.higher_is_better() {
        1.0 - value
    } else {
        value
    }
}

/// Allowed excess error over XGBoost's, as a fraction of XGBoost's error. 1 − AUC on test
/// sets of 113 to 4,000 rows moves by whole misordered pairs, so it gets a wider bar
/// (`synthetic` measures 1.022 exact, 1.023 8-bit) than RMSE and mlogloss (at most 1.0055).
fn tolerance(metric: Metric) -> f64 {
    match metric {
        Metric::Auc => 0.025,
        _ => 0.01,
    }
}

fn golden() -> serde_json::Value {
    let p = repo_root().join("tests/golden/quality.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn score(name: &str, quantisation: Quantisation) -> (Metric, f64, f64) {
    let d = bundled(name);
    let metric = match d.task.as_str() {
        "binary" => Metric::Auc,
        "regression" => Metric::Rmse,
        _ => Metric::MLogLoss,
    };
    let params = Params {
        objective: d.objective(),
        max_depth: 6,
        max_bin: 256,
        learning_rate: 0.1,
        num_rounds: 200,
        lambda: 1.0,
        min_child_weight: 1.0,
        // XGBoost's binning: a bin for every distinct value while they fit (on these small
        // sets the default's 3 rows a bin moves diabetes' 8-bit RMSE by 2%)
        min_data_in_bin: 1,
        quantisation,
        eval_metric: vec![metric],
        ..Default::default()
    };
    let b = Booster::train(&params, &d.train, &[("test", &d.test)]).unwrap();
    let ours = b.history().last().unwrap()[0].value;
    let theirs = golden()["datasets"][name]["xgboost"][metric.name()]
        .as_f64()
        .unwrap();
    (metric, ours, theirs)
}

fn check(name: &str, quantisation: Quantisation) {
    check_within(name, quantisation, None);
}

/// Sapwood's test-set error is at most `max_ratio` times XGBoost's (by default, 1 plus the
/// metric's tolerance).
fn check_within(name: &str, quantisation: Quantisation, max_ratio: Option<f64>) {
    let (metric, ours, theirs) = score(name, quantisation);
    let max_ratio = max_ratio.unwrap_or(1.0 + tolerance(metric));
    let (our_error, their_error) = (error_of(metric, ours), error_of(metric, theirs));
    let ratio = our_error / their_error;
    println!(
        "{name:>14} {quantisation:?}: {metric} sapwood {ours:.6} xgboost {theirs:.6} \
         error ratio {ratio:.4} (at most {max_ratio})"
    );
    assert!(
        our_error <= their_error * max_ratio,
        "{name} {quantisation:?}: {metric} {ours} vs XGBoost {theirs}: error {our_error:.6} is \
         {ratio:.4} times XGBoost's {their_error:.6}, above {max_ratio}"
    );
}

macro_rules! quality_tests {
    ($($test:ident: $name:literal,)*) => {
        mod exact {
            $(#[test] fn $test() { super::check($name, sapwood::Quantisation::Exact); })*
        }
        mod grad_bits_8 {
            $(#[test] fn $test() { super::check($name, sapwood::Quantisation::Bits(8)); })*
        }
    };
}

/// `breast_cancer`'s test set has 113 rows (about 3,000 positive-negative pairs), and
/// XGBoost's AUC misorders 3 of them (1 − AUC = 0.0010): a pair is a third of its error, so
/// a relative bar finer than a pair measures nothing. Sapwood is held to one pair more than
/// XGBoost (4 misordered, 1 − AUC = 0.0013, with exact and with 8-bit gradients alike; 8-bit
/// gradients misordered 6 when numeric bins were of balanced weight only).
const BREAST_CANCER_ONE_PAIR: f64 = 4.0 / 3.0 + 1e-6;

#[test]
fn breast_cancer_auc_within_one_pair() {
    check_within(
        "breast_cancer",
        Quantisation::Exact,
        Some(BREAST_CANCER_ONE_PAIR),
    );
}

#[test]
fn grad_bits_8_breast_cancer_auc_within_one_pair() {
    check_within(
        "breast_cancer",
        Quantisation::Bits(8),
        Some(BREAST_CANCER_ONE_PAIR),
    );
}

quality_tests! {
    chile_auc: "chile",
    synthetic_auc: "synthetic",
    diabetes_rmse: "diabetes",
    diamonds_rmse: "diamonds",
    txhousing_rmse: "txhousing",
    digits_mlogloss: "digits",
    penguins_mlogloss: "penguins",
}
