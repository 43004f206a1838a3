//! Finding adapters: every backend compiled for this platform, real GPUs before software
//! ones, and a clear error saying what was looked for when there is none.

use sapwood_core::error::{Error, Result};

/// The backends this build can use, by name.
fn backend_names(backends: wgpu::Backends) -> Vec<&'static str> {
    let mut v = Vec::new();
    for (b, name) in [
        (wgpu::Backends::VULKAN, "Vulkan"),
        (wgpu::Backends::METAL, "Metal"),
        (wgpu::Backends::DX12, "DX12"),
        (wgpu::Backends::GL, "GL"),
    ] {
        if backends.contains(b) {
            v.push(name);
        }
    }
    v
}

/// The adapters to spread logical devices over: discrete and integrated GPUs when there are
/// any, else whatever else exists (software rasterisers such as Mesa lavapipe).
pub(crate) fn find_adapters() -> Result<Vec<wgpu::Adapter>> {
    let compiled = wgpu::Instance::enabled_backend_features();
    let backends = wgpu::Backends::PRIMARY & compiled;
    let tried = backend_names(backends).join(", ");
    if backends.is_empty() {
        return Err(Error::Backend(format!(
            "no wgpu backend is compiled in for this platform (sapwood-wgpu enables Vulkan, \
             Metal and DX12; this build has {:?})",
            compiled
        )));
    }
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends,
        ..wgpu::InstanceDescriptor::new_without_display_handle_from_env()
    });
    let mut all = pollster::block_on(instance.enumerate_adapters(backends));
    // compute only: keep adapters that are not the GL compatibility path
    all.retain(|a| a.get_info().backend != wgpu::Backend::Gl);
    if all.is_empty() {
        return Err(Error::Backend(format!(
            "no wgpu adapter found (tried {tried}; is a GPU driver installed? Without a GPU, \
             the software Vulkan driver Mesa lavapipe works: apt-get install \
             mesa-vulkan-drivers libvulkan1)"
        )));
    }
    let is_gpu = |a: &wgpu::Adapter| {
        matches!(
            a.get_info().device_type,
            wgpu::DeviceType::DiscreteGpu | wgpu::DeviceType::IntegratedGpu
        )
    };
    if all.iter().any(is_gpu) {
        all.retain(is_gpu);
    }
    // discrete GPUs first, then by name: a stable order gives workers a stable placement
    all.sort_by_key(|a| {
        let i = a.get_info();
        (
            i.device_type != wgpu::DeviceType::DiscreteGpu,
            i.name,
            i.device,
        )
    });
    Ok(all)
}
