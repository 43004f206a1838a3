//! Without the NVIDIA driver, asking for the CUDA backend is a clear error, never a panic.

use sapwood_core::backend::BackendFactory;
use sapwood_cuda::{CudaFactory, CudaOptions};
use sapwood_testkit::data::tiny_shard;

#[test]
#[cfg_attr(not(sapwood_no_cuda), ignore = "libcuda is installed here")]
fn without_libcuda_create_is_a_backend_error() {
    assert!(
        !sapwood_cuda::driver_present(),
        "this test checks the no-driver path; libcuda was found at run time"
    );
    for factory in [
        CudaFactory::new(),
        CudaFactory::with_options(CudaOptions {
            devices: Some(vec![0, 0, 0, 0]),
            tile_bins: None,
        }),
    ] {
        let err = match factory.create(tiny_shard()) {
            Ok(_) => panic!("a backend without a driver"),
            Err(e) => e,
        };
        match &err {
            sapwood_core::Error::Backend(m) => {
                assert!(m.contains("libcuda"), "{m}");
                assert!(m.contains("NVIDIA driver"), "{m}");
            }
            other => panic!("not a backend error: {other:?}"),
        }
        assert!(err.to_string().starts_with("backend: device `cuda` needs"));
    }
    assert!(sapwood_cuda::device_count().is_err());
    assert!(CudaFactory::new().ordinals().is_err());
}

#[test]
#[cfg_attr(not(sapwood_no_cuda), ignore = "libcuda is installed here")]
fn without_libcuda_a_chosen_gpu_is_an_error_naming_it() {
    // `device = "cuda:1"` (or a list) reaches the factory as ordinals
    for (devices, named) in [(vec![1], "cuda:1"), (vec![0, 1], "cuda:0,cuda:1")] {
        let factory = CudaFactory::with_options(CudaOptions {
            devices: Some(devices),
            tile_bins: None,
        });
        let err = match factory.create(tiny_shard()) {
            Ok(_) => panic!("a backend without a driver"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("NVIDIA driver"), "{err}");
        assert!(err.contains(&format!("requested: {named}")), "{err}");
    }
    let empty = CudaFactory::with_options(CudaOptions {
        devices: Some(Vec::new()),
        tile_bins: None,
    });
    let err = empty.ordinals().unwrap_err().to_string();
    assert!(err.contains("`device`"), "{err}");
}
