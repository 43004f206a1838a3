//! Training that starts from somewhere: a saved model continued (`Booster::train_from_model`,
//! XGBoost's `xgb_model`) and rows' own base margins (`Dataset::set_base_margin`, XGBoost's
//! `base_margin`, LightGBM's `init_score`).

use sapwood::{
    Booster, Dataset, ObjectiveKind, Output, Params, PredictOptions, Quantisation, Quiet,
    RunOptions,
};

const N: usize = 1_500;

/// Three numeric features, one with missing values, and a label of `objective`'s kind;
/// `shift` moves the features (data the model was not trained on).
fn data(objective: ObjectiveKind, n: usize, shift: f32) -> Dataset<'static> {
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 37) % 101) as f32 / 101.0 + shift)
        .collect();
    let z: Vec<f32> = (0..n)
        .map(|i| {
            if i % 11 == 0 {
                f32::NAN
            } else {
                ((i * 13) % 17) as f32
            }
        })
        .collect();
    let w: Vec<f32> = (0..n)
        .map(|i| ((i * 7) % 23) as f32 - 11.0 + shift)
        .collect();
    let y: Vec<f32> = (0..n)
        .map(|i| {
            let s = x[i] * 2.0 + (z[i].is_nan() as u8 as f32) + w[i] * 0.05;
            match objective {
                ObjectiveKind::Softprob => ((s * 1.3) as usize % 3) as f32,
                ObjectiveKind::Logistic => ((s + (i % 5) as f32 * 0.2) > 1.6) as u8 as f32,
                _ => s + (i % 7) as f32 * 0.1,
            }
        })
        .collect();
    Dataset::builder()
        .numeric("x", x)
        .numeric("z", z)
        .numeric("w", w)
        .label(y)
        .build()
        .unwrap()
}

fn params(objective: ObjectiveKind, rounds: usize, quantisation: Quantisation) -> Params {
    Params {
        objective,
        num_rounds: rounds,
        learning_rate: 0.2,
        max_depth: 4,
        subsample: 0.8,
        colsample_bytree: 0.8,
        quantisation,
        seed: 7,
        ..Default::default()
    }
}

fn run(workers: usize) -> RunOptions {
    RunOptions {
        workers,
        ..Default::default()
    }
}

#[test]
fn fifty_rounds_continued_by_fifty_save_the_bytes_of_a_hundred() {
    for objective in [ObjectiveKind::Logistic, ObjectiveKind::Softprob] {
        for q in [Quantisation::Exact, Quantisation::Bits(8)] {
            let train = data(objective, N, 0.0);
            let once = Booster::train(&params(objective, 100, q), &train, &[]).unwrap();
            let first = Booster::train(&params(objective, 50, q), &train, &[]).unwrap();
            // through a file, as a user continues a saved model
            let first = Booster::from_json(&first.to_json()).unwrap();
            for workers in [1, 3] {
                let more = Booster::train_from_model(
                    &params(objective, 50, q),
                    &run(workers),
                    &first,
                    &train,
                    &[],
                    &mut Quiet,
                )
                .unwrap();
                assert_eq!(more.num_rounds(), 100);
                assert!(
                    more.to_json() == once.to_json(),
                    "{objective} {q:?}, {workers} workers: 50 + 50 rounds differ from 100"
                );
            }
        }
    }
}

#[test]
fn a_continued_model_bins_new_data_with_its_own_cuts() {
    let objective = ObjectiveKind::SquaredError;
    let q = Quantisation::Exact;
    let first = Booster::train(&params(objective, 10, q), &data(objective, N, 0.0), &[]).unwrap();
    // shifted features and fewer rows: cuts of their own would differ
    let other = data(objective, 700, 0.75);
    let fresh = Booster::train(&params(objective, 10, q), &other, &[]).unwrap();
    assert_ne!(fresh.model().cuts, first.model().cuts);
    let more = Booster::train_from_model(
        &params(objective, 5, q),
        &RunOptions::default(),
        &first,
        &other,
        &[("other", &other)],
        &mut Quiet,
    )
    .unwrap();
    assert_eq!(more.model().cuts, first.model().cuts);
    assert_eq!(more.model().base_margin, first.model().base_margin);
    assert_eq!(more.num_trees(), 15);
    assert_eq!(more.model().trees[..10], first.model().trees[..]);
    // the history holds the added rounds, which lower the error on the new data
    assert_eq!(more.history().len(), 5);
    let before = first
        .predict_with(
            &other,
            PredictOptions {
                output: Output::Margin,
                ..Default::default()
            },
        )
        .unwrap();
    let labels = match other.label().unwrap() {
        sapwood::Label::Values(v) => v.clone(),
        _ => unreachable!(),
    };
    let rmse = |p: &[f32]| {
        (p.iter()
            .zip(&labels)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum::<f64>()
            / p.len() as f64)
            .sqrt()
    };
    let after = more.predict(&other).unwrap();
    assert!(rmse(&after.values) < rmse(&before.values));
}

#[test]
fn continuing_with_another_loss_or_other_features_is_an_error_naming_them() {
    let q = Quantisation::Exact;
    let train = data(ObjectiveKind::Logistic, N, 0.0);
    let first = Booster::train(&params(ObjectiveKind::Logistic, 5, q), &train, &[]).unwrap();
    let continue_with = |p: &Params, d: &Dataset<'_>| {
        Booster::train_from_model(p, &RunOptions::default(), &first, d, &[], &mut Quiet)
            .unwrap_err()
            .to_string()
    };
    let e = continue_with(&params(ObjectiveKind::SquaredError, 5, q), &train);
    assert!(
        e.contains("objective") && e.contains("binary:logistic"),
        "{e}"
    );
    let e = continue_with(
        &Params {
            num_class: Some(3),
            objective: ObjectiveKind::Logistic,
            ..params(ObjectiveKind::Logistic, 5, q)
        },
        &train,
    );
    assert!(e.contains("num_class"), "{e}");
    let e = continue_with(
        &Params {
            base_score: Some(0.3),
            ..params(ObjectiveKind::Logistic, 5, q)
        },
        &train,
    );
    assert!(e.contains("base_score"), "{e}");
    let no_z = Dataset::builder()
        .numeric("x", vec![0.5f32; 10])
        .numeric("w", vec![1.0f32; 10])
        .label(vec![0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
        .build()
        .unwrap();
    let e = continue_with(&params(ObjectiveKind::Logistic, 5, q), &no_z);
    assert!(e.contains("`z`") && e.contains("model to continue"), "{e}");

    let multi = data(ObjectiveKind::Softprob, N, 0.0);
    let three = Booster::train(&params(ObjectiveKind::Softprob, 3, q), &multi, &[]).unwrap();
    let e = Booster::train_from_model(
        &Params {
            num_class: Some(4),
            ..params(ObjectiveKind::Softprob, 3, q)
        },
        &RunOptions::default(),
        &three,
        &multi,
        &[],
        &mut Quiet,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("num_class") && e.contains('4') && e.contains('3'),
        "{e}"
    );
}

fn with_margin(mut d: Dataset<'static>, margins: Vec<f32>) -> Dataset<'static> {
    d.set_base_margin(Some(margins)).unwrap();
    d
}

fn margins_of(b: &Booster, d: &Dataset<'_>) -> Vec<f32> {
    b.predict_with(
        d,
        PredictOptions {
            output: Output::Margin,
            ..Default::default()
        },
    )
    .unwrap()
    .values
}

/// Without sampling and with exact gradients nothing depends on the tree's index, so
/// boosting from another model's margins grows the trees that model's continuation grows.
#[test]
fn training_from_a_models_margins_grows_its_continuations_trees() {
    for objective in [ObjectiveKind::SquaredError, ObjectiveKind::Softprob] {
        let p = |rounds| Params {
            subsample: 1.0,
            colsample_bytree: 1.0,
            ..params(objective, rounds, Quantisation::Exact)
        };
        let train = data(objective, N, 0.0);
        let first = Booster::train(&p(20), &train, &[]).unwrap();
        let once = Booster::train(&p(30), &train, &[]).unwrap();
        let start = margins_of(&first, &train);
        let from_margins = with_margin(train.clone(), start.clone());
        for workers in [1, 2, 4] {
            let rest =
                Booster::train_with(&p(10), &run(workers), &from_margins, &[], &mut Quiet).unwrap();
            let k = rest.model().groups;
            assert_eq!(
                rest.model().trees[..],
                once.model().trees[20 * k..],
                "{objective}, {workers} workers"
            );
            // the model's own base margin is still estimated from the labels and saved
            assert_eq!(rest.model().base_margin, once.model().base_margin);
            // predicting from the same base margin gives the longer model's margins, bit
            // for bit; without one, the model's base margin is where trees add up
            assert_eq!(margins_of(&rest, &from_margins), margins_of(&once, &train));
            assert_ne!(margins_of(&rest, &train), margins_of(&once, &train));
        }
    }
}

#[test]
fn base_margins_give_the_same_model_for_one_to_four_workers() {
    let objective = ObjectiveKind::Softprob;
    let train = data(objective, N, 0.0);
    let margins: Vec<f32> = (0..N * 3)
        .map(|i| ((i * 29) % 41) as f32 / 41.0 - 0.5)
        .collect();
    let train = with_margin(train, margins);
    let p = params(objective, 8, Quantisation::Bits(8));
    let models: Vec<String> = (1..=4)
        .map(|w| {
            Booster::train_with(&p, &run(w), &train, &[], &mut Quiet)
                .unwrap()
                .to_json()
        })
        .collect();
    for (w, m) in models.iter().enumerate() {
        assert!(m == &models[0], "{} workers differ from one", w + 1);
    }
    let plain = Booster::train(&p, &data(objective, N, 0.0), &[]).unwrap();
    assert_ne!(plain.to_json(), models[0], "the base margins were not used");
}

#[test]
fn bad_base_margins_are_errors_naming_the_row() {
    let objective = ObjectiveKind::SquaredError;
    let mut m = vec![0.5f32; N];
    m[17] = f32::NAN;
    let mut d = data(objective, N, 0.0);
    let e = d.set_base_margin(Some(m)).unwrap_err().to_string();
    assert!(e.contains("base_margin") && e.contains("row 17"), "{e}");

    // two per row for a one-output objective
    let d = with_margin(data(objective, N, 0.0), vec![0.0; 2 * N]);
    let e = Booster::train(&params(objective, 2, Quantisation::Exact), &d, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("base_margin") && e.contains("1 per row"), "{e}");

    let e = Dataset::builder()
        .numeric("x", vec![1.0f32; 4])
        .base_margin(vec![0.0; 3])
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("base_margin") && e.contains("3 values for 4 rows"),
        "{e}"
    );

    let model = Booster::train(
        &params(objective, 2, Quantisation::Exact),
        &data(objective, N, 0.0),
        &[],
    )
    .unwrap();
    let e = model
        .predict(&with_margin(data(objective, N, 0.0), vec![0.0; 3 * N]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 per row"), "{e}");
}

#[test]
fn shap_bias_follows_the_rows_base_margin() {
    let objective = ObjectiveKind::SquaredError;
    let train = data(objective, 200, 0.0);
    let model = Booster::train(&params(objective, 5, Quantisation::Exact), &train, &[]).unwrap();
    let start: Vec<f32> = (0..200).map(|i| i as f32 * 0.01).collect();
    let d = with_margin(train, start);
    let contributions = model
        .predict_with(
            &d,
            PredictOptions {
                output: Output::Contributions,
                ..Default::default()
            },
        )
        .unwrap();
    let margins = margins_of(&model, &d);
    for (i, m) in margins.iter().enumerate() {
        let sum: f32 = contributions.row(i).iter().sum();
        assert!((sum - m).abs() < 1e-4, "row {i}: {sum} vs {m}");
    }
}

/// An evaluation set with its own base margins is evaluated from them, as XGBoost evaluates
/// a `DMatrix` with `base_margin`: the metric after every round equals the metric of the
/// predictions made from the same base margins.
#[test]
fn evaluation_sets_start_from_their_own_base_margins() {
    let objective = ObjectiveKind::SquaredError;
    let train = data(objective, N, 0.0);
    let valid = data(objective, 400, 0.3);
    let sapwood::Label::Values(y) = valid.label().unwrap().clone() else {
        panic!()
    };
    // a start far from the model's base margin, so that using it shows in the metric
    let start: Vec<f32> = (0..valid.n_rows()).map(|i| (i % 5) as f32 - 2.0).collect();
    let valid_from = with_margin(valid.clone(), start);
    let p = params(objective, 5, Quantisation::Exact);
    let b = Booster::train(&p, &train, &[("plain", &valid), ("from", &valid_from)]).unwrap();
    let rmse = |m: &[f32]| {
        (m.iter()
            .zip(&y)
            .map(|(p, y)| ((p - y) as f64).powi(2))
            .sum::<f64>()
            / y.len() as f64)
            .sqrt()
    };
    let last = b.history().last().unwrap();
    let (plain, from) = (last[0].value, last[1].value);
    assert!(
        (plain - rmse(&margins_of(&b, &valid))).abs() < 1e-7 * plain,
        "{plain}"
    );
    assert!(
        (from - rmse(&margins_of(&b, &valid_from))).abs() < 1e-7 * from,
        "{from}"
    );
    assert!(
        (plain - from).abs() > 0.1,
        "the base margins made no difference"
    );
    // a base margin of the wrong length is an error naming the set
    let short = with_margin(valid.clone(), vec![0.0; valid.n_rows()]);
    let multi = params(ObjectiveKind::Softprob, 2, Quantisation::Exact);
    let e = Booster::train(
        &multi,
        &data(ObjectiveKind::Softprob, N, 0.0),
        &[("short", &short)],
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(e.contains("short") || e.contains("base margin"), "{e}");
}
