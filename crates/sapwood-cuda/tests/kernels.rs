//! Each CUDA kernel against its definition through what the backend reads back besides
//! the trait: every row's gradients and histogram values, on 16-bin tiles; and what only the
//! CUDA host code does: tiles beyond the grid's y limit, the process-wide shared-memory limit
//! of hist_shared, and each worker's own deferred-error state. The conformance suite
//! (`conformance.rs`) checks the rest through the backend trait.
//!
//! Ignored unless the build script finds libcuda (`SAPWOOD_REQUIRE_CUDA=1` forces them).

use sapwood_core::backend::ShardData;
use sapwood_core::Result;
use sapwood_cuda::{CudaBackend, CudaDevice, CudaFactory};
use sapwood_testkit::probe;

fn backend(s: ShardData) -> Result<CudaBackend> {
    let gpu = CudaFactory::new()
        .open_device()
        .unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    CudaBackend::new(CudaDevice::new(gpu, Some(16))?, s)
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

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn more_than_65535_tiles_go_in_several_launches() {
    let make = |s: ShardData| -> Result<Box<CudaBackend>> { Ok(Box::new(backend_with(s, 2)?)) };
    probe::more_than_65535_tiles_go_in_several_launches(&make);
}

fn backend_with(s: ShardData, tile_bins: u32) -> Result<CudaBackend> {
    let gpu = CudaFactory::new()
        .open_device()
        .unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    CudaBackend::new(CudaDevice::new(gpu, Some(tile_bins))?, s)
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn a_second_backend_with_small_tiles_does_not_lower_the_first_ones_shared_memory() {
    // the dynamic shared-memory limit belongs to the kernel, shared by every backend on the
    // GPU: a backend with 8192-bin tiles (beyond the 48 KiB default) raises it; a later one
    // with 16-bin tiles must leave it raised for the first one's launches
    use sapwood_core::backend::BackendFactory;
    use sapwood_core::params::Quantisation;
    use sapwood_cuda::CudaOptions;
    use sapwood_testkit::conformance::grow_against_the_cpu;
    use sapwood_testkit::data::tiny_shard;
    let options = |tile_bins| CudaOptions {
        devices: Some(vec![0]),
        tile_bins: Some(tile_bins),
    };
    let large = CudaFactory::with_options(options(8192));
    let small = CudaFactory::with_options(options(16));
    grow_against_the_cpu(&large, &[5000, 300], true, Quantisation::Exact, 1.0, 3);
    let gpu = large.open_device().unwrap();
    let raised = gpu.shared.shared_limit();
    assert!(raised > 48 * 1024, "{raised}");
    assert_eq!(raised, gpu.shared.max_shared_bytes);
    let _small = small.create(tiny_shard()).unwrap();
    assert_eq!(
        gpu.shared.shared_limit(),
        raised,
        "lowered by a later backend"
    );
    grow_against_the_cpu(&large, &[5000, 300], true, Quantisation::Exact, 1.0, 4);
}

#[test]
#[cfg_attr(sapwood_no_cuda, ignore = "no CUDA driver (libcuda) on this machine")]
fn a_deferred_error_of_one_worker_is_not_reported_to_another_on_the_same_gpu() {
    // cudarc keeps errors of drops (frees, events) in the context handle and reports them
    // at the next call through it: each logical device has a handle of its own
    use cudarc::driver::sys::cudaError_enum;
    use cudarc::driver::DriverError;
    let factory = CudaFactory::with_options(sapwood_cuda::CudaOptions {
        devices: Some(vec![0, 0]),
        tile_bins: None,
    });
    let a = factory.open_device().unwrap();
    let b = factory.open_device().unwrap();
    assert_eq!(a.ordinal, b.ordinal);
    let (ca, cb) = (a.stream.context(), b.stream.context());
    assert!(
        !std::sync::Arc::ptr_eq(ca, cb),
        "one handle for two workers"
    );
    assert_eq!(ca.cu_ctx(), cb.cu_ctx(), "both on the primary context");
    ca.record_err::<()>(Err(DriverError(cudaError_enum::CUDA_ERROR_INVALID_VALUE)));
    assert!(cb.check_err().is_ok(), "b was handed a's error");
    assert!(ca.check_err().is_err(), "a lost its own error");
    // and b still works
    let mut b_backend = CudaBackend::new(
        CudaDevice::new(b, None).unwrap(),
        sapwood_testkit::data::tiny_shard(),
    )
    .unwrap();
    use sapwood_core::backend::HistBackend;
    b_backend.compute_gradients().unwrap();
}
