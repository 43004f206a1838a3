//! Workers of one distributed job (Dask's, a Rust caller's) agree on the job before any
//! other exchange: a worker given other parameters, rounds, features or optional columns
//! fails with every other worker, naming the difference, instead of training one garbled
//! model with them.

use std::time::Duration;

use sapwood::collective::{in_process, RingCollective};
use sapwood::{
    Booster, Checked, CommCodec, Dataset, ObjectiveKind, Params, Quiet, Result, Rows, RunOptions,
    TrainJob,
};

const N: usize = 600;

fn data(rows: std::ops::Range<usize>, weights: bool, rename: bool) -> Dataset<'static> {
    let x: Vec<f32> = rows.clone().map(|i| ((i * 37) % 101) as f32).collect();
    let z: Vec<f32> = rows.clone().map(|i| ((i * 13) % 17) as f32).collect();
    let y: Vec<f32> = rows
        .clone()
        .map(|i| (((i * 37) % 101) > 50) as u8 as f32)
        .collect();
    let mut b = Dataset::builder()
        .numeric("x", x)
        .numeric(if rename { "z2" } else { "z" }, z)
        .label(y);
    if weights {
        b = b.weight(rows.map(|i| 1.0 + (i % 3) as f32).collect());
    }
    b.build().unwrap()
}

fn params() -> Params {
    Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: 3,
        max_depth: 3,
        ..Default::default()
    }
}

/// Trains two workers (rows 0..N/2 and N/2..N); worker 1 gets `change` applied.
fn two_workers(change: impl Fn(&mut Params, &mut bool, &mut bool) + Sync) -> Vec<Result<String>> {
    two_workers_continuing([None, None], change)
}

/// Like [`two_workers`], each worker continuing its entry of `init` (if any).
fn two_workers_continuing(
    init: [Option<&Booster>; 2],
    change: impl Fn(&mut Params, &mut bool, &mut bool) + Sync,
) -> Vec<Result<String>> {
    let transports = in_process(2, Duration::from_secs(20));
    std::thread::scope(|s| {
        let handles: Vec<_> = transports
            .into_iter()
            .enumerate()
            .map(|(rank, t)| {
                let change = &change;
                s.spawn(move || {
                    let (mut p, mut weights, mut rename) = (params(), false, false);
                    if rank == 1 {
                        change(&mut p, &mut weights, &mut rename);
                    }
                    let rows = if rank == 0 { 0..N / 2 } else { N / 2..N };
                    let offset = rows.start as u64;
                    let local = data(rows, weights, rename);
                    let mut c = RingCollective::new(t, CommCodec::default());
                    let p = Checked::new(p)?;
                    let run = Checked::new(RunOptions::default())?;
                    let rows = Rows::Columns {
                        train: &local,
                        evals: &[],
                    };
                    let job = TrainJob::new(&p, &run, rows)
                        .continuing(init[rank])
                        .on_rank(&mut c, offset, N as u64);
                    Booster::fit(job, &mut Quiet).map(|b| b.to_json())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn workers_that_agree_train_the_single_process_model() {
    let outs = two_workers(|_, _, _| {});
    let whole = Booster::train(&params(), &data(0..N, false, false), &[]).unwrap();
    for o in outs {
        assert_eq!(o.unwrap(), whole.to_json());
    }
}

#[test]
fn workers_started_for_different_jobs_fail_naming_the_difference() {
    type Change = fn(&mut Params, &mut bool, &mut bool);
    let cases: [(&str, Change, &str); 5] = [
        (
            "lambda",
            |p, _, _| p.lambda = 50.0,
            "`lambda` is 50.0 on rank 1 but 1.0",
        ),
        (
            "rounds",
            |p, _, _| p.num_rounds = 9,
            "`num_rounds` is 9 on rank 1 but 3",
        ),
        (
            "objective",
            |p, _, _| p.objective = ObjectiveKind::SquaredError,
            "`objective`",
        ),
        (
            "weights",
            |_, w, _| *w = true,
            "`sample weights` is given on rank 1 but not given",
        ),
        (
            "features",
            |_, _, r| *r = true,
            "`features` is x, z2 on rank 1 but x, z",
        ),
    ];
    for (what, change, named) in cases {
        for (rank, out) in two_workers(change).into_iter().enumerate() {
            let err = out.expect_err(what).to_string();
            assert!(
                err.contains("do not describe the same job") && err.contains(named),
                "{what}, rank {rank}: {err}"
            );
        }
    }
}

#[test]
fn ranks_continuing_a_model_train_the_single_process_continuation() {
    let whole = data(0..N, false, false);
    let first = Booster::train(&params(), &whole, &[]).unwrap();
    let continued = Booster::train_from_model(
        &params(),
        &RunOptions::default(),
        &first,
        &whole,
        &[],
        &mut Quiet,
    )
    .unwrap();
    for out in two_workers_continuing([Some(&first), Some(&first)], |_, _, _| {}) {
        assert_eq!(out.unwrap(), continued.to_json());
    }
}

#[test]
fn a_rank_continuing_a_model_the_others_do_not_fails_naming_it() {
    // the rank with a model bins with its cuts, the other agrees on cuts: without the
    // model in the job's facts the two would exchange different messages
    let first = Booster::train(&params(), &data(0..N, false, false), &[]).unwrap();
    for (rank, out) in two_workers_continuing([None, Some(&first)], |_, _, _| {})
        .into_iter()
        .enumerate()
    {
        let err = out.expect_err("one rank continues").to_string();
        assert!(
            err.contains("do not describe the same job") && err.contains("the model to continue"),
            "rank {rank}: {err}"
        );
    }
}
