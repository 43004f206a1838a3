//! Without the NVIDIA driver, asking for the CUDA backend is a clear error, never a panic.

use std::sync::Arc;

use sapwood_core::data::{BinnedMatrix, Bins};
use sapwood_core::objective::Objective;
use sapwood_core::params::ObjectiveKind;
use sapwood_core::train::{BackendFactory, ShardData};
use sapwood_cuda::{CudaFactory, CudaOptions};

fn shard() -> ShardData {
    let binned = BinnedMatrix::from_bins(3, 1, Bins::U8(vec![1, 2, 0])).unwrap();
    ShardData {
        binned: Arc::new(binned),
        offsets: vec![0, 3],
        labels: vec![0.0, 1.0, 0.5],
        weights: None,
        objective: Objective::new(ObjectiveKind::SquaredError, 1).unwrap(),
        base_margin: vec![0.0],
        row_offset: 0,
    }
}

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
        let err = match factory.create(shard()) {
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
