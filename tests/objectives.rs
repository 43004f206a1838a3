//! Every loss beyond the first three: trains, learns, keeps the determinism contract across
//! workers and quantisation, and does what its definition says (quantile leaves, coverage,
//! class outputs, label domains).

use sapwood::{
    Booster, Checked, Dataset, Label, ObjectiveKind, Output, Params, PredictOptions, Quantisation,
    Quiet, RunOptions,
};
use sapwood_tests::{bundled, synthetic};

/// The synthetic regression task with labels mapped into `kind`'s domain.
fn data_for(kind: ObjectiveKind, n: usize, seed: u32) -> Dataset<'static> {
    let task = if kind.is_binary() {
        "binary"
    } else if kind.is_multiclass() {
        "multiclass"
    } else {
        "regression"
    };
    let d = synthetic(n, task, seed);
    let Some(Label::Values(y)) = d.label() else {
        panic!("numeric labels")
    };
    let y: Vec<f32> = match kind {
        // counts with a mean that grows with the signal
        ObjectiveKind::Poisson | ObjectiveKind::Tweedie => y
            .iter()
            .enumerate()
            .map(|(i, &s)| ((s + 1.5) * 2.0 + (i % 3) as f32).floor().max(0.0))
            .collect(),
        ObjectiveKind::Gamma => y.iter().map(|&s| (s * 0.8).exp()).collect(),
        _ => y.clone(),
    };
    Dataset::from_parts(d.features().clone(), Some(Label::Values(y)), None).unwrap()
}

const NEW_LOSSES: [ObjectiveKind; 9] = [
    ObjectiveKind::AbsoluteError,
    ObjectiveKind::QuantileError,
    ObjectiveKind::PseudoHuber,
    ObjectiveKind::Huber,
    ObjectiveKind::Poisson,
    ObjectiveKind::Tweedie,
    ObjectiveKind::Gamma,
    ObjectiveKind::LogitRaw,
    ObjectiveKind::Softmax,
];

fn params_for(objective: ObjectiveKind) -> Params {
    Params {
        objective,
        num_rounds: 8,
        // the rate these cases were written for (XGBoost's), not the default
        learning_rate: 0.3,
        max_depth: 4,
        subsample: 0.9,
        seed: 11,
        quantile_alpha: vec![0.8],
        huber_slope: 0.7,
        tweedie_variance_power: 1.4,
        ..Default::default()
    }
}

#[test]
fn every_loss_learns_and_saves_one_model_for_one_to_three_workers() {
    for objective in NEW_LOSSES {
        let d = data_for(objective, 2_501, 7);
        for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
            let params = Params {
                quantisation,
                ..params_for(objective)
            };
            let one = Booster::train(&params, &d, &[("train", &d)]).unwrap();
            let history = one.history();
            let (first, last) = (history[0][0].value, history[history.len() - 1][0].value);
            let better = if history[0][0].metric.higher_is_better() {
                last > first
            } else {
                last < first
            };
            assert!(
                better,
                "{objective} {quantisation:?}: {} went from {first} to {last}",
                history[0][0].metric
            );
            for workers in [2, 3] {
                let run = RunOptions {
                    workers,
                    threads: 1,
                    ..Default::default()
                };
                let b =
                    Booster::train_with(&params, &run, &d, &[("train", &d)], &mut Quiet).unwrap();
                assert_eq!(
                    b.run_record().workers(),
                    workers,
                    "{objective}: workers ran"
                );
                assert!(
                    b.to_json() == one.to_json(),
                    "{objective} {quantisation:?}: {workers} workers save another model"
                );
            }
        }
    }
}

/// The α-quantile of unweighted values as XGBoost defines it: sorted ascending, the value
/// at the 1-based position α·(n + 1), interpolated toward the next (the first value below
/// 1 / (n + 1), the last from n / (n + 1)).
fn interpolated_quantile(mut values: Vec<f32>, alpha: f64) -> f32 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len() as f64;
    if alpha <= 1.0 / (n + 1.0) {
        return values[0];
    }
    if alpha >= n / (n + 1.0) {
        return values[values.len() - 1];
    }
    let x = alpha * (n + 1.0);
    let k = x.floor() - 1.0;
    let (v0, v1) = (values[k as usize] as f64, values[k as usize + 1] as f64);
    (v0 + (x - 1.0 - k) * (v1 - v0)) as f32
}

#[test]
fn quantile_losses_set_each_leaf_to_the_quantile_of_its_residuals() {
    for (objective, alpha) in [
        (ObjectiveKind::AbsoluteError, 0.5),
        (ObjectiveKind::QuantileError, 0.8),
        (ObjectiveKind::QuantileError, 0.1),
    ] {
        let d = data_for(objective, 3_000, 3);
        let Some(Label::Values(y)) = d.label() else {
            panic!()
        };
        let params = Params {
            objective,
            quantile_alpha: vec![alpha],
            num_rounds: 1,
            learning_rate: 1.0,
            max_depth: 3,
            ..Default::default()
        };
        let run = RunOptions {
            workers: 3,
            ..Default::default()
        };
        let b = Booster::train_with(&params, &run, &d, &[], &mut Quiet).unwrap();
        let model = b.model();
        // the base margin is the α-quantile of the labels
        let base = model.base_margin[0];
        assert_eq!(
            base,
            interpolated_quantile(y.to_vec(), alpha),
            "{objective} base margin"
        );
        let leaves = b
            .predict_with(
                &d,
                PredictOptions {
                    output: Output::Leaf,
                    ..Default::default()
                },
            )
            .unwrap();
        let tree = &model.trees[0];
        let mut checked = 0;
        for (node, n) in tree.nodes.iter().enumerate() {
            if n.split.is_some() {
                continue;
            }
            let residuals: Vec<f32> = (0..y.len())
                .filter(|&i| leaves.values[i] as usize == node)
                .map(|i| y[i] - base)
                .collect();
            if residuals.is_empty() {
                continue;
            }
            assert_eq!(
                n.value,
                interpolated_quantile(residuals, alpha),
                "{objective} alpha {alpha}: leaf {node}"
            );
            checked += 1;
        }
        assert!(checked >= 4, "{objective}: only {checked} leaves");
    }
}

#[test]
fn quantile_regression_covers_its_alpha_on_txhousing() {
    let data = bundled("txhousing");
    let Some(Label::Values(y)) = data.train.label() else {
        panic!()
    };
    for alpha in [0.1, 0.5, 0.9] {
        let params = Params {
            objective: ObjectiveKind::QuantileError,
            quantile_alpha: vec![alpha],
            num_rounds: 200,
            learning_rate: 0.1,
            ..Default::default()
        };
        let b = Booster::train(&params, &data.train, &[]).unwrap();
        let p = b.predict(&data.train).unwrap();
        let below =
            y.iter().zip(&p.values).filter(|(y, p)| **y <= **p).count() as f64 / y.len() as f64;
        assert!(
            (below - alpha).abs() <= 0.01,
            "alpha {alpha}: {below} of the training labels lie at or below the prediction"
        );
    }
}

#[test]
fn softmax_predicts_the_class_softprob_ranks_first() {
    let d = data_for(ObjectiveKind::Softmax, 2_000, 5);
    let soft = Booster::train(&params_for(ObjectiveKind::Softprob), &d, &[]).unwrap();
    let hard = Booster::train(&params_for(ObjectiveKind::Softmax), &d, &[]).unwrap();
    let probs = soft.predict(&d).unwrap();
    let classes = hard.predict(&d).unwrap();
    assert_eq!(classes.per_row, 1);
    assert_eq!(probs.per_row, 3);
    for i in 0..d.n_rows() {
        assert_eq!(
            classes.values[i] as usize,
            sapwood::argmax(probs.row(i)),
            "row {i}"
        );
    }
    // the same trees: only the output differs
    assert_eq!(soft.model().trees, hard.model().trees);
}

#[test]
fn log_link_losses_predict_positive_means_close_to_the_labels() {
    for objective in [
        ObjectiveKind::Poisson,
        ObjectiveKind::Gamma,
        ObjectiveKind::Tweedie,
    ] {
        let d = data_for(objective, 3_000, 9);
        let Some(Label::Values(y)) = d.label() else {
            panic!()
        };
        let params = Params {
            num_rounds: 60,
            ..params_for(objective)
        };
        let b = Booster::train(&params, &d, &[]).unwrap();
        let p = b.predict(&d).unwrap();
        let margins = b
            .predict_with(
                &d,
                PredictOptions {
                    output: Output::Margin,
                    ..Default::default()
                },
            )
            .unwrap();
        for (m, v) in margins.values.iter().zip(&p.values) {
            assert!(
                (m.exp() - v).abs() <= 1e-5 * v,
                "{objective}: exp({m}) vs {v}"
            );
        }
        // the fitted means sum to about the labels' sum (the log link's score equation)
        let (sy, sp): (f64, f64) = (
            y.iter().map(|&v| v as f64).sum(),
            p.values.iter().map(|&v| v as f64).sum(),
        );
        assert!(
            (sp - sy).abs() <= 0.05 * sy,
            "{objective}: predictions sum to {sp}, labels to {sy}"
        );
    }
}

#[test]
fn poisson_leaves_take_their_step_bound_unless_max_delta_step_is_set() {
    // a few rows with counts a thousand times the others': unbounded, the leaves that
    // isolate them step by log(1000)-ish units of log-mean at once
    let d = data_for(ObjectiveKind::Poisson, 2_000, 3);
    let Some(Label::Values(y)) = d.label() else {
        panic!()
    };
    let y: Vec<f32> = y
        .iter()
        .enumerate()
        .map(|(i, &v)| if i % 97 == 0 { v * 1000.0 + 500.0 } else { v })
        .collect();
    let d = Dataset::from_parts(d.features().clone(), Some(Label::Values(y)), None).unwrap();
    let largest_step = |max_delta_step: f64, poisson_leaf_bound: f64| {
        let params = Params {
            objective: ObjectiveKind::Poisson,
            num_rounds: 10,
            max_depth: 6,
            min_child_weight: 0.0,
            learning_rate: 0.5,
            max_delta_step,
            poisson_leaf_bound,
            ..Default::default()
        };
        let b = Booster::train(&params, &d, &[]).unwrap();
        b.model()
            .trees
            .iter()
            .flat_map(|t| &t.nodes)
            .filter(|n| n.split.is_none())
            .map(|n| n.value.abs() as f64)
            .fold(0.0, f64::max)
    };
    let binds_at = |step: f64, bound: f64| (step - bound * 0.5).abs() <= 1e-6;
    // max_delta_step 0: the leaves are bounded by poisson_leaf_bound (2 by default),
    // shrunk by the learning rate
    let bound = Params::default().poisson_leaf_bound;
    assert_eq!(bound, 2.0);
    let default = largest_step(0.0, bound);
    assert!(binds_at(default, bound), "{default}");
    // XGBoost's 0.7, as models saved before the bound was a parameter
    let xgboost = largest_step(0.0, 0.7);
    assert!(binds_at(xgboost, 0.7), "{xgboost}");
    // a bound the user sets is the bound, whatever poisson_leaf_bound says
    let set = largest_step(3.0, 0.7);
    assert!(set > bound * 0.5 + 0.1 && set <= 3.0 * 0.5 + 1e-6, "{set}");
}

#[test]
fn labels_outside_a_loss_domain_are_errors_naming_the_row() {
    for (objective, bad) in [
        (ObjectiveKind::Poisson, -1.0f32),
        (ObjectiveKind::Tweedie, -0.5),
        (ObjectiveKind::Gamma, 0.0),
        (ObjectiveKind::LogitRaw, 2.0),
    ] {
        let d = data_for(objective, 100, 1);
        let Some(Label::Values(y)) = d.label() else {
            panic!()
        };
        let mut y = y.clone();
        y[17] = bad;
        let d = Dataset::from_parts(d.features().clone(), Some(Label::Values(y)), None).unwrap();
        let e = Booster::train(&params_for(objective), &d, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("row 17"), "{objective}: {e}");
    }
    let e = Checked::new(Params {
        quantile_alpha: vec![1.5],
        ..params_for(ObjectiveKind::QuantileError)
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("quantile_alpha"), "{e}");
}

/// A custom objective from outside the engine: squared error, written as a user would.
struct OutsideSquaredError {
    labels: Vec<f32>,
    poison_row: Option<usize>,
}

impl sapwood::TrainObserver for OutsideSquaredError {
    fn on_round(&mut self, _: &sapwood::RoundReport<'_>) -> sapwood::Control {
        sapwood::Control::Continue
    }
    fn has_custom_objective(&self) -> bool {
        true
    }
    fn gradients(
        &mut self,
        margins: &[f32],
        groups: usize,
    ) -> Option<sapwood::Result<Vec<[f32; 2]>>> {
        assert_eq!(groups, 1);
        let mut g: Vec<[f32; 2]> = margins
            .iter()
            .zip(&self.labels)
            .map(|(&m, &y)| [m - y, 1.0])
            .collect();
        if let Some(r) = self.poison_row {
            g[r][0] = f32::NAN;
        }
        Some(Ok(g))
    }
}

#[test]
fn a_custom_objective_goes_through_the_same_quantiser_as_the_built_in_one() {
    let d = data_for(ObjectiveKind::SquaredError, 2_000, 4);
    let Some(Label::Values(y)) = d.label() else {
        panic!()
    };
    for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
        let params = Params {
            quantisation,
            base_score: Some(0.0),
            ..params_for(ObjectiveKind::SquaredError)
        };
        let built_in = Booster::train(&params, &d, &[]).unwrap();
        let mut custom = OutsideSquaredError {
            labels: y.clone(),
            poison_row: None,
        };
        let outside =
            Booster::train_with(&params, &RunOptions::default(), &d, &[], &mut custom).unwrap();
        assert!(
            outside.to_json() == built_in.to_json(),
            "{quantisation:?}: the custom squared error grew other trees"
        );
    }
    let mut custom = OutsideSquaredError {
        labels: y.clone(),
        poison_row: None,
    };
    let two = RunOptions {
        workers: 2,
        ..Default::default()
    };
    let e = Booster::train_with(
        &params_for(ObjectiveKind::SquaredError),
        &two,
        &d,
        &[],
        &mut custom,
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("workers") && e.contains("custom objective"),
        "{e}"
    );
    let mut poisoned = OutsideSquaredError {
        labels: y.clone(),
        poison_row: Some(33),
    };
    let e = Booster::train_with(
        &params_for(ObjectiveKind::SquaredError),
        &RunOptions::default(),
        &d,
        &[],
        &mut poisoned,
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("row 33") && e.contains("custom objective"),
        "{e}"
    );
}

fn run_on(device: sapwood::Device, workers: usize) -> RunOptions {
    RunOptions {
        device,
        workers,
        threads: 1,
        ..Default::default()
    }
}

/// A model trained on another device must be the CPU's, byte for byte (the WGSL backend
/// runs on lavapipe in CI: a missing adapter fails there).
fn check_wgpu(params: &Params, d: &Dataset<'_>, cpu: &Booster, what: &str) {
    match Booster::train_with(
        params,
        &run_on(sapwood::Device::Wgpu, 1),
        d,
        &[],
        &mut Quiet,
    ) {
        Ok(b) => assert!(b.to_json() == cpu.to_json(), "{what}: wgpu differs"),
        Err(e) => assert!(
            std::env::var_os("SAPWOOD_REQUIRE_ADAPTER").is_none(),
            "{what}: wgpu failed: {e}"
        ),
    }
}

#[test]
fn a_list_of_quantiles_fits_one_output_per_alpha_each_the_single_alpha_model() {
    let data = bundled("txhousing");
    let alphas = [0.1, 0.5, 0.9];
    let params = |quantile_alpha: Vec<f64>| Params {
        objective: ObjectiveKind::QuantileError,
        quantile_alpha,
        num_rounds: 30,
        learning_rate: 0.1,
        ..Default::default()
    };
    let many = Booster::train(&params(alphas.to_vec()), &data.train, &[]).unwrap();
    assert_eq!(many.model().groups, 3);
    let p = many.predict(&data.test).unwrap();
    let n = data.test.n_rows();
    assert_eq!(p.values.len(), 3 * n);
    // each output is exactly the model of its α alone: the groups share nothing but rows
    // (without subsampling, whose draws are keyed on the tree, not the round)
    for (q, &alpha) in alphas.iter().enumerate() {
        let one = Booster::train(&params(vec![alpha]), &data.train, &[]).unwrap();
        let single = one.predict(&data.test).unwrap();
        for i in 0..n {
            assert_eq!(
                p.values[3 * i + q].to_bits(),
                single.values[i].to_bits(),
                "alpha {alpha}, row {i}"
            );
        }
    }
    // ordered quantiles on most rows, and the pinball metric is the mean over outputs
    let ordered = (0..n)
        .filter(|&i| {
            p.values[3 * i] <= p.values[3 * i + 1] && p.values[3 * i + 1] <= p.values[3 * i + 2]
        })
        .count();
    assert!(
        ordered as f64 > 0.95 * n as f64,
        "{ordered} of {n} rows ordered"
    );
    for workers in [2, 3] {
        let b = Booster::train_with(
            &params(alphas.to_vec()),
            &run_on(sapwood::Device::Cpu, workers),
            &data.train,
            &[],
            &mut Quiet,
        )
        .unwrap();
        assert!(b.to_json() == many.to_json(), "{workers} workers differ");
    }
    check_wgpu(
        &params(alphas.to_vec()),
        &data.train,
        &many,
        "quantile list",
    );
    // the list is saved and read back; one α keeps the old single-number form
    let json = many.to_json();
    assert!(
        json.contains("\"quantile_alpha\":[0.1,0.5,0.9]"),
        "{json:.400}"
    );
    assert!(Booster::from_json(&json).unwrap().to_json() == json);
    let one = Booster::train(&params(vec![0.9]), &data.train, &[]).unwrap();
    assert!(one.to_json().contains("\"quantile_alpha\":0.9"));
}

/// Harrell's concordance: of the comparable pairs (an event before another row's time),
/// the fraction where the earlier event has the higher risk (ties count half).
fn concordance(risk: &[f32], labels: &[f32]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (i, &yi) in labels.iter().enumerate() {
        if yi <= 0.0 {
            continue;
        }
        for (j, &yj) in labels.iter().enumerate() {
            if yj.abs() > yi {
                den += 1.0;
                num += if risk[i] > risk[j] {
                    1.0
                } else if risk[i] == risk[j] {
                    0.5
                } else {
                    0.0
                };
            }
        }
    }
    num / den
}

#[test]
fn cox_learns_on_gbsg2_and_saves_one_model_for_one_to_four_workers_and_on_wgpu() {
    let data = bundled("gbsg2");
    let Some(Label::Values(yt)) = data.test.label() else {
        panic!("survival times")
    };
    for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
        let params = Params {
            objective: ObjectiveKind::Cox,
            num_rounds: 60,
            learning_rate: 0.05,
            max_depth: 3,
            quantisation,
            ..Default::default()
        };
        let one = Booster::train(&params, &data.train, &[("test", &data.test)]).unwrap();
        let h = one.history();
        assert_eq!(h[0][0].metric.to_string(), "cox-nloglik");
        let (first, last) = (h[0][0].value, h[h.len() - 1][0].value);
        assert!(
            last < first,
            "{quantisation:?}: cox-nloglik went from {first} to {last}"
        );
        // predictions are hazard ratios, exp(margin), and rank held-out patients: XGBoost
        // with the same parameters reaches 0.621 (python/tests/test_objectives.py)
        let hazard = one.predict(&data.test).unwrap();
        let margin = one
            .predict_with(
                &data.test,
                PredictOptions {
                    output: Output::Margin,
                    ..Default::default()
                },
            )
            .unwrap();
        for (h, m) in hazard.values.iter().zip(&margin.values) {
            assert!((h - m.exp()).abs() <= 1e-5 * h.max(1.0));
        }
        let c = concordance(&margin.values, yt);
        assert!(c > 0.6, "{quantisation:?}: concordance {c}");
        for workers in 2..=4 {
            let b = Booster::train_with(
                &params,
                &run_on(sapwood::Device::Cpu, workers),
                &data.train,
                &[("test", &data.test)],
                &mut Quiet,
            )
            .unwrap();
            assert_eq!(b.run_record().workers(), workers);
            assert!(
                b.to_json() == one.to_json(),
                "{quantisation:?}: {workers} workers save another model"
            );
        }
        let cpu = Booster::train(&params, &data.train, &[]).unwrap();
        check_wgpu(&params, &data.train, &cpu, "cox");
    }
}

#[test]
fn a_cox_label_of_zero_is_an_error_naming_the_row() {
    let d = data_for(ObjectiveKind::SquaredError, 50, 3);
    let Some(Label::Values(mut y)) = d.label().cloned() else {
        panic!()
    };
    for v in y.iter_mut() {
        *v = v.abs() + 1.0;
    }
    y[17] = 0.0;
    let bad = Dataset::from_parts(d.features().clone(), Some(Label::Values(y)), None).unwrap();
    let params = Params {
        objective: ObjectiveKind::Cox,
        ..Default::default()
    };
    let e = Booster::train(&params, &bad, &[]).unwrap_err().to_string();
    assert!(e.contains("row 17") && e.contains("survival"), "{e}");
    // cox-nloglik applies to Cox only, and Cox takes no other metric
    let mut p = params.clone();
    p.set("eval_metric", "rmse").unwrap();
    assert!(Checked::new(p).unwrap_err().to_string().contains("rmse"));
    let mut p = Params::default();
    p.set("eval_metric", "cox-nloglik").unwrap();
    assert!(Checked::new(p).is_err());
}

#[test]
fn the_custom_objective_needs_the_callers_gradients_and_predicts_margins() {
    let d = data_for(ObjectiveKind::Softprob, 300, 4);
    let mut params = Params {
        objective: ObjectiveKind::Custom,
        num_class: Some(3),
        num_rounds: 3,
        ..Default::default()
    };
    let e = Booster::train(&params, &d, &[]).unwrap_err().to_string();
    assert!(e.contains("custom objective"), "{e}");
    // with a caller's softmax gradients: three outputs, predicted as margins
    struct Softmax(Vec<f32>);
    impl sapwood::TrainObserver for Softmax {
        fn on_round(&mut self, _: &sapwood::RoundReport<'_>) -> sapwood::Control {
            sapwood::Control::Continue
        }
        fn has_custom_objective(&self) -> bool {
            true
        }
        fn gradients(&mut self, m: &[f32], k: usize) -> Option<sapwood::Result<Vec<[f32; 2]>>> {
            let mut out = Vec::with_capacity(m.len());
            for (row, z) in m.chunks(k).enumerate() {
                let max = z.iter().cloned().fold(f32::MIN, f32::max);
                let e: Vec<f32> = z.iter().map(|v| (v - max).exp()).collect();
                let s: f32 = e.iter().sum();
                for (c, ec) in e.iter().enumerate() {
                    let p = ec / s;
                    let t = (self.0[row] as usize == c) as u8 as f32;
                    out.push([p - t, (2.0 * p * (1.0 - p)).max(1e-6)]);
                }
            }
            Some(Ok(out))
        }
    }
    let Some(Label::Values(y)) = d.label() else {
        panic!()
    };
    params.num_rounds = 10;
    let b = Booster::train_with(
        &params,
        &RunOptions::default(),
        &d,
        &[],
        &mut Softmax(y.clone()),
    )
    .unwrap();
    assert_eq!(b.model().groups, 3);
    let values = b.predict(&d).unwrap();
    let margins = b
        .predict_with(
            &d,
            PredictOptions {
                output: Output::Margin,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(values.values == margins.values, "custom predicts margins");
    let right = margins
        .values
        .chunks(3)
        .zip(y)
        .filter(|(m, y)| sapwood::argmax(m) == **y as usize)
        .count();
    assert!(
        right as f64 > 0.6 * y.len() as f64,
        "{right} of {}",
        y.len()
    );
    // it loads back with no code, and the exporters refuse it by name
    let back = Booster::from_json(&b.to_json()).unwrap();
    assert!(back.predict(&d).unwrap().values == values.values);
    for format in [
        sapwood::ExportFormat::XGBoost,
        sapwood::ExportFormat::LightGBM,
    ] {
        let e = back.export_string(format).unwrap_err().to_string();
        assert!(e.contains("custom"), "{e}");
    }
}
