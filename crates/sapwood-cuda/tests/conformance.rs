//! The CUDA backend through the conformance suite every backend runs, against the CPU
//! reference bit for bit: `factory` spreading logical devices over every GPU, `small` with
//! 8-bin shared-memory tiles, so that several tiles and the global-memory kernel run on
//! small data.
//!
//! Ignored unless the build script finds libcuda (`SAPWOOD_REQUIRE_CUDA=1` forces them).

use sapwood_cuda::{CudaFactory, CudaOptions};

/// A factory, once the driver is known to answer: a clear failure where the build script
/// found libcuda (or was told to assume it) but no GPU answers at run time.
fn cuda(tile_bins: Option<u32>) -> CudaFactory {
    if let Err(e) = sapwood_cuda::device_count() {
        panic!("this test needs a CUDA GPU: {e}");
    }
    CudaFactory::with_options(CudaOptions {
        devices: None,
        tile_bins,
    })
}

sapwood_testkit::conformance!(
    factory: cuda(None),
    small: cuda(Some(8)),
    #[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
);
