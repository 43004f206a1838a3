//! Histogram-kernel throughput and end-to-end training time, wgpu against the CPU backend.
//!
//! `cargo run -p sapwood-wgpu --release --example wgpu_bench -- [rows] [features] [rounds]`
//! (defaults 200000, 28, 20). On lavapipe (software Vulkan) this is only a smoke test.

use std::sync::Arc;
use std::time::Instant;

use sapwood_core::backend::{BackendFactory, CpuFactory, ShardData, TreeSetup};
use sapwood_core::collective::SingleWorker;
use sapwood_core::data::{BinnedMatrix, Bins, Column, FeatureMatrix};
use sapwood_core::hash::SampleRate;
use sapwood_core::objective::{Objective, ObjectiveKind};
use sapwood_core::params::{Checked, Params, Quantisation};
use sapwood_core::quantise::{GroupScales, Scale};
use sapwood_core::train::{self, Quiet, Shard};
use sapwood_core::tree::NodeId;
use sapwood_wgpu::WgpuFactory;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn lcg(state: &mut u64) -> f32 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (*state >> 40) as f32 / (1u64 << 24) as f32
}

fn hist_throughput(factory: &dyn BackendFactory, n: usize, nf: usize) -> sapwood_core::Result<f64> {
    let mut s = 1u64;
    let bins: Vec<u8> = (0..n * nf).map(|_| (lcg(&mut s) * 255.0) as u8).collect();
    let binned = BinnedMatrix::from_bins(n, nf, Bins::U8(bins))?;
    let offsets: Vec<u32> = (0..=nf as u32).map(|f| f * 256).collect();
    let labels: Vec<f32> = (0..n).map(|_| lcg(&mut s)).collect();
    let mut b = factory.create(ShardData {
        binned: Arc::new(binned),
        offsets,
        labels,
        weights: None,
        objective: Objective::new(ObjectiveKind::SquaredError, 1)?,
        base_margin: vec![0.0],
        initial_margins: None,
        row_offset: 0,
    })?;
    let max = b.compute_gradients()?;
    b.start_tree(&TreeSetup {
        tree_index: 0,
        group: 0,
        seed: 0,
        row_sample: SampleRate::new(1.0),
        scales: GroupScales {
            grad: Scale::agree(max[0][0], n as u64, Quantisation::Exact),
            hess: Scale::agree(max[0][1], n as u64, Quantisation::Exact),
        },
    })?;
    let mut out = vec![[0i64; 2]; 256 * nf];
    b.build_histograms(&[NodeId::ROOT], &mut out)?;
    let reps = 5;
    let t = Instant::now();
    for _ in 0..reps {
        b.build_histograms(&[NodeId::ROOT], &mut out)?;
    }
    let secs = t.elapsed().as_secs_f64() / reps as f64;
    Ok((n * nf) as f64 / secs / 1e9)
}

fn train_secs(factory: &dyn BackendFactory, n: usize, nf: usize, rounds: usize) -> (f64, String) {
    let mut s = 7u64;
    let cols: Vec<Vec<f32>> = (0..nf)
        .map(|_| (0..n).map(|_| lcg(&mut s) * 4.0 - 2.0).collect())
        .collect();
    let y: Vec<f32> = (0..n)
        .map(|i| (cols[0][i] * 1.3).sin() + cols[1 % nf][i] * 0.5 + lcg(&mut s) * 0.1)
        .collect();
    let features = FeatureMatrix::new(
        (0..nf).map(|f| format!("f{f}")).collect(),
        cols.into_iter()
            .map(|c| Column::Numeric(c.into()))
            .collect(),
    )
    .expect("features");
    let params = Checked::new(Params {
        num_rounds: rounds,
        ..Default::default()
    })
    .expect("valid parameters");
    let t = Instant::now();
    let model = train::train(
        &params,
        Shard {
            features: features.slice_rows(0..n),
            labels: y,
            weights: None,
            row_offset: 0,
            queries: None,
        },
        vec![],
        &mut SingleWorker,
        factory,
        &mut Quiet,
    )
    .expect("training")
    .model;
    (t.elapsed().as_secs_f64(), model.to_json())
}

fn main() {
    let (n, nf, rounds) = (arg(1, 200_000), arg(2, 28), arg(3, 20));
    let wgpu = WgpuFactory::new();
    match wgpu.adapter_names() {
        Ok(names) => println!("adapters: {}", names.join(", ")),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
    for (name, f) in [("cpu", &CpuFactory as &dyn BackendFactory), ("wgpu", &wgpu)] {
        match hist_throughput(f, n, nf) {
            Ok(gbs) => println!("{name:>4}: root histogram {gbs:.3} GB/s of bins read"),
            Err(e) => println!("{name:>4}: {e}"),
        }
    }
    let (cpu_s, cpu_model) = train_secs(&CpuFactory, n, nf, rounds);
    let (gpu_s, gpu_model) = train_secs(&wgpu, n, nf, rounds);
    println!(
        "train {n} rows x {nf} features, {rounds} rounds: cpu {cpu_s:.2} s, wgpu {gpu_s:.2} s"
    );
    println!(
        "models identical: {} ({} bytes)",
        cpu_model == gpu_model,
        cpu_model.len()
    );
}
