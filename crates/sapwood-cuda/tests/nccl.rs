//! Feature `nccl` on GPUs: every rank's GPU comes from its rank, one rank per GPU sums its
//! histograms through NCCL, ranks sharing a GPU (two logical devices per GPU) fall back to the
//! host collective, and both give the CPU's model byte for byte; dropping the collective
//! never panics.
//!
//! Compiled with `--features nccl` only; ignored unless the build script finds libcuda
//! (`SAPWOOD_REQUIRE_CUDA=1` forces them). libnccl.so must be on the library path (PyPI's
//! nvidia-nccl-cu13 ships libnccl.so.2: add a libnccl.so link next to it).
#![cfg(feature = "nccl")]

use std::time::Duration;

use sapwood_collective::{in_process, RingCollective};
use sapwood_core::collective::Collective;
use sapwood_core::objective::ObjectiveKind;
use sapwood_core::params::{Checked, CommCodec, GrowPolicy, Params, Quantisation};
use sapwood_core::train::{self, Quiet, Shard};
use sapwood_cuda::nccl::NcclCollective;
use sapwood_cuda::{CudaFactory, CudaOptions};
use sapwood_testkit::data::{labels_for, mixed_features};
use sapwood_testkit::train::{first_difference, train_json, Job};

fn gpus() -> usize {
    sapwood_cuda::device_count().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

/// What each rank of a training through NcclCollective ended with.
struct RankResult {
    json: String,
    uses_nccl: bool,
    fallback: Option<String>,
    nccl_calls: u64,
}

/// `params` on `rows` rows of mixed_features split over `world` ranks (threads joined by
/// the in-process collective, wrapped in NcclCollective), rank r on GPU r % gpus.
fn train_over_nccl(params: &Params, rows: usize, world: usize) -> Vec<RankResult> {
    let params = &Checked::new(params.clone()).expect("valid parameters");
    let data = mixed_features(rows, 17);
    let y = labels_for(params.objective, &data.signal);
    let bounds: Vec<usize> = (0..=world).map(|w| w * rows / world).collect();
    let factory = CudaFactory::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = in_process(world, Duration::from_secs(300))
            .into_iter()
            .enumerate()
            .map(|(rank, t)| {
                let (lo, hi) = (bounds[rank], bounds[rank + 1]);
                let shard = Shard {
                    features: data.features.slice_rows(lo..hi),
                    labels: y[lo..hi].to_vec(),
                    weights: None,
                    row_offset: lo as u64,
                    queries: None,
                };
                let factory = &factory;
                s.spawn(move || {
                    let gpu = factory.open_device_for_rank(rank).unwrap();
                    let ordinal = gpu.ordinal;
                    let host = RingCollective::new(t, CommCodec::Auto);
                    let mut c = NcclCollective::new(Box::new(host), &gpu)
                        .unwrap_or_else(|e| panic!("rank {rank}: {e}"));
                    // the backend on the rank's own GPU
                    let mine = CudaFactory::with_options(CudaOptions {
                        devices: Some(vec![ordinal]),
                        tile_bins: None,
                    });
                    let model = train::train(params, shard, vec![], &mut c, &mine, &mut Quiet)
                        .unwrap_or_else(|e| panic!("rank {rank} of {world}: {e}"))
                        .model;
                    let result = RankResult {
                        json: model.to_json(),
                        uses_nccl: c.uses_nccl(),
                        fallback: c.fallback().map(str::to_string),
                        nccl_calls: c.stats().allreduce_calls,
                    };
                    // tearing the communicator down never panics
                    drop(c);
                    result
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank panicked"))
            .collect()
    })
}

fn params() -> Params {
    Params {
        objective: ObjectiveKind::Logistic,
        grow_policy: GrowPolicy::Lossguide,
        max_leaves: 16,
        quantisation: Quantisation::Bits(8),
        num_rounds: 4,
        ..Default::default()
    }
}

fn assert_cpu_model(results: &[RankResult], params: &Params, rows: usize) {
    let cpu = train_json(params, &sapwood_core::backend::CpuFactory, Job::rows(rows));
    for (rank, r) in results.iter().enumerate() {
        assert!(
            r.json == cpu,
            "rank {rank}: {}",
            first_difference(&cpu, &r.json)
        );
    }
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn one_rank_per_gpu_sums_histograms_with_nccl_and_gives_the_cpu_model() {
    let world = gpus();
    let rows = 6000;
    let results = train_over_nccl(&params(), rows, world);
    for (rank, r) in results.iter().enumerate() {
        assert!(r.uses_nccl, "rank {rank} fell back: {:?}", r.fallback);
        if world > 1 {
            assert!(r.nccl_calls > 0, "rank {rank}: no sum went through NCCL");
        }
    }
    assert_cpu_model(&results, &params(), rows);
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn two_logical_devices_per_gpu_fall_back_to_the_host_collective_and_give_the_cpu_model() {
    // NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): every rank sees the
    // shared UUIDs first and keeps the host collective
    let world = 2 * gpus();
    let rows = 6000;
    let results = train_over_nccl(&params(), rows, world);
    for (rank, r) in results.iter().enumerate() {
        assert!(!r.uses_nccl, "rank {rank}");
        let why = r.fallback.as_deref().unwrap_or("");
        assert!(why.contains("share GPU"), "rank {rank}: {why}");
    }
    assert_cpu_model(&results, &params(), rows);
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn nccl_sums_of_packed_words_wrap_like_the_host_collective() {
    // values whose packed 64-bit words wrap when summed: NCCL sums them as u64 (defined
    // wrap-around), and the result is the wrapping sum of the values
    let world = gpus();
    let values: Vec<i64> = vec![i64::MAX, i64::MIN, -1, 1, 1 << 62, -(1 << 62), 12345, -7];
    let factory = CudaFactory::new();
    let sums: Vec<Vec<i64>> = std::thread::scope(|s| {
        let handles: Vec<_> = in_process(world, Duration::from_secs(120))
            .into_iter()
            .enumerate()
            .map(|(rank, t)| {
                let (factory, values) = (&factory, &values);
                s.spawn(move || {
                    let gpu = factory.open_device_for_rank(rank).unwrap();
                    let host = RingCollective::new(t, CommCodec::Auto);
                    let mut c = NcclCollective::new(Box::new(host), &gpu).unwrap();
                    assert!(c.uses_nccl(), "{:?}", c.fallback());
                    let mut data = values.clone();
                    c.allreduce_sum(&mut data, u64::MAX).unwrap();
                    // and a narrow bound: several values per packed word
                    let mut small: Vec<i64> = (0..100).map(|i| i - 50).collect();
                    c.allreduce_sum(&mut small, 50 * world as u64).unwrap();
                    let want: Vec<i64> = (0..100).map(|i| (i - 50) * world as i64).collect();
                    assert_eq!(small, want);
                    data
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let want: Vec<i64> = values
        .iter()
        .map(|&v| (0..world).fold(0i64, |a, _| a.wrapping_add(v)))
        .collect();
    for s in sums {
        assert_eq!(s, want);
    }
}
