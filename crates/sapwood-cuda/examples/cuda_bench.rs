//! CUDA benchmark, prepared for an H200 run (nothing here has run on a GPU yet):
//! 1. `identity`: byte-identity of a trained model against the CPU backend;
//! 2. `hist`: histogram-kernel throughput at the root (GB/s of bins and values read, against
//!    the H200's 4.8 TB/s), 1M and 10M rows x 28 features of 256 uniform bins;
//! 3. `skewed`: the same kernel where whole warps add to one bin: one feature holding all
//!    but one row in a thousand in one bin (the rest uniform), and every feature so (binary,
//!    one bin almost always); ms per node beside the uniform case's;
//! 4. `train`: end-to-end training time for 1M and 10M rows x 28 features, 100 rounds,
//!    depth 8 and leaf-wise 255 leaves;
//! 5. `nccl` (built with `--features nccl`, libnccl.so on the library path): training over
//!    the NCCL collective, one rank per GPU (sums through NCCL) and `--per-gpu` logical
//!    devices per GPU (ranks share a GPU: the collective falls back to the host one and says
//!    why), each checked byte for byte against the CPU model, with time and traffic.
//!
//! ```text
//! cargo run -p sapwood-cuda --release --example cuda_bench -- [FLAGS]
//! cargo run -p sapwood-cuda --release --features nccl --example cuda_bench -- --parts nccl
//! ```
//!
//! Flags:
//! - `--quick`: 10 rounds instead of 100 in `train`, 200k rows and 5 rounds in `nccl`;
//! - `--parts LIST`: comma-separated parts to run, of `identity,hist,skewed,train,nccl`
//!   (default: all; `nccl` only when built with the feature);
//! - `--per-gpu N`: logical devices per GPU in the second `nccl` run (default 2).
//!
//! Needs NVRTC 13.0 on LD_LIBRARY_PATH. Without a GPU it exits with a clear message (status
//! 2); a model that differs from the CPU's exits with status 1.

use std::sync::Arc;
use std::time::Instant;

use sapwood_core::backend::{
    BackendFactory, CpuFactory, HistBackend, ShardData, TreeBackend, TreeSetup,
};
use sapwood_core::collective::SingleWorker;
use sapwood_core::data::{BinnedMatrix, Bins, Column, FeatureMatrix};
use sapwood_core::hash::SampleRate;
use sapwood_core::objective::{Objective, ObjectiveKind};
use sapwood_core::params::{Checked, GrowPolicy, Params, Quantisation};
use sapwood_core::quantise::{GroupScales, Scale};
use sapwood_core::train::{self, Quiet, Shard};
use sapwood_core::tree::NodeId;
use sapwood_cuda::{CudaBackend, CudaDevice, CudaFactory};
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
    let params = &Checked::new(params.clone()).expect("valid parameters");
    let (features, y) = data(n, 7);
    let shard = Shard {
        features: features.slice_rows(0..n),
        labels: y,
        weights: None,
        row_offset: 0,
        queries: None,
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

/// How the bins of the histogram benchmark are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Every feature uniform over 256 bins.
    Uniform,
    /// Feature 0 puts all but one row in a thousand in bin 1; the others uniform.
    OneSkewed,
    /// Every feature binary, one bin almost always.
    AllSkewed,
}

fn bins_of(shape: Shape, n: usize, rng: &mut Rng) -> Vec<u8> {
    (0..n * FEATURES)
        .map(|i| {
            let f = i % FEATURES;
            let skewed = match shape {
                Shape::Uniform => false,
                Shape::OneSkewed => f == 0,
                Shape::AllSkewed => true,
            };
            if skewed {
                if rng.below(1000) == 0 {
                    2
                } else {
                    1
                }
            } else {
                (rng.next_u64() % 256) as u8
            }
        })
        .collect()
}

/// Milliseconds per root histogram (incl. read-back) of `n` rows of `shape`.
fn hist_throughput(n: usize, shape: Shape) -> f64 {
    let mut rng = Rng(3);
    let bins = bins_of(shape, n, &mut rng);
    let binned = BinnedMatrix::from_bins(n, FEATURES, Bins::U8(bins)).unwrap();
    let offsets: Vec<u32> = (0..=FEATURES as u32).map(|f| f * 256).collect();
    let labels: Vec<f32> = (0..n).map(|_| (rng.next_u64() % 2) as f32).collect();
    let objective = Objective::new(ObjectiveKind::Logistic, 1).unwrap();
    let gpu = CudaFactory::new().open_device().unwrap();
    let mut b = CudaBackend::new(
        CudaDevice::new(gpu, None).unwrap(),
        ShardData {
            binned: Arc::new(binned),
            offsets,
            labels,
            weights: None,
            objective,
            base_margin: vec![0.0],
            initial_margins: None,
            row_offset: 0,
        },
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
        "histogram {shape:?}, root of {n} rows x {FEATURES}: {:.3} ms per node incl. \
         read-back, {gbs:.0} GB/s ({:.1}% of {PEAK_GBS} GB/s)",
        secs * 1e3,
        100.0 * gbs / PEAK_GBS
    );
    secs * 1e3
}

/// The command line.
struct Flags {
    quick: bool,
    parts: Vec<String>,
    per_gpu: usize,
}

fn flags() -> Flags {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|i| args.get(i + 1).cloned().unwrap_or_default())
    };
    let all = ["identity", "hist", "skewed", "train", "nccl"];
    let parts: Vec<String> = match value("--parts") {
        Some(list) => list.split(',').map(|p| p.trim().to_string()).collect(),
        None => all
            .iter()
            .filter(|&&p| p != "nccl" || cfg!(feature = "nccl"))
            .map(|p| p.to_string())
            .collect(),
    };
    if let Some(bad) = parts.iter().find(|p| !all.contains(&p.as_str())) {
        eprintln!(
            "cuda_bench: unknown part `{bad}` (parts: {})",
            all.join(",")
        );
        std::process::exit(2);
    }
    let per_gpu = match value("--per-gpu").map(|v| v.parse::<usize>()) {
        None => 2,
        Some(Ok(n)) if n >= 1 => n,
        Some(_) => {
            eprintln!("cuda_bench: --per-gpu needs a count of at least 1");
            std::process::exit(2);
        }
    };
    Flags {
        quick: args.iter().any(|a| a == "--quick"),
        parts,
        per_gpu,
    }
}

fn main() {
    let flags = flags();
    let quick = flags.quick;
    let part = |name: &str| flags.parts.iter().any(|p| p == name);
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
    if part("identity") {
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
    }

    // 2. histogram throughput
    let mut uniform = Vec::new();
    if part("hist") || part("skewed") {
        for n in [1_000_000, 10_000_000] {
            uniform.push((n, hist_throughput(n, Shape::Uniform)));
        }
    }

    // 3. skewed features: whole warps on one bin
    if part("skewed") {
        for &(n, base) in &uniform {
            for shape in [Shape::OneSkewed, Shape::AllSkewed] {
                let ms = hist_throughput(n, shape);
                println!(
                    "skewed {shape:?}, {n} rows: {ms:.3} ms per node, {:.2}x the uniform case",
                    ms / base
                );
            }
        }
    }

    // 4. end to end
    if part("train") {
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
                    "train {n} rows x {FEATURES}, {rounds} rounds, {name}: {secs:.2} s (incl. \
                     binning)"
                );
            }
        }
    }

    // 5. the NCCL collective
    if part("nccl") {
        #[cfg(feature = "nccl")]
        nccl::run(quick, flags.per_gpu);
        #[cfg(not(feature = "nccl"))]
        {
            let _ = flags.per_gpu;
            eprintln!("cuda_bench: part `nccl` needs `--features nccl`");
            std::process::exit(2);
        }
    }
}

#[cfg(feature = "nccl")]
mod nccl {
    //! Training over `NcclCollective`: ranks are threads joined by the in-process
    //! collective, rank r on GPU r % gpus with its backend there.

    use std::time::{Duration, Instant};

    use sapwood_collective::{in_process, RingCollective};
    use sapwood_core::backend::CpuFactory;
    use sapwood_core::collective::Collective;
    use sapwood_core::params::{Checked, CommCodec, GrowPolicy, Params, Quantisation};
    use sapwood_core::train::{self, Quiet, Shard};
    use sapwood_cuda::nccl::NcclCollective;
    use sapwood_cuda::{CudaFactory, CudaOptions};

    use super::{data, train_time, ObjectiveKind};

    /// One training over `world` ranks, NCCL summing packed lanes or plain i64 values;
    /// exits 1 when a rank's model is not `cpu`.
    fn once(params: &Params, n: usize, world: usize, cpu: &str, label: &str, packed: bool) {
        let params = &Checked::new(params.clone()).expect("valid parameters");
        let (features, y) = data(n, 7);
        let bounds: Vec<usize> = (0..=world).map(|w| w * n / world).collect();
        let factory = CudaFactory::new();
        let t = Instant::now();
        let results: Vec<(String, bool, Option<String>, u64, u64)> = std::thread::scope(|s| {
            let handles: Vec<_> = in_process(world, Duration::from_secs(600))
                .into_iter()
                .enumerate()
                .map(|(rank, transport)| {
                    let (lo, hi) = (bounds[rank], bounds[rank + 1]);
                    let shard = Shard {
                        features: features.slice_rows(lo..hi),
                        labels: y[lo..hi].to_vec(),
                        weights: None,
                        row_offset: lo as u64,
                        queries: None,
                    };
                    let factory = &factory;
                    s.spawn(move || {
                        let gpu = factory.open_device_for_rank(rank).unwrap();
                        let host = RingCollective::new(transport, CommCodec::Auto);
                        let mut c = NcclCollective::new(Box::new(host), &gpu)
                            .unwrap_or_else(|e| panic!("rank {rank}: {e}"))
                            .with_packing(packed);
                        let mine = CudaFactory::with_options(CudaOptions {
                            devices: Some(vec![gpu.ordinal]),
                            tile_bins: None,
                        });
                        let model = train::train(params, shard, vec![], &mut c, &mine, &mut Quiet)
                            .unwrap_or_else(|e| panic!("rank {rank}: {e}"))
                            .model;
                        let st = c.stats();
                        (
                            model.to_json(),
                            c.uses_nccl(),
                            c.fallback().map(str::to_string),
                            st.bytes_sent,
                            st.allreduce_calls,
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let secs = t.elapsed().as_secs_f64();
        let (_, nccl, why, bytes, calls) = &results[0];
        let same = results.iter().all(|r| r.0 == cpu);
        println!(
            "nccl {label}, {}: {world} ranks, {n} rows, {} rounds: {secs:.2} s, {}, rank 0 sent \
             {:.1} MB in {calls} all-reduces; {}",
            if packed { "packed lanes" } else { "plain i64" },
            params.num_rounds,
            if *nccl {
                "sums through NCCL".to_string()
            } else {
                format!("host collective ({})", why.as_deref().unwrap_or("?"))
            },
            *bytes as f64 / 1e6,
            if same { "byte-identical" } else { "DIFFERENT" }
        );
        if !same {
            std::process::exit(1);
        }
    }

    /// One rank per GPU, then `per_gpu` ranks per GPU.
    pub fn run(quick: bool, per_gpu: usize) {
        let gpus = sapwood_cuda::device_count().unwrap_or(1);
        let (n, rounds) = if quick { (200_000, 5) } else { (1_000_000, 20) };
        let params = Params {
            objective: ObjectiveKind::Logistic,
            grow_policy: GrowPolicy::Depthwise,
            max_depth: 8,
            quantisation: Quantisation::Bits(8),
            num_rounds: rounds,
            ..Default::default()
        };
        let (cpu, _) = train_time(&params, n, &CpuFactory);
        // packed lanes against the uncompressed i64 sums, on the same GPUs
        once(&params, n, gpus, &cpu, "one rank per GPU", true);
        once(&params, n, gpus, &cpu, "one rank per GPU", false);
        once(
            &params,
            n,
            per_gpu * gpus,
            &cpu,
            &format!("{per_gpu} ranks per GPU"),
            true,
        );
    }
}
