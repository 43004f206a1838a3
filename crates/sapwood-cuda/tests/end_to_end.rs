//! Whole trainings on the GPU against the CPU backend: the saved models must be the same
//! bytes, for every objective, exact and 8-bit gradients, depth-wise and leaf-wise growth,
//! with missing values and a categorical feature; also four logical devices (streams) on the
//! GPUs through sapwood-collective's in-process collective, and device prediction.
//!
//! Ignored unless the build script finds libcuda (`SAPWOOD_REQUIRE_CUDA=1` forces them).

mod common;

use common::{labels_for, mixed_features, require_gpu, train_json};
use sapwood_core::collective::SingleWorker;
use sapwood_core::params::{GrowPolicy, ObjectiveKind, Params, Quantisation};
use sapwood_core::train::{self, CpuFactory, Quiet, Shard};
use sapwood_cuda::{CudaFactory, CudaOptions};

fn configs() -> Vec<Params> {
    let mut v = Vec::new();
    for objective in [
        ObjectiveKind::SquaredError,
        ObjectiveKind::Logistic,
        ObjectiveKind::Softprob,
    ] {
        for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
            for grow_policy in [GrowPolicy::Depthwise, GrowPolicy::Lossguide] {
                let depthwise = grow_policy == GrowPolicy::Depthwise;
                v.push(Params {
                    objective,
                    quantisation,
                    grow_policy,
                    num_rounds: 6,
                    max_depth: if depthwise { 5 } else { 0 },
                    max_leaves: if depthwise { 0 } else { 12 },
                    ..Default::default()
                });
            }
        }
    }
    v
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn models_are_byte_identical_to_the_cpu_for_every_objective_and_mode() {
    require_gpu();
    let factory = CudaFactory::new();
    for params in configs() {
        let cpu = train_json(&params, &CpuFactory, 3000, 1, false);
        let gpu = train_json(&params, &factory, 3000, 1, false);
        assert!(
            cpu == gpu,
            "models differ: {:?} {:?} {:?}",
            params.objective,
            params.quantisation,
            params.grow_policy
        );
    }
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn models_are_byte_identical_with_tiles_global_fallback_weights_and_sampling() {
    require_gpu();
    // tiny tiles force several shared tiles per node and the global-memory kernel
    let factory = CudaFactory::with_options(CudaOptions {
        devices: None,
        tile_bins: Some(8),
    });
    for (objective, quantisation) in [
        (ObjectiveKind::Logistic, Quantisation::Exact),
        (ObjectiveKind::Softprob, Quantisation::Bits(8)),
    ] {
        let params = Params {
            objective,
            quantisation,
            num_rounds: 5,
            max_bin: 32,
            subsample: 0.7,
            colsample_bytree: 0.67,
            seed: 11,
            ..Default::default()
        };
        let cpu = train_json(&params, &CpuFactory, 2500, 1, true);
        let gpu = train_json(&params, &factory, 2500, 1, true);
        assert!(cpu == gpu, "models differ: {objective:?} {quantisation:?}");
    }
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn four_logical_devices_through_the_in_process_collective() {
    require_gpu();
    // four workers, each with its own stream; all on GPU 0 here, round-robin with more GPUs
    let one_gpu = CudaFactory::with_options(CudaOptions {
        devices: Some(vec![0, 0, 0, 0]),
        tile_bins: None,
    });
    let every_gpu = CudaFactory::new();
    for params in configs().into_iter().step_by(3) {
        let cpu = train_json(&params, &CpuFactory, 2400, 1, true);
        let cpu4 = train_json(&params, &CpuFactory, 2400, 4, true);
        assert!(cpu == cpu4, "the CPU disagrees with itself on 4 workers");
        for factory in [&one_gpu, &every_gpu] {
            let gpu4 = train_json(&params, factory, 2400, 4, true);
            assert!(cpu == gpu4, "4 logical devices differ: {params:?}");
        }
    }
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn device_prediction_equals_model_prediction() {
    require_gpu();
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
    let gpu = CudaFactory::new().open_device().unwrap();
    for rounds in [0, 2, 5] {
        let want = model.predict_binned(&binned, rounds);
        let got = sapwood_cuda::predict_binned(&gpu, &model, &binned, rounds).unwrap();
        assert_eq!(
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "rounds {rounds}"
        );
    }
}
