//! Each CUDA kernel against its definition through what the backend reads back besides
//! the trait: every row's gradients and histogram values, on 16-bin tiles. The conformance
//! suite (`conformance.rs`) checks the rest through the backend trait.
//!
//! Ignored unless the build script finds libcuda (`SAPWOOD_REQUIRE_CUDA=1` forces them).

use sapwood_core::backend::ShardData;
use sapwood_core::Result;
use sapwood_cuda::{CudaBackend, CudaFactory};
use sapwood_testkit::probe;

fn backend(s: ShardData) -> Result<CudaBackend> {
    let gpu = CudaFactory::new()
        .open_device()
        .unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    CudaBackend::new(gpu, s, Some(16))
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn gradients_read_back_match_the_objective_bit_for_bit() {
    probe::gradients_read_back_match_the_objective_bit_for_bit(
        backend,
        CudaBackend::read_gradients,
    );
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn quantised_values_read_back_match_the_core_exactly() {
    // the CUDA backend reads back no exact values: the suite checks them through exact sums
    probe::quantised_values_read_back_match_the_core_exactly(
        backend,
        CudaBackend::read_hist_values,
        None,
    );
}
