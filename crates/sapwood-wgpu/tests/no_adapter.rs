//! Without an adapter, asking for the wgpu backend is a clear error naming what was looked
//! for, never a panic. The Vulkan loader is pointed at a driver manifest that does not exist
//! (its own binary: the variable is process-wide), so this runs on every Linux machine.

#[cfg(target_os = "linux")]
#[test]
fn no_adapter_is_a_clear_error() {
    use std::sync::Arc;

    use sapwood_core::data::{BinnedMatrix, Bins};
    use sapwood_core::objective::Objective;
    use sapwood_core::params::ObjectiveKind;
    use sapwood_core::train::{BackendFactory, ShardData};
    use sapwood_wgpu::WgpuFactory;

    for var in ["VK_ICD_FILENAMES", "VK_DRIVER_FILES"] {
        std::env::set_var(var, "/nonexistent/sapwood-no-driver.json");
    }
    let factory = WgpuFactory::new();
    let shard = ShardData {
        binned: Arc::new(BinnedMatrix::from_bins(1, 1, Bins::U8(vec![1])).unwrap()),
        offsets: vec![0, 2],
        labels: vec![0.0],
        weights: None,
        objective: Objective::new(ObjectiveKind::SquaredError, 1).unwrap(),
        base_margin: vec![0.0],
        row_offset: 0,
    };
    let err = match factory.create(shard) {
        Ok(_) => panic!("a device was opened without a driver"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("no wgpu adapter found"), "{err}");
    assert!(err.contains("Vulkan"), "{err}");
    assert!(err.contains("lavapipe"), "{err}");
    // asking again gives the same answer
    assert!(factory.adapter_names().is_err());
}
