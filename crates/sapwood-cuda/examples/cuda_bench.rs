//! CUDA benchmark, prepared for an H200 run (nothing here has run on a GPU yet):
//! 1. byte-identity of a trained model against the CPU backend;
//! 2. histogram-kernel throughput at the root (GB/s of bins and values read, against the
//!    H200's 4.8 TB/s);
//! 3. end-to-end training time for 1M and 10M rows x 28 features, 100 rounds, depth 8 and
//!    leaf-wise 255 leaves.
//!
//! `cargo run -p sapwood-cuda --release --example cuda_bench [-- --quick]` with NVRTC 13.0 on
//! LD_LIBRARY_PATH. Without a GPU it exits with a clear message (status 2).

use std::sync::Arc;
use std::time::Instant;

use sapwood_core::backend::{BackendFactory, CpuFactory, HistBackend, ShardData, TreeSetup};
use sapwood_core::collective::SingleWorker;
use sapwood_core::data::{BinnedMatrix, Bins, Column, FeatureMatrix};
use sapwood_core::hash::SampleRate;
use sapwood_core::objective::{Objective, ObjectiveKind};
use sapwood_core::params::{GrowPolicy, Params, Quantisation};
use sapwood_core::quantise::{GroupScales, Scale};
use sapwood_core::train::{self, Quiet, Shard};
use sapwood_core::tree::NodeId;
use sapwood_cuda::{CudaBackend, CudaFactory};
use sapwood_testkit::Rng;

const FEATURES: usize = 28;
const PEAK_GBS: f64 = 4800.0;

/// A HIGGS-like problem: 28 numeric features, a nonlinear logistic target.
fn data(n: usize, seed: u64) -> (FeatureMatrix<'static>, Vec<f32>) {
    let mut rng = Rng(seed);
    let cols: Vec<Vec<f32>> = (0..FEATURES)
        .map(|_| (0..n).map(|_| rng.unit() * 4.0 - 2.0).collect())
        .collect();
    let y = (0..n)
        .map(|i| {
            let s = cols[0][i] * cols[1][i] + (cols[2][i] * 1.5).sin() - cols[3][i].abs()
                + 0.3 * cols[4][i];
            (s + (rng.unit() - 0.5) > 0.0) as u8 as f32
        })
        .collect();
    let names = (0..FEATURES).map(|f| format!("f{f}")).collect();
    let columns = cols
        .into_iter()
        .map(|c| Column::Numeric(c.into()))
        .collect();
    (FeatureMatrix::new(names, columns).unwrap(), y)
}

fn train_time(params: &Params, n: usize, factory: &dyn BackendFactory) -> (String, f64) {
    let (features, y) = data(n, 7);
    let shard = Shard {
        features: features.slice_rows(0..n),
        labels: y,
        weights: None,
        row_offset: 0,
    };
    let t = Instant::now();
    let model = train::train(
        params,
        shard,
        vec![],
        &mut SingleWorker,
        factory,
        &mut Quiet,
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .model;
    (model.to_json(), t.elapsed().as_secs_f64())
}

fn hist_throughput(n: usize) {
    let mut rng = Rng(3);
    let bins: Vec<u8> = (0..n * FEATURES)
        .map(|_| (rng.next_u64() % 256) as u8)
        .collect();
    let binned = BinnedMatrix::from_bins(n, FEATURES, Bins::U8(bins)).unwrap();
    let offsets: Vec<u32> = (0..=FEATURES as u32).map(|f| f * 256).collect();
    let labels: Vec<f32> = (0..n).map(|_| (rng.next_u64() % 2) as f32).collect();
    let objective = Objective::new(ObjectiveKind::Logistic, 1).unwrap();
    let gpu = CudaFactory::new().open_device().unwrap();
    let mut b = CudaBackend::new(
        gpu,
        ShardData {
            binned: Arc::new(binned),
            offsets,
            labels,
            weights: None,
            objective,
            base_margin: vec![0.0],
            row_offset: 0,
        },
        None,
    )
    .unwrap();
    let max = b.compute_gradients().unwrap()[0];
    let setup = TreeSetup {
        tree_index: 0,
        group: 0,
        seed: 1,
        row_sample: SampleRate::new(1.0),
        scales: GroupScales {
            grad: Scale::agree(max[0], n as u64, Quantisation::Exact),
            hess: Scale::agree(max[1], n as u64, Quantisation::Exact),
        },
    };
    b.start_tree(&setup).unwrap();
    let mut out = vec![[0i64; 2]; 256 * FEATURES];
    b.build_histograms(&[NodeId::ROOT], &mut out).unwrap();
    let reps = 20;
    let t = Instant::now();
    for _ in 0..reps {
        b.build_histograms(&[NodeId::ROOT], &mut out).unwrap();
    }
    let secs = t.elapsed().as_secs_f64() / reps as f64;
    // per row: 28 bins (padded to 7 words), a row index and a (g, h) pair of i64
    let bytes = n as f64 * (4.0 * FEATURES.div_ceil(4) as f64 + 4.0 + 16.0);
    let gbs = bytes / secs / 1e9;
    println!(
        "histogram, root of {n} rows x {FEATURES}: {:.3} ms per node incl. read-back, {gbs:.0} GB/s \
         ({:.1}% of {PEAK_GBS} GB/s)",
        secs * 1e3,
        100.0 * gbs / PEAK_GBS
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    match sapwood_cuda::device_count() {
        Ok(n) => println!("{n} CUDA device(s)"),
        Err(e) => {
            eprintln!("cuda_bench needs a CUDA GPU: {e}");
            std::process::exit(2);
        }
    }
    let gpu = CudaFactory::new().open_device().unwrap_or_else(|e| {
        eprintln!("cuda_bench: {e}");
        std::process::exit(2);
    });
    println!(
        "device 0: {} (sm_{}, {:?})",
        gpu.name(),
        gpu.shared.arch,
        gpu.shared.target
    );
    drop(gpu);

    // 1. byte identity against the CPU
    for (policy, depth, leaves) in [
        (GrowPolicy::Depthwise, 8, 0),
        (GrowPolicy::Lossguide, 0, 255),
    ] {
        for quantisation in [Quantisation::Exact, Quantisation::Bits(8)] {
            let params = Params {
                objective: ObjectiveKind::Logistic,
                grow_policy: policy,
                max_depth: depth,
                max_leaves: leaves,
                quantisation,
                num_rounds: 10,
                ..Default::default()
            };
            let (cpu, _) = train_time(&params, 200_000, &CpuFactory);
            let (dev, _) = train_time(&params, 200_000, &CudaFactory::new());
            let same = cpu == dev;
            println!(
                "identity {policy:?} {quantisation:?}, 200k rows, 10 rounds: {}",
                if same { "byte-identical" } else { "DIFFERENT" }
            );
            if !same {
                std::process::exit(1);
            }
        }
    }

    // 2. histogram throughput
    for n in [1_000_000, 10_000_000] {
        hist_throughput(n);
    }

    // 3. end to end
    let rounds = if quick { 10 } else { 100 };
    for n in [1_000_000usize, 10_000_000] {
        for (name, policy, depth, leaves) in [
            ("depth 8", GrowPolicy::Depthwise, 8, 0),
            ("255 leaves", GrowPolicy::Lossguide, 0, 255),
        ] {
            let params = Params {
                objective: ObjectiveKind::Logistic,
                grow_policy: policy,
                max_depth: depth,
                max_leaves: leaves,
                num_rounds: rounds,
                ..Default::default()
            };
            let (_, secs) = train_time(&params, n, &CudaFactory::new());
            println!(
                "train {n} rows x {FEATURES}, {rounds} rounds, {name}: {secs:.2} s (incl. binning)"
            );
        }
    }
}
