//! Shared helpers of the GPU tests: data with missing values and a categorical feature,
//! labels per objective, training on one or several workers.
#![allow(dead_code)]

use std::time::Duration;

use sapwood_collective::{in_process, RingCollective};
use sapwood_core::collective::SingleWorker;
use sapwood_core::data::{Column, FeatureMatrix};
use sapwood_core::params::{CommCodec, ObjectiveKind, Params};
use sapwood_core::train::{self, BackendFactory, Quiet, Shard};

/// Fails with a clear message where the driver is absent at run time although the build
/// script found it (or `SAPWOOD_REQUIRE_CUDA=1` was set).
pub fn require_gpu() {
    if let Err(e) = sapwood_cuda::device_count() {
        panic!("this test needs a CUDA GPU: {e}");
    }
}

/// A small deterministic generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A numeric feature, one with missing values (every 7th row) and a categorical one; the
/// signal and weights.
pub fn mixed_features(n: usize, seed: u64) -> (FeatureMatrix<'static>, Vec<f32>, Vec<f32>) {
    let mut rng = Rng(seed);
    let x: Vec<f32> = (0..n).map(|_| rng.unit() * 10.0 - 5.0).collect();
    let z: Vec<f32> = (0..n)
        .map(|i| {
            if i % 7 == 0 {
                f32::NAN
            } else {
                rng.unit() * 3.0
            }
        })
        .collect();
    let c: Vec<u32> = (0..n).map(|_| rng.below(6) as u32).collect();
    let signal: Vec<f32> = (0..n)
        .map(|i| {
            let zz = if z[i].is_nan() { 1.0 } else { z[i] };
            (x[i] * 0.8).sin()
                + zz * 0.5
                + [0.3, -0.7, 1.1, 0.0, -0.2, 0.6][c[i] as usize]
                + (rng.unit() - 0.5) * 0.3
        })
        .collect();
    let levels: Vec<String> = (0..6).map(|i| format!("c{i}")).collect();
    let features = FeatureMatrix::new(
        vec!["x".into(), "z".into(), "c".into()],
        vec![
            Column::Numeric(x.into()),
            Column::Numeric(z.into()),
            Column::Categorical {
                codes: c.into(),
                levels,
            },
        ],
    )
    .unwrap();
    let weights = (0..n).map(|i| 0.5 + (i % 4) as f32 * 0.25).collect();
    (features, signal, weights)
}

/// Labels for `kind` from the signal (3 classes for softmax).
pub fn labels_for(kind: ObjectiveKind, signal: &[f32]) -> Vec<f32> {
    match kind {
        ObjectiveKind::SquaredError => signal.to_vec(),
        ObjectiveKind::Logistic => signal.iter().map(|&s| (s > 0.4) as u8 as f32).collect(),
        ObjectiveKind::Softprob => signal
            .iter()
            .map(|&s| {
                (if s < 0.0 {
                    0
                } else if s < 1.0 {
                    1
                } else {
                    2
                }) as f32
            })
            .collect(),
    }
}

/// The model JSON of a training on `workers` workers (threads joined by the in-process
/// collective of sapwood-collective), each with its own backend from `factory`.
pub fn train_json(
    params: &Params,
    factory: &dyn BackendFactory,
    n: usize,
    workers: usize,
    weighted: bool,
) -> String {
    let (features, signal, weights) = mixed_features(n, 17);
    let y = labels_for(params.objective, &signal);
    if workers == 1 {
        let shard = Shard {
            features: features.slice_rows(0..n),
            labels: y,
            weights: weighted.then_some(weights),
            row_offset: 0,
        };
        return train::train(
            params,
            shard,
            vec![],
            &mut SingleWorker,
            factory,
            &mut Quiet,
        )
        .unwrap_or_else(|e| panic!("{params:?}: {e}"))
        .model
        .to_json();
    }
    let bounds: Vec<usize> = (0..=workers).map(|w| w * n / workers).collect();
    let models: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = in_process(workers, Duration::from_secs(120))
            .into_iter()
            .enumerate()
            .map(|(rank, t)| {
                let (lo, hi) = (bounds[rank], bounds[rank + 1]);
                let shard = Shard {
                    features: features.slice_rows(lo..hi),
                    labels: y[lo..hi].to_vec(),
                    weights: weighted.then(|| weights[lo..hi].to_vec()),
                    row_offset: lo as u64,
                };
                s.spawn(move || {
                    let mut c = RingCollective::new(t, CommCodec::Auto);
                    train::train(params, shard, vec![], &mut c, factory, &mut Quiet)
                        .unwrap_or_else(|e| panic!("rank {rank}: {e}"))
                        .model
                        .to_json()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(models.windows(2).all(|w| w[0] == w[1]), "workers disagree");
    models.into_iter().next().unwrap()
}
