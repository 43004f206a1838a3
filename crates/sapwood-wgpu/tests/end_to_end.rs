//! Whole trainings on the device against the CPU backend: the saved models must be the same
//! bytes, for every objective, exact and 8-bit gradients, depth-wise and leaf-wise growth,
//! with missing values, a categorical feature, weights, and row and column sampling.

mod common;

use common::{gpu, mixed_features};
use sapwood_core::collective::SingleWorker;
use sapwood_core::params::{GrowPolicy, ObjectiveKind, Params, Quantisation};
use sapwood_core::train::{self, BackendFactory, CpuFactory, Quiet, Shard};
use sapwood_wgpu::{WgpuFactory, WgpuOptions};

fn labels_for(kind: ObjectiveKind, signal: &[f32]) -> Vec<f32> {
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

fn train_json(params: &Params, factory: &dyn BackendFactory, n: usize, weighted: bool) -> String {
    let (features, signal, weights) = mixed_features(n, 17);
    let shard = Shard {
        features: features.slice_rows(0..n),
        labels: labels_for(params.objective, &signal),
        weights: weighted.then_some(weights),
        row_offset: 0,
    };
    train::train(
        params,
        shard,
        vec![],
        &mut SingleWorker,
        factory,
        &mut Quiet,
    )
    .unwrap_or_else(|e| panic!("{params:?}: {e}"))
    .model
    .to_json()
}

fn check(factory: &WgpuFactory, params: Params, weighted: bool) {
    let n = 2500;
    let cpu = train_json(&params, &CpuFactory, n, weighted);
    let dev = train_json(&params, factory, n, weighted);
    assert!(
        cpu == dev,
        "models differ: {:?} {:?} {:?} {:?}",
        params.objective,
        params.quantisation,
        params.grow_policy,
        (params.subsample, params.colsample_bytree)
    );
}

fn all_configs(factory: &WgpuFactory) {
    for objective in [
        ObjectiveKind::SquaredError,
        ObjectiveKind::Logistic,
        ObjectiveKind::Softprob,
    ] {
        for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
            for grow_policy in [GrowPolicy::Depthwise, GrowPolicy::Lossguide] {
                let params = Params {
                    objective,
                    quantisation,
                    grow_policy,
                    num_rounds: 6,
                    max_depth: if grow_policy == GrowPolicy::Depthwise {
                        5
                    } else {
                        0
                    },
                    max_leaves: if grow_policy == GrowPolicy::Lossguide {
                        12
                    } else {
                        0
                    },
                    ..Default::default()
                };
                check(factory, params, false);
            }
        }
    }
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn models_are_byte_identical_to_the_cpu_for_every_objective_and_mode() {
    let _ = gpu();
    all_configs(&WgpuFactory::new());
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn models_are_byte_identical_with_tiles_global_fallback_and_chunks() {
    // tiny tiles and chunks force every rarely taken path
    let factory = WgpuFactory::with_options(WgpuOptions {
        tile_bins: Some(8),
        max_chunk_bytes: Some(1024),
    });
    for (objective, quantisation) in [
        (ObjectiveKind::Logistic, Quantisation::Exact),
        (ObjectiveKind::Softprob, Quantisation::Bits(8)),
    ] {
        let params = Params {
            objective,
            quantisation,
            num_rounds: 4,
            max_bin: 32,
            ..Default::default()
        };
        check(&factory, params, true);
    }
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn models_are_byte_identical_with_sampling_and_weights() {
    let factory = WgpuFactory::new();
    for objective in [ObjectiveKind::SquaredError, ObjectiveKind::Softprob] {
        for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
            let params = Params {
                objective,
                quantisation,
                num_rounds: 6,
                subsample: 0.7,
                colsample_bytree: 0.67,
                seed: 11,
                ..Default::default()
            };
            check(&factory, params, true);
        }
    }
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn device_prediction_equals_model_prediction() {
    let n = 1500;
    let (features, signal, _) = mixed_features(n, 5);
    let params = Params {
        objective: ObjectiveKind::Softprob,
        num_rounds: 5,
        ..Default::default()
    };
    let shard = Shard {
        features: features.slice_rows(0..n),
        labels: labels_for(params.objective, &signal),
        weights: None,
        row_offset: 0,
    };
    let model = train::train(
        &params,
        shard,
        vec![],
        &mut SingleWorker,
        &CpuFactory,
        &mut Quiet,
    )
    .unwrap()
    .model;
    let binned = model.bin(&features).unwrap();
    for rounds in [0, 2, 5] {
        let want = model.predict_binned(&binned, rounds);
        let got = sapwood_wgpu::predict_binned(&gpu(), &model, &binned, rounds).unwrap();
        assert_eq!(
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "rounds {rounds}"
        );
    }
}
