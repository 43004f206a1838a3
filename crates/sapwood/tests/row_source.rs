//! Rows read in batches (`Rows::Stream`): the job reads a training source twice (a sample
//! for the cuts, then the bins) and an evaluation source once, and saves the model the same
//! rows in memory save, on in-process workers and on ranks alike; ranks agree on what their
//! sources say before exchanging cuts, and a query two ranks share is refused.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sapwood::collective::{in_process, RingCollective};
use sapwood::{
    Booster, Checked, CommCodec, Dataset, Error, JobFacts, Label, ObjectiveKind, Params, Quiet,
    Result, RowBatch, RowSource, Rows, RunOptions, TrainJob,
};

const N: usize = 900;

/// Feature values, labels, weights, base margins and query ids of rows `rows`.
struct Columns {
    x: Vec<f32>,
    z: Vec<f32>,
    y: Vec<f32>,
    w: Vec<f32>,
    margin: Vec<f32>,
    qid: Vec<i64>,
}

fn columns(rows: Range<usize>) -> Columns {
    let r = || rows.clone();
    Columns {
        x: r().map(|i| ((i * 37) % 101) as f32).collect(),
        z: r().map(|i| ((i * 13) % 17) as f32).collect(),
        y: r()
            .map(|i| ((((i * 37) % 101) > 50) as u8 + ((i * 7) % 3 == 0) as u8).min(1) as f32)
            .collect(),
        w: r().map(|i| 1.0 + (i % 3) as f32).collect(),
        margin: r().map(|i| ((i % 5) as f32 - 2.0) * 0.1).collect(),
        // queries of 30 rows
        qid: r().map(|i| (i / 30) as i64).collect(),
    }
}

/// What the rows carry besides features and labels.
#[derive(Clone, Copy, Default)]
struct Carry {
    weights: bool,
    margins: bool,
    queries: bool,
}

impl Carry {
    /// What an evaluation set of these rows carries: evaluation sets take no base margins.
    fn evaluated(self) -> Carry {
        Carry {
            margins: false,
            ..self
        }
    }
}

/// The model of `train` with the evaluation set `valid`, read as streams on `workers`
/// in-process workers.
fn fit_stream(p: &Params, workers: usize, train: &dyn RowSource, valid: &dyn RowSource) -> Booster {
    let (cp, run) = checked(p.clone(), workers);
    let evals: [(&str, &dyn RowSource); 1] = [("valid", valid)];
    let rows = Rows::Stream {
        train,
        evals: &evals,
    };
    Booster::fit(TrainJob::new(&cp, &run, rows), &mut Quiet).unwrap()
}

/// The model of `train` read as a stream by one process.
fn alone(p: &Params, train: &dyn RowSource) -> String {
    let (cp, run) = checked(p.clone(), 1);
    let rows = Rows::Stream { train, evals: &[] };
    Booster::fit(TrainJob::new(&cp, &run, rows), &mut Quiet)
        .unwrap()
        .to_json()
}

/// Rows `rows` in memory, as the reference a stream must match.
fn dataset(rows: Range<usize>, carry: Carry) -> Dataset<'static> {
    let c = columns(rows);
    let mut b = Dataset::builder()
        .numeric("x", c.x)
        .numeric("z", c.z)
        .label(c.y);
    if carry.weights {
        b = b.weight(c.w);
    }
    if carry.margins {
        b = b.base_margin(c.margin);
    }
    let mut d = b.build().unwrap();
    if carry.queries {
        d.set_group(&c.qid).unwrap();
    }
    d
}

/// Rows `rows` read in batches of `batch` rows, counting the passes over them.
struct Batches {
    rows: Range<usize>,
    batch: usize,
    carry: Carry,
    passes: AtomicUsize,
    /// The fact this source adds for the ranks to agree on.
    fact: &'static str,
    /// A reader failure at this batch.
    fail_at: Option<usize>,
    /// Whether passes after the first stop one batch short (a reader that lost a batch).
    shrinks: bool,
}

impl Batches {
    fn new(rows: Range<usize>, carry: Carry) -> Self {
        Batches {
            rows,
            batch: 128,
            carry,
            passes: AtomicUsize::new(0),
            fact: "one file",
            fail_at: None,
            shrinks: false,
        }
    }
}

impl RowSource for Batches {
    fn n_rows(&self) -> u64 {
        self.rows.len() as u64
    }

    fn describe(&self, facts: &mut JobFacts) {
        facts.push("the source", self.fact);
    }

    fn for_each_batch(&self, each: &mut dyn FnMut(RowBatch<'_>) -> Result<()>) -> Result<()> {
        let pass = self.passes.fetch_add(1, Ordering::Relaxed);
        let end = match self.shrinks && pass > 0 {
            true => self.rows.end - self.batch,
            false => self.rows.end,
        };
        let mut start = self.rows.start;
        let mut index = 0;
        while start < end || index == 0 {
            if self.fail_at == Some(index) {
                return Err(Error::Read("disk on fire".into()));
            }
            let stop = (start + self.batch).min(end);
            let c = columns(start..stop);
            let d = Dataset::builder()
                .numeric("x", c.x)
                .numeric("z", c.z)
                .build()
                .unwrap();
            each(RowBatch {
                features: d.features(),
                label: Some(Label::Values(c.y)),
                weight: self.carry.weights.then_some(c.w),
                base_margin: self.carry.margins.then_some(c.margin),
                query_ids: self.carry.queries.then_some(c.qid),
            })?;
            start = stop;
            index += 1;
        }
        Ok(())
    }
}

fn checked(p: Params, workers: usize) -> (Checked<Params>, Checked<RunOptions>) {
    let run = RunOptions {
        workers,
        ..RunOptions::default()
    };
    (Checked::new(p).unwrap(), Checked::new(run).unwrap())
}

fn binary() -> Params {
    Params {
        objective: ObjectiveKind::Logistic,
        num_rounds: 4,
        max_depth: 3,
        bin_sample_rows: 400,
        ..Default::default()
    }
}

fn ranking() -> Params {
    Params {
        objective: ObjectiveKind::RankNdcg,
        ..binary()
    }
}

/// Binary rows with weights and base margins.
fn weighted() -> (Params, Carry) {
    let carry = Carry {
        weights: true,
        margins: true,
        ..Carry::default()
    };
    (binary(), carry)
}

/// Ranked rows in queries.
fn ranked() -> (Params, Carry) {
    let carry = Carry {
        queries: true,
        ..Carry::default()
    };
    (ranking(), carry)
}

/// The model of rows `0..N` in memory, with the evaluation set `N..N + 300`.
fn in_memory(p: &Params, carry: Carry, workers: usize) -> String {
    let (p, run) = checked(p.clone(), workers);
    let (train, valid) = (dataset(0..N, carry), dataset(N..N + 300, carry.evaluated()));
    let evals = [("valid", &valid)];
    let rows = Rows::Columns {
        train: &train,
        evals: &evals,
    };
    Booster::fit(TrainJob::new(&p, &run, rows), &mut Quiet)
        .unwrap()
        .to_json()
}

#[test]
fn a_stream_saves_the_in_memory_model_and_is_read_twice() {
    let cases = [(binary(), Carry::default()), weighted(), ranked()];
    for (p, carry) in cases {
        let expected = in_memory(&p, carry, 1);
        for workers in [1, 3] {
            let train = Batches::new(0..N, carry);
            let valid = Batches::new(N..N + 300, carry.evaluated());
            let model = fit_stream(&p, workers, &train, &valid);
            assert!(
                model.to_json() == expected,
                "{} with {workers} workers: the stream's model differs",
                p.objective
            );
            assert_eq!(
                train.passes.load(Ordering::Relaxed),
                2,
                "a training source is read twice"
            );
            assert_eq!(
                valid.passes.load(Ordering::Relaxed),
                1,
                "an evaluation source is read once"
            );
            assert!(!model.history().is_empty() && model.history()[0][0].dataset == "valid");
        }
    }
}

#[test]
fn a_stream_continuing_a_model_is_read_once_with_its_cuts() {
    let p = binary();
    let (cp, run) = checked(p.clone(), 1);
    let first = in_memory(&p, Carry::default(), 1);
    let init = Booster::from_json(&first).unwrap();
    let train = Batches::new(0..N, Carry::default());
    let job = TrainJob::new(
        &cp,
        &run,
        Rows::Stream {
            train: &train,
            evals: &[],
        },
    )
    .continuing(Some(&init));
    let continued = Booster::fit(job, &mut Quiet).unwrap();
    assert_eq!(
        train.passes.load(Ordering::Relaxed),
        1,
        "the model's cuts need no sampling pass"
    );
    let d = dataset(0..N, Carry::default());
    let job = TrainJob::new(
        &cp,
        &run,
        Rows::Columns {
            train: &d,
            evals: &[],
        },
    )
    .continuing(Some(&init));
    let reference = Booster::fit(job, &mut Quiet).unwrap();
    assert!(continued.to_json() == reference.to_json());
}

/// Trains rows `0..N` on two ranks, rank `r` reading `parts[r]`; `change` alters rank 1's
/// source.
fn two_ranks(
    p: &Params,
    carry: Carry,
    parts: [Range<usize>; 2],
    change: fn(&mut Batches),
) -> Vec<Result<String>> {
    let transports = in_process(2, Duration::from_secs(20));
    std::thread::scope(|s| {
        let handles: Vec<_> = transports
            .into_iter()
            .enumerate()
            .map(|(rank, t)| {
                let rows = parts[rank].clone();
                s.spawn(move || {
                    let (cp, run) = checked(p.clone(), 1);
                    let mut train = Batches::new(rows.clone(), carry);
                    if rank == 1 {
                        change(&mut train);
                    }
                    let mut c = RingCollective::new(t, CommCodec::default());
                    let job = TrainJob::new(
                        &cp,
                        &run,
                        Rows::Stream {
                            train: &train,
                            evals: &[],
                        },
                    )
                    .on_rank(&mut c, rows.start as u64, N as u64);
                    Booster::fit(job, &mut Quiet).map(|b| b.to_json())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn ranks_reading_streams_save_the_single_process_model() {
    for (p, carry) in [weighted(), ranked()] {
        let expected = alone(&p, &Batches::new(0..N, carry));
        // 450 ends a query of 30 rows
        for result in two_ranks(&p, carry, [0..450, 450..N], |_| {}) {
            assert!(
                result.unwrap() == expected,
                "{}: the ranks' model differs",
                p.objective
            );
        }
    }
}

#[test]
fn ranks_whose_sources_differ_fail_naming_it_before_exchanging_cuts() {
    let results = two_ranks(&binary(), Carry::default(), [0..450, 450..N], |b| {
        b.fact = "another file"
    });
    for r in results {
        let e = r.unwrap_err().to_string();
        assert!(e.contains("the source"), "{e}");
    }
}

#[test]
fn a_query_two_ranks_share_is_refused() {
    let (p, carry) = ranked();
    // 440 falls inside the query of rows 420..450
    for r in two_ranks(&p, carry, [0..440, 440..N], |_| {}) {
        let e = r.unwrap_err();
        assert!(
            matches!(
                e,
                Error::QuerySpansRanks {
                    first: 0,
                    second: 1
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn a_readers_error_is_reported_as_it_is_and_names_its_evaluation_set() {
    let (cp, run) = checked(binary(), 1);
    let mut failing = Batches::new(0..N, Carry::default());
    failing.fail_at = Some(3);
    let rows = Rows::Stream {
        train: &failing,
        evals: &[],
    };
    let e = Booster::fit(TrainJob::new(&cp, &run, rows), &mut Quiet).unwrap_err();
    assert!(matches!(&e, Error::Read(m) if m == "disk on fire"), "{e}");
    // an evaluation source's error names the set
    let train = Batches::new(0..N, Carry::default());
    let mut valid = Batches::new(N..N + 300, Carry::default());
    valid.fail_at = Some(0);
    let evals: [(&str, &dyn RowSource); 1] = [("holdout", &valid)];
    let rows = Rows::Stream {
        train: &train,
        evals: &evals,
    };
    let e = Booster::fit(TrainJob::new(&cp, &run, rows), &mut Quiet)
        .unwrap_err()
        .to_string();
    assert!(e.contains("holdout") && e.contains("disk on fire"), "{e}");
}

#[test]
fn a_dataset_in_memory_is_a_one_batch_source() {
    for (p, carry) in [weighted(), ranked()] {
        let expected = in_memory(&p, carry, 1);
        let (train, valid) = (dataset(0..N, carry), dataset(N..N + 300, carry.evaluated()));
        let model = fit_stream(&p, 1, &train, &valid);
        assert!(
            model.to_json() == expected,
            "{}: a dataset read as a stream trains another model",
            p.objective
        );
    }
}

#[test]
fn a_source_whose_passes_read_other_rows_is_refused() {
    let (cp, run) = checked(binary(), 1);
    let mut train = Batches::new(0..N, Carry::default());
    train.shrinks = true;
    let rows = Rows::Stream {
        train: &train,
        evals: &[],
    };
    let e = Booster::fit(TrainJob::new(&cp, &run, rows), &mut Quiet)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("binning pass read") && e.contains(&format!("the source has {N}")),
        "{e}"
    );
}

#[test]
fn ranks_streaming_datasets_that_number_their_own_queries_are_not_refused() {
    // a dataset numbers its queries from 0: rank 0 holding one query (ids 0) and rank 1
    // starting at its own query 0 is no query spanning the two
    let (p, carry) = ranked();
    let expected = alone(&p, &dataset(0..N, carry));
    let (cp, run) = checked(p.clone(), 1);
    let parts = [0..30, 30..N];
    let transports = in_process(2, Duration::from_secs(20));
    let models: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = transports
            .into_iter()
            .zip(parts)
            .map(|(t, rows)| {
                let (cp, run) = (&cp, &run);
                s.spawn(move || {
                    let local = dataset(rows.clone(), carry);
                    let mut c = RingCollective::new(t, CommCodec::default());
                    let job = TrainJob::new(
                        cp,
                        run,
                        Rows::Stream {
                            train: &local,
                            evals: &[],
                        },
                    )
                    .on_rank(&mut c, rows.start as u64, N as u64);
                    Booster::fit(job, &mut Quiet).unwrap().to_json()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for m in models {
        assert!(m == expected, "the ranks' model differs");
    }
}
