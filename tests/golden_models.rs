//! Golden model files: models written by an earlier version keep loading, re-save to the same
//! bytes and predict the same values; training the same job today writes the same bytes.
//!
//! `tests/golden/models/<case>.json` is the model and `<case>.pred.json` its predictions on
//! the dataset's test split. They were written by the version that introduced them; a change
//! that alters a model's bytes on purpose must say so and rewrite them with
//! `SAPWOOD_WRITE_GOLDEN=1 cargo test --release -p sapwood-tests --test golden_models`.

use std::path::PathBuf;

use sapwood::{Booster, Params, PredictOptions};
use sapwood_tests::{bundled, repo_root, Bundled};

/// A golden case: file name, bundled dataset, parameters as (key, value).
type Case = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// The categorical defaults of the version that wrote the golden files (`max_cat_threshold`
/// 32, `cat_smooth` 0): the defaults changed since (high-cardinality levels are now
/// shrunk), and the golden jobs pin the old ones so that the files keep checking that
/// training writes the same bytes as then.
const PIN_THRESHOLD: (&str, &str) = ("max_cat_threshold", "32");
/// See [`PIN_THRESHOLD`].
const PIN_SMOOTH: (&str, &str) = ("cat_smooth", "0");
/// The binning of categorical features then: levels capped by `max_bin` (written as no
/// `max_cat_bin` at all), a bin for a level seen once.
const PIN_CAT_BIN: (&str, &str) = ("max_cat_bin", "0");
/// See [`PIN_CAT_BIN`].
const PIN_CAT_COUNT: (&str, &str) = ("min_category_count", "1");
/// XGBoost's learning rate, Sapwood's default then.
const PIN_RATE: (&str, &str) = ("learning_rate", "0.3");
/// The binning of numeric features then: bins of balanced weight, with no bin of its own
/// for a value many rows share.
const PIN_HEAVY: (&str, &str) = ("heavy_value_bins", "false");
/// XGBoost's softmax hessian, the default then.
const PIN_HESSIAN: (&str, &str) = ("multiclass_hessian", "xgboost");
/// XGBoost's bound on Poisson leaves, Sapwood's then.
const PIN_POISSON: (&str, &str) = ("poisson_leaf_bound", "0.7");
/// Numeric bins then: one for each distinct value while they fit, as XGBoost bins.
const PIN_DATA_IN_BIN: (&str, &str) = ("min_data_in_bin", "1");
/// The noise of categorical levels fitted from the levels alone, the only estimate then
/// (with `cat_smooth` 0 nothing is estimated; pinned so that the file has no `cat_noise`).
const PIN_NOISE: (&str, &str) = ("cat_noise", "fitted");
/// The pins alone.
const PINNED: &[(&str, &str)] = &[
    PIN_THRESHOLD,
    PIN_NOISE,
    PIN_SMOOTH,
    PIN_CAT_BIN,
    PIN_CAT_COUNT,
    PIN_RATE,
    PIN_HEAVY,
    PIN_HESSIAN,
    PIN_POISSON,
    PIN_DATA_IN_BIN,
];

/// The golden cases.
const CASES: &[Case] = &[
    ("breast_cancer_depthwise", "breast_cancer", PINNED),
    (
        "diabetes_lossguide_l1_subsample",
        "diabetes",
        &[
            PIN_THRESHOLD,
            PIN_NOISE,
            PIN_SMOOTH,
            PIN_CAT_BIN,
            PIN_CAT_COUNT,
            PIN_RATE,
            PIN_HEAVY,
            PIN_HESSIAN,
            PIN_POISSON,
            PIN_DATA_IN_BIN,
            ("grow_policy", "lossguide"),
            ("max_leaves", "12"),
            ("max_depth", "0"),
            ("alpha", "0.5"),
            ("subsample", "0.8"),
            ("colsample_bytree", "0.7"),
            ("seed", "5"),
        ],
    ),
    (
        "penguins_softprob_categorical",
        "penguins",
        &[
            PIN_THRESHOLD,
            PIN_NOISE,
            PIN_SMOOTH,
            PIN_CAT_BIN,
            PIN_CAT_COUNT,
            PIN_RATE,
            PIN_HEAVY,
            PIN_HESSIAN,
            PIN_POISSON,
            PIN_DATA_IN_BIN,
            ("max_cat_to_onehot", "2"),
            ("learning_rate", "0.2"),
        ],
    ),
    (
        "chile_binary_categorical_gradbits8",
        "chile",
        &[
            PIN_THRESHOLD,
            PIN_NOISE,
            PIN_SMOOTH,
            PIN_CAT_BIN,
            PIN_CAT_COUNT,
            PIN_RATE,
            PIN_HEAVY,
            PIN_HESSIAN,
            PIN_POISSON,
            ("grad_bits", "8"),
            ("max_depth", "5"),
            ("min_data_in_bin", "3"),
        ],
    ),
    (
        "txhousing_regression_categorical_maxbin",
        "txhousing",
        &[
            PIN_THRESHOLD,
            PIN_NOISE,
            PIN_SMOOTH,
            PIN_CAT_BIN,
            PIN_CAT_COUNT,
            PIN_RATE,
            PIN_HEAVY,
            PIN_HESSIAN,
            PIN_POISSON,
            PIN_DATA_IN_BIN,
            ("max_bin", "32"),
            ("min_child_weight", "3"),
            ("gamma", "0.1"),
        ],
    ),
];

fn golden_dir() -> PathBuf {
    repo_root().join("tests/golden/models")
}

fn params_of(set: &Bundled, pairs: &[(&str, &str)]) -> Params {
    let mut p = Params {
        objective: set.objective(),
        num_rounds: 20,
        ..Default::default()
    };
    for (k, v) in pairs {
        p.set(k, v).unwrap();
    }
    p
}

fn predictions(b: &Booster, data: &sapwood::Dataset<'_>) -> Vec<f32> {
    let mut v = b.predict(data).unwrap().values;
    let margins = b
        .predict_with(
            data,
            PredictOptions {
                output: sapwood::Output::Margin,
                ..Default::default()
            },
        )
        .unwrap()
        .values;
    v.extend(margins);
    v
}

fn writing() -> bool {
    std::env::var_os("SAPWOOD_WRITE_GOLDEN").is_some()
}

#[test]
fn training_today_writes_the_golden_model_bytes() {
    for (case, data, pairs) in CASES {
        let set = bundled(data);
        let b = Booster::train(&params_of(&set, pairs), &set.train, &[]).unwrap();
        let text = b.to_json();
        let path = golden_dir().join(format!("{case}.json"));
        if writing() {
            std::fs::create_dir_all(golden_dir()).unwrap();
            std::fs::write(&path, &text).unwrap();
            let pred = serde_json::to_string(&predictions(&b, &set.test)).unwrap();
            std::fs::write(golden_dir().join(format!("{case}.pred.json")), pred).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap();
        if let Some(i) = text.bytes().zip(want.bytes()).position(|(a, b)| a != b) {
            panic!(
                "{case}: the model trained today differs from the golden file at byte {i}: \
                 {:?} vs {:?}",
                &text[i.saturating_sub(60)..(i + 40).min(text.len())],
                &want[i.saturating_sub(60)..(i + 40).min(want.len())]
            );
        }
        assert_eq!(text.len(), want.len(), "{case}: length differs");
    }
}

#[test]
fn golden_models_load_resave_and_predict_as_when_written() {
    if writing() {
        return;
    }
    for (case, data, _) in CASES {
        let set = bundled(data);
        let text = std::fs::read_to_string(golden_dir().join(format!("{case}.json"))).unwrap();
        let b = Booster::from_json(&text).unwrap();
        assert_eq!(b.to_json(), text, "{case}: re-saved bytes differ");
        let want: Vec<f32> = serde_json::from_str(
            &std::fs::read_to_string(golden_dir().join(format!("{case}.pred.json"))).unwrap(),
        )
        .unwrap();
        let got = predictions(&b, &set.test);
        assert_eq!(got.len(), want.len(), "{case}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{case}: prediction {i}: {g} vs {w}"
            );
        }
    }
}
