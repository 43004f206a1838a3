//! Training behaviour through the public API: loss, early stopping, weights, rounds,
//! growth limits, categorical handling and bad input.

use sapwood::{
    Booster, Checked, ClassLabel, Control, Dataset, Error, GrowPolicy, Metric, ObjectiveKind,
    Params, PredictOptions, Quantisation, RoundReport, Rows, RunOptions, TrainJob, TrainObserver,
};
use sapwood_tests::synthetic;

fn history_of(b: &Booster) -> Vec<f64> {
    b.history().iter().map(|r| r[0].value).collect()
}

#[test]
fn training_loss_never_increases() {
    for (task, objective, metric) in [
        ("regression", ObjectiveKind::SquaredError, Metric::Rmse),
        ("binary", ObjectiveKind::Logistic, Metric::LogLoss),
        ("multiclass", ObjectiveKind::Softprob, Metric::MLogLoss),
    ] {
        for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
            let d = synthetic(4_000, task, 1);
            let params = Params {
                objective,
                quantisation,
                num_rounds: 40,
                eval_metric: vec![metric],
                ..Default::default()
            };
            let h = history_of(&Booster::train(&params, &d, &[("train", &d)]).unwrap());
            for w in h.windows(2) {
                assert!(
                    w[1] <= w[0] * (1.0 + 1e-9),
                    "{objective} {quantisation:?}: loss went up {} -> {}",
                    w[0],
                    w[1]
                );
            }
            assert!(
                h.last().unwrap() < &(h[0] * 0.8),
                "{objective}: loss barely moved: {h:?}"
            );
        }
    }
}

#[test]
fn early_stopping_keeps_the_best_iteration() {
    let train = synthetic(3_000, "binary", 2);
    let valid = synthetic(1_000, "binary", 3);
    let params = Params {
        objective: ObjectiveKind::Logistic,
        learning_rate: 0.5,
        max_depth: 8,
        num_rounds: 500,
        early_stopping_rounds: Some(10),
        eval_metric: vec![Metric::LogLoss],
        ..Default::default()
    };
    let b = Booster::train(&params, &train, &[("valid", &valid)]).unwrap();
    let best = b.best_iteration().expect("early stopping chose a round");
    let h = history_of(&b);
    assert!(b.num_rounds() < 500, "it stopped early");
    assert_eq!(b.num_rounds(), best + 11);
    let min = h.iter().cloned().fold(f64::INFINITY, f64::min);
    assert_eq!(h[best], min);
    // predictions default to the best iteration
    let default = b.predict(&valid).unwrap();
    let at_best = b
        .predict_with(
            &valid,
            PredictOptions {
                rounds: Some(best + 1),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(default, at_best);
}

#[test]
fn first_k_rounds_equal_a_model_trained_for_k_rounds() {
    let d = synthetic(2_000, "multiclass", 4);
    let params = Params {
        objective: ObjectiveKind::Softprob,
        num_rounds: 20,
        ..Default::default()
    };
    let long = Booster::train(&params, &d, &[]).unwrap();
    let short = Booster::train(
        &Params {
            num_rounds: 7,
            ..params
        },
        &d,
        &[],
    )
    .unwrap();
    let opts = PredictOptions {
        rounds: Some(7),
        output: sapwood::Output::Margin,
        // and on one thread: threads never change a prediction
        threads: 1,
    };
    assert_eq!(
        long.predict_with(&d, opts).unwrap(),
        short
            .predict_with(
                &d,
                PredictOptions {
                    output: sapwood::Output::Margin,
                    ..Default::default()
                }
            )
            .unwrap()
    );
    assert!(long
        .predict_with(
            &d,
            PredictOptions {
                rounds: Some(21),
                ..Default::default()
            }
        )
        .is_err());
}

#[test]
fn integer_weights_act_like_repeated_rows() {
    let base = synthetic(3_000, "regression", 6);
    let n = base.n_rows();
    let weights: Vec<f32> = (0..n).map(|i| if i % 3 == 0 { 2.0 } else { 1.0 }).collect();
    let weighted = Dataset::from_parts(
        base.features().clone(),
        base.label().cloned(),
        Some(weights.clone()),
    )
    .unwrap();
    // the same rows, with every weight-2 row written twice
    let rows: Vec<usize> = (0..n)
        .flat_map(|i| std::iter::repeat_n(i, weights[i] as usize))
        .collect();
    let mut b = Dataset::builder();
    for (name, col) in base
        .features()
        .names()
        .iter()
        .zip(base.features().columns())
    {
        b = match col {
            sapwood::Column::Numeric(v) => b.numeric(
                name.clone(),
                rows.iter().map(|&r| v[r]).collect::<Vec<f32>>(),
            ),
            sapwood::Column::Categorical { codes, levels } => b.categorical(
                name.clone(),
                rows.iter().map(|&r| codes[r]).collect::<Vec<u32>>(),
                levels.clone(),
            ),
            sapwood::Column::Sparse { .. } => unreachable!("the synthetic set is dense"),
        };
    }
    let sapwood::Label::Values(y) = base.label().unwrap() else {
        panic!()
    };
    let repeated = b
        .label(rows.iter().map(|&r| y[r]).collect())
        .build()
        .unwrap();
    let params = Params {
        num_rounds: 10,
        max_bin: 4096,
        // a bin for every value: `min_data_in_bin` counts sampled rows, not their weight
        // (as LightGBM does), so with 3 a value repeated three times has a bin where the
        // same value once with weight 3 shares one
        min_data_in_bin: 1,
        ..Default::default()
    };
    let a = Booster::train(&params, &weighted, &[])
        .unwrap()
        .predict(&base)
        .unwrap();
    let b = Booster::train(&params, &repeated, &[])
        .unwrap()
        .predict(&base)
        .unwrap();
    let worst = a
        .values
        .iter()
        .zip(&b.values)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(
        worst < 1e-3,
        "weighted and repeated models differ by {worst}"
    );
}

#[test]
fn growth_limits_hold() {
    let d = synthetic(5_000, "regression", 7);
    let depth = Booster::train(
        &Params {
            max_depth: 3,
            num_rounds: 5,
            ..Default::default()
        },
        &d,
        &[],
    )
    .unwrap();
    assert!(depth.model().trees.iter().all(|t| t.depth() <= 3));
    assert!(depth.model().trees.iter().any(|t| t.depth() == 3));
    let leaves = Booster::train(
        &Params {
            grow_policy: GrowPolicy::Lossguide,
            max_depth: 0,
            max_leaves: 13,
            num_rounds: 5,
            ..Default::default()
        },
        &d,
        &[],
    )
    .unwrap();
    assert!(leaves.model().trees.iter().all(|t| t.num_leaves() <= 13));
    assert!(leaves.model().trees.iter().any(|t| t.num_leaves() == 13));
    let capped = Booster::train(
        &Params {
            max_depth: 6,
            max_leaves: 9,
            num_rounds: 3,
            ..Default::default()
        },
        &d,
        &[],
    )
    .unwrap();
    assert!(capped.model().trees.iter().all(|t| t.num_leaves() <= 9));
}

#[test]
fn string_classes_round_trip_and_unseen_levels_go_the_default_way() {
    let n = 600;
    let colour: Vec<Option<&str>> = (0..n)
        .map(|i| Some(["red", "green", "blue"][i % 3]))
        .collect();
    let x: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let y: Vec<ClassLabel> = (0..n)
        .map(|i| {
            ClassLabel::Str(
                if i % 3 == 0 || (i % 7) > 4 {
                    "yes"
                } else {
                    "no"
                }
                .into(),
            )
        })
        .collect();
    let train = Dataset::builder()
        .numeric("x", x.clone())
        .categorical_strings("colour", &colour)
        .class_labels(y)
        .build()
        .unwrap();
    let params = Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: 20,
        ..Default::default()
    };
    let b = Booster::train(&params, &train, &[]).unwrap();
    assert_eq!(
        b.classes().unwrap(),
        &[ClassLabel::Str("no".into()), ClassLabel::Str("yes".into())]
    );
    let acc = b
        .predict_classes(&train)
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            **c == ClassLabel::Str(
                if i % 3 == 0 || (i % 7) > 4 {
                    "yes"
                } else {
                    "no"
                }
                .into(),
            )
        })
        .count();
    assert_eq!(acc, n);
    // the test set's levels are in another order and include one never seen
    let test = Dataset::builder()
        .numeric("x", vec![1.0, 1.0, 1.0])
        .categorical_strings("colour", &[Some("red"), Some("purple"), None])
        .build()
        .unwrap();
    let p = b.predict(&test).unwrap();
    assert!(p.values[0] > 0.5, "red is yes");
    assert_eq!(
        p.values[1], p.values[2],
        "an unseen level goes where missing goes"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let good = synthetic(100, "regression", 8);
    let msg = |r: Result<Booster, Error>| r.unwrap_err().to_string();

    let nan_label = Dataset::builder()
        .numeric("x", vec![1.0, 2.0])
        .label(vec![1.0, f32::NAN])
        .build()
        .unwrap();
    let e = msg(Booster::train(&Params::default(), &nan_label, &[]));
    assert!(e.contains("row 1"), "{e}");

    let e = Dataset::builder()
        .numeric("a", vec![1.0, 2.0])
        .numeric("b", vec![1.0])
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`b`"), "{e}");

    let empty = Dataset::builder()
        .numeric("x", Vec::<f32>::new())
        .label(vec![])
        .build()
        .unwrap();
    let e = msg(Booster::train(&Params::default(), &empty, &[]));
    assert!(e.contains("no rows"), "{e}");

    let e = "binary:hinge"
        .parse::<ObjectiveKind>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("binary:hinge"), "{e}");

    let e = msg(Booster::train(
        &Params {
            max_bin: 1,
            ..Default::default()
        },
        &good,
        &[],
    ));
    assert!(e.contains("max_bin"), "{e}");
    let e = msg(Booster::train(
        &Params {
            subsample: 2.0,
            ..Default::default()
        },
        &good,
        &[],
    ));
    assert!(e.contains("subsample"), "{e}");
    let e = msg(Booster::train(
        &Params {
            eval_metric: vec![Metric::Auc],
            ..Default::default()
        },
        &good,
        &[],
    ));
    assert!(e.contains("auc"), "{e}");

    let one_class = Dataset::builder()
        .numeric("x", vec![1.0, 2.0])
        .label(vec![1.0, 1.0])
        .build()
        .unwrap();
    let e = msg(Booster::train(
        &Params {
            objective: ObjectiveKind::Softprob,
            ..Default::default()
        },
        &one_class,
        &[],
    ));
    assert!(e.contains("two classes"), "{e}");

    let bad_weight = Dataset::from_parts(
        good.features().clone(),
        good.label().cloned(),
        Some(vec![-1.0; 100]),
    )
    .unwrap();
    let e = msg(Booster::train(&Params::default(), &bad_weight, &[]));
    assert!(e.contains("weight at row 0"), "{e}");

    let unlabeled = Dataset::builder().numeric("x", vec![1.0]).build().unwrap();
    let e = msg(Booster::train(&Params::default(), &unlabeled, &[]));
    assert!(e.contains("no label"), "{e}");

    let b = Booster::train(
        &Params {
            num_rounds: 2,
            ..Default::default()
        },
        &good,
        &[],
    )
    .unwrap();
    let missing_col = Dataset::builder().numeric("x0", vec![1.0]).build().unwrap();
    let e = b.predict(&missing_col).unwrap_err().to_string();
    assert!(e.contains("column `x1` is missing"), "{e}");
}

struct StopAfter(usize);

impl TrainObserver for StopAfter {
    fn on_round(&mut self, r: &RoundReport<'_>) -> Control {
        if r.round + 1 >= self.0 {
            Control::Stop
        } else {
            Control::Continue
        }
    }
}

#[test]
fn an_observer_can_stop_training_and_keep_the_rounds() {
    let d = synthetic(500, "regression", 9);
    let b = Booster::train_with(
        &Params {
            num_rounds: 50,
            ..Default::default()
        },
        &sapwood::RunOptions::default(),
        &d,
        &[],
        &mut StopAfter(4),
    )
    .unwrap();
    assert_eq!(b.num_rounds(), 4);
    assert!(b.interrupted());
}

#[test]
fn batched_two_pass_training_equals_in_memory_training() {
    let d = synthetic(5_000, "multiclass", 12);
    let params = Params {
        objective: ObjectiveKind::Softprob,
        num_rounds: 6,
        bin_sample_rows: 1_500,
        ..Default::default()
    };
    let whole = Booster::train(&params, &d, &[]).unwrap();
    let sapwood::Label::Values(y) = d.label().unwrap() else {
        panic!()
    };
    let bounds = [0usize, 1_234, 1_235, 4_000, 5_000];
    let mut cut = sapwood::CutPass::new(&params, 5_000);
    for w in bounds.windows(2) {
        cut.push(&d.features().slice_rows(w[0]..w[1]), None)
            .unwrap();
    }
    let mut bin = cut.finish().unwrap();
    for w in bounds.windows(2) {
        let part = d.features().slice_rows(w[0]..w[1]);
        bin.push(
            &part,
            Some(sapwood::Label::Values(y[w[0]..w[1]].to_vec())),
            None,
        )
        .unwrap();
    }
    let binned = bin.finish().unwrap();
    let streamed = Booster::train_binned(
        &params,
        &sapwood::RunOptions::default(),
        &binned,
        &[],
        &mut sapwood::Quiet,
    )
    .unwrap();
    assert_eq!(streamed.to_json(), whole.to_json());
}

#[test]
fn a_diverging_run_stops_with_an_error_naming_round_and_tree_on_any_worker_count() {
    // learning rate 5 on squared error overshoots 4x per round until f32 overflows
    let d = synthetic(2_000, "regression", 4);
    let params = Params {
        learning_rate: 5.0,
        num_rounds: 500,
        ..Default::default()
    };
    let errors: Vec<String> = [1usize, 3]
        .iter()
        .map(|&workers| {
            let run = sapwood::RunOptions {
                workers,
                ..Default::default()
            };
            let e = Booster::train_with(&params, &run, &d, &[], &mut sapwood::Quiet).unwrap_err();
            assert!(
                matches!(e, Error::Diverged { .. }),
                "{workers} workers: {e}"
            );
            e.to_string()
        })
        .collect();
    assert!(
        errors[0].contains("diverged in round") && errors[0].contains("tree"),
        "{}",
        errors[0]
    );
    assert_eq!(
        errors[0], errors[1],
        "1 and 3 workers stop at the same tree"
    );
    // a sane learning rate on the same data trains
    let ok = Params {
        learning_rate: 0.3,
        num_rounds: 20,
        ..Default::default()
    };
    assert!(Booster::train(&ok, &d, &[]).is_ok());
}

#[test]
fn contradictory_settings_are_refused() {
    let d = synthetic(300, "binary", 5);
    let msg = |params: &Params, evals: &[(&str, &Dataset<'_>)]| {
        Booster::train(params, &d, evals).unwrap_err().to_string()
    };
    let e = msg(
        &Params {
            objective: ObjectiveKind::Logistic,
            num_class: Some(3),
            ..Default::default()
        },
        &[],
    );
    assert!(
        e.contains("num_class") && e.contains("multi:softprob"),
        "{e}"
    );
    let e = msg(
        &Params {
            objective: ObjectiveKind::Logistic,
            early_stopping_rounds: Some(5),
            ..Default::default()
        },
        &[],
    );
    assert!(e.contains("early_stopping_rounds"), "{e}");
    // with an evaluation set the same early stopping is fine
    let p = Params {
        objective: ObjectiveKind::Logistic,
        early_stopping_rounds: Some(5),
        num_rounds: 10,
        ..Default::default()
    };
    assert!(Booster::train(&p, &d, &[("d", &d)]).is_ok());
    // predicting with zero rounds is an error, not the base margin
    let b = Booster::train(
        &Params {
            objective: ObjectiveKind::Logistic,
            num_rounds: 3,
            ..Default::default()
        },
        &d,
        &[],
    )
    .unwrap();
    let e = b
        .predict_with(
            &d,
            PredictOptions {
                rounds: Some(0),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("0 rounds"), "{e}");
}

#[test]
fn in_process_workers_are_bounded_by_the_cores() {
    let d = synthetic(20_000, "regression", 6);
    let run = sapwood::RunOptions {
        workers: 10_000,
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let e = Booster::train_with(&Params::default(), &run, &d, &[], &mut sapwood::Quiet)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("workers") && e.contains("cores") && e.contains("at most"),
        "{e}"
    );
    assert!(start.elapsed().as_secs() < 30, "refused before training");
}

#[test]
fn evaluation_set_label_errors_name_the_set_and_rows_are_global() {
    let train = synthetic(400, "binary", 7);
    // the training columns, two rows, and a label of 7 where binary labels are 0 or 1
    let mut b = Dataset::builder();
    for (j, n) in train.features().names().iter().enumerate() {
        match train.features().column(j) {
            sapwood::Column::Numeric(_) | sapwood::Column::Sparse { .. } => {
                b = b.numeric(n.clone(), vec![1.0, 2.0])
            }
            sapwood::Column::Categorical { levels, .. } => {
                b = b.categorical(n.clone(), vec![0u32, 0], levels.clone())
            }
        }
    }
    let bad = b.label(vec![0.0, 7.0]).build().unwrap();
    let e = Booster::train(
        &Params {
            objective: ObjectiveKind::Logistic,
            ..Default::default()
        },
        &train,
        &[("holdout", &bad)],
    )
    .unwrap_err();
    assert!(matches!(e, Error::InDataset { .. }), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("evaluation set `holdout`") && e.contains("row 1"),
        "{e}"
    );
    // training labels on a later worker's shard are reported by their global row
    let mut labels: Vec<f32> = vec![0.0; 400];
    labels[350] = f32::NAN;
    let data = Dataset::from_parts(
        train.features().clone(),
        Some(sapwood::Label::Values(labels)),
        None,
    )
    .unwrap();
    let run = sapwood::RunOptions {
        workers: 2,
        ..Default::default()
    };
    let e = Booster::train_with(
        &Params {
            objective: ObjectiveKind::Logistic,
            ..Default::default()
        },
        &run,
        &data,
        &[],
        &mut sapwood::Quiet,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("row 350"), "{e}");
}

#[test]
fn explanations_add_up_to_the_margin_for_every_objective() {
    use sapwood::Output;
    for (task, objective) in [
        ("regression", ObjectiveKind::SquaredError),
        ("binary", ObjectiveKind::Logistic),
        ("multiclass", ObjectiveKind::Softprob),
    ] {
        let d = synthetic(1_200, task, 21);
        let params = Params {
            objective,
            num_rounds: 12,
            max_depth: 4,
            ..Default::default()
        };
        let b = Booster::train(&params, &d, &[]).unwrap();
        let k = b.model().groups;
        let nf = b.model().feature_names.len();
        let opts = |output| PredictOptions {
            output,
            ..Default::default()
        };
        let margins = b.predict_with(&d, opts(Output::Margin)).unwrap();
        let contribs = b.predict_with(&d, opts(Output::Contributions)).unwrap();
        assert_eq!(contribs.per_row, k * (nf + 1));
        for r in 0..d.n_rows() {
            for g in 0..k {
                let c = &contribs.row(r)[g * (nf + 1)..(g + 1) * (nf + 1)];
                let sum: f64 = c.iter().map(|&v| v as f64).sum();
                let m = margins.row(r)[g] as f64;
                assert!(
                    (sum - m).abs() <= 1e-5 * m.abs().max(1.0),
                    "{objective} row {r} group {g}: {sum} vs {m}"
                );
            }
        }
        let small = d.features().slice_rows(0..30);
        let small = sapwood::Dataset::from_parts(small, None, None).unwrap();
        let inter = b.predict_with(&small, opts(Output::Interactions)).unwrap();
        let side = nf + 1;
        assert_eq!(inter.per_row, k * side * side);
        for r in 0..30 {
            for g in 0..k {
                for i in 0..side {
                    let row =
                        &inter.row(r)[g * side * side + i * side..g * side * side + (i + 1) * side];
                    let sum: f32 = row.iter().sum();
                    let want = contribs.row(r)[g * side + i];
                    assert!(
                        (sum - want).abs() <= 1e-4 * want.abs().max(1.0),
                        "{objective} row {r} {i}"
                    );
                }
            }
        }
        let leaves = b.predict_with(&d, opts(Output::Leaf)).unwrap();
        assert_eq!(leaves.per_row, b.num_trees());
        for (t, tree) in b.model().trees.iter().enumerate() {
            let leaf = leaves.row(5)[t] as usize;
            assert!(
                tree.nodes[leaf].split.is_none(),
                "tree {t}: {leaf} is not a leaf"
            );
        }
    }
}

/// Keeps every checkpoint in memory, and can hand one back to resume from.
struct Keeper {
    every: usize,
    kept: Vec<sapwood::Checkpoint>,
    resume: Option<sapwood::Checkpoint>,
}

impl TrainObserver for Keeper {
    fn on_round(&mut self, _r: &RoundReport<'_>) -> Control {
        Control::Continue
    }
    fn checkpoint_every(&self) -> usize {
        self.every
    }
    fn on_checkpoint(&mut self, c: &sapwood::Checkpoint) -> sapwood::Result<()> {
        // through the file format, as a real checkpoint goes
        self.kept
            .push(sapwood::Checkpoint::from_json(&c.to_json()).unwrap());
        Ok(())
    }
}

/// Trains like [`Booster::train_with`], resuming from the keeper's checkpoint if it holds
/// one.
fn train_keeping(
    params: &Params,
    run: &RunOptions,
    train: &Dataset<'_>,
    evals: &[(&str, &Dataset<'_>)],
    keeper: &mut Keeper,
) -> sapwood::Result<Booster> {
    let (params, run) = (Checked::new(params.clone())?, Checked::new(*run)?);
    let resume = keeper.resume.take();
    let job =
        TrainJob::new(&params, &run, Rows::Columns { train, evals }).resuming(resume.as_ref());
    Booster::fit(job, keeper)
}

#[test]
fn resuming_any_checkpoint_saves_the_uninterrupted_model_bytes() {
    let train = synthetic(2_500, "binary", 41);
    let valid = synthetic(800, "binary", 42);
    let params = Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: 40,
        learning_rate: 0.4,
        subsample: 0.7,
        colsample_bytree: 0.8,
        early_stopping_rounds: Some(4),
        eval_metric: vec![Metric::LogLoss],
        seed: 9,
        ..Default::default()
    };
    for workers in [1, 3] {
        let run = sapwood::RunOptions {
            workers,
            ..Default::default()
        };
        let mut keeper = Keeper {
            every: 3,
            kept: Vec::new(),
            resume: None,
        };
        let whole =
            train_keeping(&params, &run, &train, &[("valid", &valid)], &mut keeper).unwrap();
        assert!(keeper.kept.len() >= 2, "{} checkpoints", keeper.kept.len());
        assert!(whole.best_iteration().is_some());
        for c in keeper.kept.clone() {
            let rounds = c.rounds;
            let mut again = Keeper {
                every: 0,
                kept: Vec::new(),
                resume: Some(c),
            };
            let resumed =
                train_keeping(&params, &run, &train, &[("valid", &valid)], &mut again).unwrap();
            assert!(
                resumed.to_json() == whole.to_json(),
                "{workers} workers, resumed after round {rounds}: model differs"
            );
            assert_eq!(resumed.history().len(), whole.history().len());
        }
    }
    // a checkpoint of another job is refused
    let mut keeper = Keeper {
        every: 5,
        kept: Vec::new(),
        resume: None,
    };
    let other = Params {
        early_stopping_rounds: None,
        ..params.clone()
    };
    train_keeping(&other, &Default::default(), &train, &[], &mut keeper).unwrap();
    let mut wrong = Keeper {
        every: 0,
        kept: Vec::new(),
        resume: keeper.kept.pop(),
    };
    let e = train_keeping(
        &params,
        &Default::default(),
        &train,
        &[("valid", &valid)],
        &mut wrong,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("resume") && e.contains("another job"), "{e}");
}

#[test]
fn resuming_after_the_best_round_keeps_early_stoppings_state() {
    // a job that stops well before its rounds run out: checkpoints taken after the best
    // round must carry it (and its value), or the resumed job stops later, at another round
    let train = synthetic(1_500, "binary", 43);
    let valid = synthetic(600, "binary", 44);
    let params = Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: 300,
        learning_rate: 0.9,
        max_depth: 6,
        early_stopping_rounds: Some(5),
        eval_metric: vec![Metric::LogLoss],
        seed: 3,
        ..Default::default()
    };
    let mut keeper = Keeper {
        every: 1,
        kept: Vec::new(),
        resume: None,
    };
    let whole = train_keeping(
        &params,
        &Default::default(),
        &train,
        &[("valid", &valid)],
        &mut keeper,
    )
    .unwrap();
    let best = whole
        .best_iteration()
        .expect("early stopping chose a round");
    let trained = whole.history().len();
    assert!(
        trained < 100,
        "the job must stop early: it trained {trained} rounds"
    );
    assert!(best + 3 < trained, "best round {best} of {trained}");
    // every checkpoint after the best round but before the stop
    let after: Vec<_> = keeper
        .kept
        .into_iter()
        .filter(|c| c.rounds > best + 1 && c.rounds < trained)
        .collect();
    assert!(
        after.len() >= 3,
        "{} checkpoints after the best round",
        after.len()
    );
    for c in after {
        let rounds = c.rounds;
        let mut again = Keeper {
            every: 0,
            kept: Vec::new(),
            resume: Some(c),
        };
        let resumed = train_keeping(
            &params,
            &Default::default(),
            &train,
            &[("valid", &valid)],
            &mut again,
        )
        .unwrap();
        assert_eq!(
            (resumed.best_iteration(), resumed.history().len()),
            (Some(best), trained),
            "resumed after round {rounds}: best round and stop"
        );
        assert!(
            resumed.to_json() == whole.to_json(),
            "resumed after round {rounds}: model differs"
        );
    }
}

/// A custom metric computed from the evaluation margins the engine hands over: the mean
/// absolute error, which the observer also checks against its own prediction.
struct OwnMae {
    labels: Vec<f32>,
    seen: Vec<usize>,
    reported: Vec<usize>,
    last_margins: Vec<f32>,
}

impl TrainObserver for OwnMae {
    fn on_round(&mut self, r: &RoundReport<'_>) -> Control {
        assert_eq!(r.custom.len(), 1, "the round's own metric reaches on_round");
        self.reported.push(r.round);
        Control::Continue
    }

    fn custom_metrics(
        &mut self,
        round: usize,
        sets: &[sapwood::EvalMargins<'_>],
    ) -> sapwood::Result<Vec<sapwood::CustomEval>> {
        self.seen.push(round);
        let s = &sets[0];
        self.last_margins = s.margins.to_vec();
        let mae = s
            .margins
            .iter()
            .zip(&self.labels)
            .map(|(m, y)| (m - y).abs() as f64)
            .sum::<f64>()
            / s.margins.len() as f64;
        // worse after round 6: early stopping must pick round 6
        let value = if round <= 6 { mae } else { mae + round as f64 };
        Ok(vec![sapwood::CustomEval {
            dataset: s.name.to_string(),
            name: "own-mae".into(),
            value,
            higher_is_better: false,
        }])
    }
}

#[test]
fn early_stopping_watches_an_observers_own_metric_before_the_round_ends() {
    let d = synthetic(800, "regression", 4);
    let v = synthetic(300, "regression", 5);
    let Some(sapwood::Label::Values(y)) = v.label() else {
        panic!()
    };
    let params = Params {
        num_rounds: 40,
        early_stopping_rounds: Some(3),
        ..Default::default()
    };
    let mut own = OwnMae {
        labels: y.clone(),
        seen: vec![],
        reported: vec![],
        last_margins: vec![],
    };
    let b = Booster::train_with(
        &params,
        &sapwood::RunOptions::default(),
        &d,
        &[("valid", &v)],
        &mut own,
    )
    .unwrap();
    // the built-in rmse keeps improving; the own metric stops training three rounds after
    // its best, at that round (no extra round trained)
    assert_eq!(b.model().best_iteration, Some(6));
    assert_eq!(b.model().num_rounds(), 10);
    assert_eq!(own.seen, (0..10).collect::<Vec<_>>());
    assert_eq!(own.reported, own.seen);
    // the margins handed over are the model's margins after the last round trained
    let p = b
        .predict_with(
            &v,
            PredictOptions {
                output: sapwood::Output::Margin,
                rounds: Some(10),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(p.values == own.last_margins);
}

/// A table where most values are absent, as dense columns (absent: NaN) and with its first
/// three features held sparse: entries at 2%, 10% and 60% of the rows, stored zeros and a
/// few stored NaNs among them.
fn sparse_and_dense(n: usize) -> (Dataset<'static>, Dataset<'static>) {
    use sapwood::{Column, FeatureMatrix, Label};
    use std::borrow::Cow;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    };
    let names: Vec<String> = (0..6).map(|f| format!("f{f}")).collect();
    let mut dense = vec![vec![f32::NAN; n]; 6];
    let mut stored: Vec<Vec<u32>> = vec![Vec::new(); 3];
    for i in 0..n {
        for (f, density) in [0.02, 0.1, 0.6].into_iter().enumerate() {
            let u = next();
            if u < density {
                // a fifth of the entries are stored zeros, a few are stored NaNs
                dense[f][i] = if u < density / 5.0 {
                    0.0
                } else if u > density * 0.99 {
                    f32::NAN
                } else {
                    (next() * 10.0 - 3.0) as f32
                };
                stored[f].push(i as u32);
            }
        }
        for col in dense.iter_mut().skip(3) {
            col[i] = (next() * 4.0 - 2.0) as f32;
        }
    }
    let label: Vec<f32> = (0..n)
        .map(|i| {
            let v = |f: usize| {
                if dense[f][i].is_nan() {
                    -1.0
                } else {
                    dense[f][i]
                }
            };
            let s = v(0) + 0.5 * v(1) - 0.3 * v(2) + v(3) * v(4) + 0.2 * next() as f32;
            (s > 0.5) as u8 as f32
        })
        .collect();
    let sparse_columns = (0..6)
        .map(|f| {
            if f < 3 {
                Column::Sparse {
                    len: n,
                    start: 0,
                    values: Cow::Owned(stored[f].iter().map(|&r| dense[f][r as usize]).collect()),
                    rows: Cow::Owned(stored[f].clone()),
                }
            } else {
                Column::Numeric(Cow::Owned(dense[f].clone()))
            }
        })
        .collect();
    let dense_columns = dense
        .into_iter()
        .map(|c| Column::Numeric(c.into()))
        .collect();
    // weights that vary: the cut sample's weighted quantiles read them entry by entry
    let weights: Vec<f32> = (0..n).map(|i| 0.5 + (i % 7) as f32 * 0.3).collect();
    let data = |columns| {
        let m = FeatureMatrix::new(names.clone(), columns).unwrap();
        Dataset::from_parts(m, Some(Label::Values(label.clone())), Some(weights.clone())).unwrap()
    };
    (data(sparse_columns), data(dense_columns))
}

/// The columns `dense` (NaN where missing) as two datasets labelled `label`: each column
/// as its entries at rows `stored[f]`, and as the dense values.
fn columns_sparse_and_dense(
    names: &[String],
    dense: Vec<Vec<f32>>,
    stored: &[Vec<u32>],
    label: Vec<f32>,
) -> (Dataset<'static>, Dataset<'static>) {
    use sapwood::{Column, FeatureMatrix, Label};
    use std::borrow::Cow;
    let n = label.len();
    let sparse_columns = dense
        .iter()
        .zip(stored)
        .map(|(column, rows)| Column::Sparse {
            len: n,
            start: 0,
            values: Cow::Owned(rows.iter().map(|&r| column[r as usize]).collect()),
            rows: Cow::Owned(rows.clone()),
        })
        .collect();
    let dense_columns = dense
        .into_iter()
        .map(|c| Column::Numeric(c.into()))
        .collect();
    let data = |columns| {
        let m = FeatureMatrix::new(names.to_vec(), columns).unwrap();
        Dataset::from_parts(m, Some(Label::Values(label.clone())), None).unwrap()
    };
    (data(sparse_columns), data(dense_columns))
}

/// A wide table as sparse columns and as the same values dense: `nf` features, each holding
/// a value in about one row in ten (about 300 distinct values a feature), the label a noisy
/// function of a few (cut into `classes` classes where that is above 0).
fn wide_sparse_and_dense(
    n: usize,
    nf: usize,
    seed: u64,
    classes: usize,
) -> (Dataset<'static>, Dataset<'static>) {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    };
    let mut dense = vec![vec![f32::NAN; n]; nf];
    let mut stored: Vec<Vec<u32>> = vec![Vec::new(); nf];
    for i in 0..n {
        for (column, rows) in dense.iter_mut().zip(&mut stored) {
            if next() < 0.1 {
                column[i] = next() as f32;
                rows.push(i as u32);
            }
        }
    }
    let v = |f: usize, i: usize| {
        let x = dense[f][i];
        if x.is_nan() {
            0.0
        } else {
            x
        }
    };
    let label: Vec<f32> = (0..n)
        .map(|i| v(0, i) - v(7, i) + 2.0 * v(11, i) * v(12, i) + 0.2 * next() as f32)
        .collect();
    // classes by rank: as many rows in each
    let label = if classes > 0 {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| label[a].total_cmp(&label[b]).then(a.cmp(&b)));
        let mut class = vec![0.0f32; n];
        for (rank, &i) in order.iter().enumerate() {
            class[i] = (rank * classes / n) as f32;
        }
        class
    } else {
        label
    };
    let names: Vec<String> = (0..nf).map(|f| format!("w{f}")).collect();
    columns_sparse_and_dense(&names, dense, &stored, label)
}

/// A sparse shard's nodes subtract and scan only the bins their rows occupy, and a level
/// whose children's children get no histogram is built a few children at a time where
/// its histograms are wide (about 340,000 bins here: three children to a chunk). Neither
/// may change a bit: one worker on the sparse columns (both) trains the model one worker
/// on the dense columns and two workers (neither) train.
#[test]
fn wide_levels_in_chunks_and_occupied_bins_train_the_same_model() {
    let (sparse, dense) = wide_sparse_and_dense(3_000, 1_300, 5, 0);
    let params = Params {
        objective: ObjectiveKind::SquaredError,
        num_rounds: 3,
        max_depth: 4,
        min_data_in_bin: 1,
        ..Default::default()
    };
    // two threads: a chunk of three children, whatever the machine's cores
    let alone = RunOptions {
        threads: 2,
        ..Default::default()
    };
    let sparse_alone =
        Booster::train_with(&params, &alone, &sparse, &[], &mut sapwood::Quiet).unwrap();
    let model = sparse_alone.model();
    assert!(
        model.bin(sparse.features()).unwrap().is_sparse(),
        "binned by column"
    );
    let width = model.cuts.total_bins();
    assert!(width > 300_000, "{width} bins: wide enough for chunks");
    let dense_alone = Booster::train(&params, &dense, &[]).unwrap();
    let run = RunOptions {
        workers: 2,
        ..Default::default()
    };
    let two = Booster::train_with(&params, &run, &dense, &[], &mut sapwood::Quiet).unwrap();
    let json = two.to_json();
    // every tree splits down to the last level (a stump would not reach the chunks)
    for tree in &two.model().trees {
        assert!(tree.nodes.len() >= 15, "{} nodes", tree.nodes.len());
    }
    assert!(sparse_alone.to_json() == json, "sparse, one worker");
    assert!(dense_alone.to_json() == json, "dense, one worker");
}

/// The same with many classes (trees grown in teams of threads, each team with its store),
/// 8-bit gradients (packed histograms) and a leaf budget that cuts the last level: one
/// worker on the sparse columns trains what two train on the dense ones.
#[test]
fn occupied_bins_and_chunks_keep_the_model_with_teams_low_bits_and_a_leaf_budget() {
    let (sparse, dense) = wide_sparse_and_dense(2_000, 1_300, 9, 16);
    let base = Params {
        num_rounds: 2,
        max_depth: 4,
        min_data_in_bin: 1,
        ..Default::default()
    };
    let cases = [
        (
            "16 classes",
            Params {
                objective: ObjectiveKind::Softmax,
                num_class: Some(16),
                ..base.clone()
            },
        ),
        (
            "8 bits, 11 leaves",
            Params {
                objective: ObjectiveKind::SquaredError,
                quantisation: sapwood::Quantisation::from_grad_bits(8).unwrap(),
                max_leaves: 11,
                ..base.clone()
            },
        ),
    ];
    for (what, params) in cases {
        let alone = RunOptions {
            threads: 2,
            ..Default::default()
        };
        let got = Booster::train_with(&params, &alone, &sparse, &[], &mut sapwood::Quiet).unwrap();
        let two = RunOptions {
            workers: 2,
            ..Default::default()
        };
        let want = Booster::train_with(&params, &two, &dense, &[], &mut sapwood::Quiet).unwrap();
        assert!(
            want.model().trees.iter().any(|t| t.nodes.len() >= 11),
            "{what}: trees reach the last level"
        );
        assert!(got.to_json() == want.to_json(), "{what}");
    }
}

/// A wide table whose every column is sparse (one-hot fields and text-like weights, 1% to
/// 4% of the rows each, one column at 60%, stored zeros and NaNs among the entries), few
/// enough entries that its bins are held by column; with the same values as dense columns.
// a row at a time: each row writes several columns
#[allow(clippy::needless_range_loop)]
fn all_sparse_and_dense(n: usize, seed: u64) -> (Dataset<'static>, Dataset<'static>) {
    let nf = 40;
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    };
    let names: Vec<String> = (0..nf).map(|f| format!("t{f}")).collect();
    let mut dense = vec![vec![f32::NAN; n]; nf];
    let mut stored: Vec<Vec<u32>> = vec![Vec::new(); nf];
    for i in 0..n {
        // one level of a one-hot field of ten columns
        let level = (next() * 10.0) as usize;
        if next() < 0.4 {
            dense[level][i] = 1.0;
            stored[level].push(i as u32);
        }
        for f in 10..nf {
            let density = if f == 10 {
                0.6
            } else {
                0.01 + 0.03 * (f % 3) as f64 / 2.0
            };
            let u = next();
            if u < density {
                dense[f][i] = if u < density / 6.0 {
                    0.0
                } else if u > density * 0.99 {
                    f32::NAN
                } else if f % 4 == 1 {
                    // many distinct values: 16-bit bins where max_bin allows
                    (next() * 1000.0) as f32
                } else {
                    (next() * 5.0) as f32
                };
                stored[f].push(i as u32);
            }
        }
    }
    let label: Vec<f32> = (0..n)
        .map(|i| {
            let v = |f: usize| {
                if dense[f][i].is_nan() {
                    0.0
                } else {
                    dense[f][i]
                }
            };
            let s = v(0) - v(3) + 0.7 * v(10) + v(12) * v(14) - 0.5 * v(20) + 0.3 * next() as f32;
            (s > 0.6) as u8 as f32
        })
        .collect();
    columns_sparse_and_dense(&names, dense, &stored, label)
}

#[test]
fn sparse_matrices_binned_by_column_train_as_their_dense_values() {
    let (sparse, dense) = all_sparse_and_dense(12_007, 11);
    let (valid_sparse, valid_dense) = all_sparse_and_dense(3_001, 12);
    let base = Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: 12,
        max_bin: 64,
        ..Default::default()
    };
    let cases = [
        ("exact", base.clone()),
        (
            "8 bits, rows sampled (out-of-bag rows routed by their bins)",
            Params {
                quantisation: sapwood::Quantisation::from_grad_bits(8).unwrap(),
                subsample: 0.6,
                ..base.clone()
            },
        ),
        (
            "16-bit bins, loss-guided",
            Params {
                max_bin: 1024,
                grow_policy: sapwood::GrowPolicy::Lossguide,
                max_leaves: 31,
                max_depth: 0,
                ..base.clone()
            },
        ),
        (
            "absolute error (leaves refit from every row's leaf)",
            Params {
                objective: ObjectiveKind::AbsoluteError,
                ..base.clone()
            },
        ),
    ];
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (what, params) in cases {
        let want = Booster::train(&params, &dense, &[("valid", &valid_dense)]).unwrap();
        let got = Booster::train(&params, &sparse, &[("valid", &valid_sparse)]).unwrap();
        let binned = got.model().bin(sparse.features()).unwrap();
        assert!(
            binned.is_sparse(),
            "{what}: the sparse rows are binned by column"
        );
        let wide = params.max_bin > 256;
        assert_eq!(
            matches!(binned.bins(), sapwood_core::data::BinsRef::Sparse(s) if s.wide()),
            wide,
            "{what}: 16-bit bins"
        );
        assert!(got.to_json() == want.to_json(), "{what}: the model");
        assert_eq!(
            history_of(&got),
            history_of(&want),
            "{what}: the evaluation set"
        );
        let run = RunOptions {
            workers: 3,
            ..Default::default()
        };
        let workers =
            Booster::train_with(&params, &run, &sparse, &[], &mut sapwood::Quiet).unwrap();
        let alone = Booster::train(&params, &dense, &[]).unwrap();
        assert!(
            workers.to_json() == alone.to_json(),
            "{what}: three workers"
        );
        let (a, b) = (
            want.predict(&valid_dense).unwrap(),
            want.predict(&valid_sparse).unwrap(),
        );
        assert!(bits(&a.values) == bits(&b.values), "{what}: predictions");
        // margins of binned rows (a block at a time from the columns)
        let m = want.model();
        let (bs, bd) = (
            m.bin(valid_sparse.features()).unwrap(),
            m.bin(valid_dense.features()).unwrap(),
        );
        assert!(bs.is_sparse() && !bd.is_sparse());
        let r = m.num_rounds();
        assert!(
            bits(&m.predict_binned(&bs, r)) == bits(&m.predict_binned(&bd, r)),
            "{what}: binned predictions"
        );
    }
    // streamed in batches: kept by column while every batch is sparse, made row-major
    // when a dense batch comes (the dense twin's rows), the model the same either way
    let sapwood::Label::Values(y) = dense.label().unwrap() else {
        panic!("a regression label")
    };
    let n = dense.n_rows();
    let bounds = [0usize, 3_000, 3_001, 9_000, n];
    let want = Booster::train(&base, &dense, &[]).unwrap();
    for dense_last in [false, true] {
        let mut cut = sapwood::CutPass::new(&base, n as u64);
        for w in bounds.windows(2) {
            cut.push(&sparse.features().slice_rows(w[0]..w[1]), None)
                .unwrap();
        }
        let mut bin = cut.finish().unwrap();
        for (i, w) in bounds.windows(2).enumerate() {
            let from = if dense_last && i == 3 {
                &dense
            } else {
                &sparse
            };
            let label = Some(sapwood::Label::Values(y[w[0]..w[1]].to_vec()));
            bin.push(&from.features().slice_rows(w[0]..w[1]), label, None)
                .unwrap();
        }
        let binned = bin.finish().unwrap();
        // by column: six bytes an entry, at about 4% of the cells; row-major: a byte a cell
        let cells = n * 40;
        assert_eq!(
            binned.size_bytes() < cells / 2,
            !dense_last,
            "dense batch last: {dense_last}"
        );
        let streamed = Booster::train_binned(
            &base,
            &sapwood::RunOptions::default(),
            &binned,
            &[],
            &mut sapwood::Quiet,
        )
        .unwrap();
        assert!(
            streamed.to_json() == want.to_json(),
            "streamed, dense batch last: {dense_last}"
        );
    }
}

#[test]
fn sparse_columns_train_and_predict_as_their_dense_values() {
    let (sparse, dense) = sparse_and_dense(20_011);
    // the cut sample is drawn (fewer sample rows than rows): a sparse column's entries are
    // drawn by the same hash as its dense twin's rows
    let params = Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: 15,
        max_bin: 64,
        bin_sample_rows: 5_000,
        ..Default::default()
    };
    // 16-bit bins too
    let wide = Params {
        max_bin: 1024,
        ..params.clone()
    };
    assert!(
        Booster::train(&wide, &sparse, &[]).unwrap().to_json()
            == Booster::train(&wide, &dense, &[]).unwrap().to_json(),
        "max_bin 1024"
    );
    let want = Booster::train(&params, &dense, &[]).unwrap();
    let got = Booster::train(&params, &sparse, &[]).unwrap();
    assert!(
        got.to_json() == want.to_json(),
        "the model of the sparse columns"
    );
    // three workers take a slice of the sparse columns each
    let run = RunOptions {
        workers: 3,
        ..Default::default()
    };
    let workers = Booster::train_with(&params, &run, &sparse, &[], &mut sapwood::Quiet).unwrap();
    assert!(workers.to_json() == want.to_json(), "three workers");
    let (a, b) = (
        want.predict(&dense).unwrap(),
        want.predict(&sparse).unwrap(),
    );
    assert_eq!(a.values.len(), 20_011);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(
        bits(&a.values) == bits(&b.values),
        "predictions from sparse columns"
    );
    // the model learnt from the sparse features: without them it predicts otherwise
    let used = want.feature_importance(sapwood::Importance::Weight);
    assert!(["f0", "f1", "f2"]
        .iter()
        .all(|f| used.get(*f).is_some_and(|&w| w > 0.0)));
}

#[test]
fn sparse_columns_with_bad_indices_are_refused_naming_the_feature() {
    use sapwood::{Column, FeatureMatrix};
    use std::borrow::Cow;
    let col = |rows: Vec<u32>, values: Vec<f32>| Column::Sparse {
        len: 5,
        start: 0,
        rows: Cow::Owned(rows),
        values: Cow::Owned(values),
    };
    // a slice of a column: rows 10..15 of the whole
    let slice = |rows: Vec<u32>| Column::Sparse {
        len: 5,
        start: 10,
        values: Cow::Owned(vec![1.0; rows.len()]),
        rows: Cow::Owned(rows),
    };
    assert!(FeatureMatrix::new(vec!["s".into()], vec![slice(vec![10, 14])]).is_ok());
    for (c, why) in [
        (slice(vec![9, 12]), "row index 9 is outside rows 10..15"),
        (slice(vec![12, 15]), "row index 15 is outside rows 10..15"),
        (
            Column::Sparse {
                len: usize::MAX,
                start: 2,
                rows: Cow::Owned(vec![]),
                values: Cow::Owned(vec![]),
            },
            "overflow",
        ),
        (col(vec![1, 3], vec![1.0]), "2 rows for 1 values"),
        (col(vec![3, 1], vec![1.0, 2.0]), "not ascending"),
        (col(vec![1, 1], vec![1.0, 2.0]), "not ascending"),
        (col(vec![1, 5], vec![1.0, 2.0]), "outside rows 0..5"),
    ] {
        let e = FeatureMatrix::new(vec!["s".into()], vec![c])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`s`") || e.contains("s:") || e.contains(" s "),
            "{e}"
        );
        assert!(e.contains(why), "{e}");
    }
}
