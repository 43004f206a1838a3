//! What only the CUDA backend configures: four logical devices (streams) on GPU 0 through
//! the in-process collective, tile sizes from 16 bins to beyond the default shared-memory
//! opt-in, and device prediction. The conformance suite (`conformance.rs`) runs every
//! check shared with the other backends.
//!
//! Ignored unless the build script finds libcuda (`SAPWOOD_REQUIRE_CUDA=1` forces them).

use sapwood_core::params::Quantisation;
use sapwood_cuda::{CudaFactory, CudaOptions};
use sapwood_testkit::conformance::{self, every_objective_and_mode};
use sapwood_testkit::probe;
use sapwood_testkit::train::Job;

fn cuda(devices: Option<Vec<usize>>, tile_bins: Option<u32>) -> CudaFactory {
    if let Err(e) = sapwood_cuda::device_count() {
        panic!("this test needs a CUDA GPU: {e}");
    }
    CudaFactory::with_options(CudaOptions { devices, tile_bins })
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn four_logical_devices_on_one_gpu_give_the_cpu_model() {
    // four workers, each with its own stream, all on GPU 0
    let one_gpu = cuda(Some(vec![0, 0, 0, 0]), None);
    for params in every_objective_and_mode().into_iter().step_by(3) {
        let job = Job::rows(2400).weighted();
        conformance::assert_workers_give_the_cpu_model(&params, &one_gpu, job, &[4]);
    }
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn histograms_match_the_cpu_with_16_bin_and_8192_bin_tiles() {
    // 16 bins: several shared tiles, wide features in global memory
    let small = cuda(None, Some(16));
    conformance::histograms_partitions_and_sums_match_the_cpu_with_u8_bins(&small);
    conformance::histograms_partitions_and_sums_match_the_cpu_with_u16_bins(&small);
    // 8192 bins: beyond the 48 KiB default, the block opts in to more shared memory and a
    // 5000-bin feature stays in shared memory
    let large = cuda(None, Some(8192));
    for q in [Quantisation::Exact, Quantisation::Bits(8)] {
        conformance::grow_against_the_cpu(&large, &[5000, 300, 2000, 3], true, q, 0.8, 9);
    }
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn device_prediction_equals_model_prediction() {
    let gpu = cuda(None, None)
        .open_device()
        .unwrap_or_else(|e| panic!("{e}"));
    probe::device_prediction_equals_model_prediction(&|model, binned, rounds| {
        sapwood_cuda::predict_binned(&gpu, model, binned, rounds)
    });
}
