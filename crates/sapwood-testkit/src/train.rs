//! Whole trainings on [`mixed_features`] with any factory, on one
//! worker or several threads joined by sapwood-collective's in-process collective, and the
//! byte comparison of their saved models.

use std::time::Duration;

use sapwood_collective::{in_process, RingCollective};
use sapwood_core::backend::{BackendFactory, CpuFactory};
use sapwood_core::collective::SingleWorker;
use sapwood_core::model::Model;
use sapwood_core::params::{Checked, CommCodec, Params};
use sapwood_core::train::{self, Quiet, Shard};

use crate::data::{labels_for, mixed_features};

/// The data and layout of a training: which rows, split over how many workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// Rows of [`mixed_features`].
    pub rows: usize,
    /// Seed of [`mixed_features`].
    pub seed: u64,
    /// Workers, each with a contiguous slice of the rows and its own backend (a logical
    /// device of a GPU factory).
    pub workers: usize,
    /// Whether the rows carry their weights.
    pub weighted: bool,
}

impl Job {
    /// `rows` rows of seed 17 on one worker, unweighted.
    pub fn rows(rows: usize) -> Self {
        Job {
            rows,
            seed: 17,
            workers: 1,
            weighted: false,
        }
    }

    /// The same job with the rows' weights.
    pub fn weighted(self) -> Self {
        Job {
            weighted: true,
            ..self
        }
    }

    /// The same job on `workers` workers.
    pub fn workers(self, workers: usize) -> Self {
        Job { workers, ..self }
    }

    /// The same job on the data of `seed`.
    pub fn seed(self, seed: u64) -> Self {
        Job { seed, ..self }
    }
}

/// The model of `job` trained with backends from `factory`; with several workers, every
/// worker must end with the same model.
pub fn train_model(params: &Params, factory: &dyn BackendFactory, job: Job) -> Model {
    let params = &Checked::new(params.clone()).unwrap_or_else(|e| panic!("{params:?}: {e}"));
    let data = mixed_features(job.rows, job.seed);
    let (n, workers) = (job.rows, job.workers.max(1));
    let y = labels_for(params.objective, &data.signal);
    let bounds: Vec<usize> = (0..=workers).map(|w| w * n / workers).collect();
    let shard = |rank: usize| {
        let (lo, hi) = (bounds[rank], bounds[rank + 1]);
        Shard {
            features: data.features.slice_rows(lo..hi),
            labels: y[lo..hi].to_vec(),
            weights: job.weighted.then(|| data.weights[lo..hi].to_vec()),
            row_offset: lo as u64,
            queries: None,
        }
    };
    if workers == 1 {
        return train::train(
            params,
            shard(0),
            vec![],
            &mut SingleWorker,
            factory,
            &mut Quiet,
        )
        .unwrap_or_else(|e| panic!("{params:?}: {e}"))
        .model;
    }
    let mut models: Vec<Model> = std::thread::scope(|s| {
        let handles: Vec<_> = in_process(workers, Duration::from_secs(120))
            .into_iter()
            .enumerate()
            .map(|(rank, t)| {
                let shard = shard(rank);
                s.spawn(move || {
                    let mut c = RingCollective::new(t, CommCodec::Auto);
                    train::train(params, shard, vec![], &mut c, factory, &mut Quiet)
                        .unwrap_or_else(|e| panic!("rank {rank} of {workers}: {e}"))
                        .model
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a worker panicked"))
            .collect()
    });
    let first = models[0].to_json();
    for (rank, m) in models.iter().enumerate().skip(1) {
        let json = m.to_json();
        assert!(
            json == first,
            "workers 0 and {rank} of {workers} disagree: {}",
            first_difference(&first, &json)
        );
    }
    models.swap_remove(0)
}

/// The saved model (JSON) of `job` trained with backends from `factory`.
pub fn train_json(params: &Params, factory: &dyn BackendFactory, job: Job) -> String {
    train_model(params, factory, job).to_json()
}

/// Where two model files first differ, with a little context on each side.
pub fn first_difference(a: &str, b: &str) -> String {
    let at = a
        .bytes()
        .zip(b.bytes())
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let around = |s: &str| -> String {
        let mut lo = at.saturating_sub(60).min(s.len());
        while !s.is_char_boundary(lo) {
            lo -= 1;
        }
        let mut hi = (at + 60).min(s.len());
        while !s.is_char_boundary(hi) {
            hi += 1;
        }
        s[lo..hi].to_string()
    };
    format!(
        "first difference at byte {at} (lengths {} and {}):\n  {}\n  {}",
        a.len(),
        b.len(),
        around(a),
        around(b)
    )
}

/// Asserts that `factory` trains `job` into the bytes the CPU backend saves on one worker;
/// `what` names the case in the failure message.
pub fn assert_cpu_model(params: &Params, factory: &dyn BackendFactory, job: Job, what: &str) {
    let cpu = train_json(params, &CpuFactory, job.workers(1));
    let dev = train_json(params, factory, job);
    assert!(
        cpu == dev,
        "{what}: the model differs from the CPU's on one worker ({job:?}, {:?} {:?} {:?}, \
         subsample {}, colsample {}): {}",
        params.objective,
        params.quantisation,
        params.grow_policy,
        params.subsample,
        params.colsample_bytree,
        first_difference(&cpu, &dev)
    );
}
