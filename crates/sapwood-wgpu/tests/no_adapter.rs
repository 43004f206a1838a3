//! Without an adapter, asking for the wgpu backend is a clear error naming what was looked
//! for, never a panic. The Vulkan loader is pointed at a driver manifest that does not exist
//! (its own binary: the variable is process-wide), so this runs on every Linux machine.

#[cfg(target_os = "linux")]
#[test]
fn no_adapter_is_a_clear_error() {
    use sapwood_core::backend::BackendFactory;
    use sapwood_testkit::data::tiny_shard;
    use sapwood_wgpu::WgpuFactory;

    for var in ["VK_ICD_FILENAMES", "VK_DRIVER_FILES"] {
        std::env::set_var(var, "/nonexistent/sapwood-no-driver.json");
    }
    let factory = WgpuFactory::new();
    let err = match factory.create(tiny_shard()) {
        Ok(_) => panic!("a device was opened without a driver"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("no wgpu adapter found"), "{err}");
    assert!(err.contains("Vulkan"), "{err}");
    assert!(err.contains("lavapipe"), "{err}");
    // asking again gives the same answer
    assert!(factory.adapter_names().is_err());
}
