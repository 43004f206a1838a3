//! CUDA devices: the driver check, one context per GPU (the primary context, shared by every
//! logical device on it), kernels compiled with NVRTC at first use and loaded once per GPU,
//! and one stream per logical device.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DriverError};
use cudarc::nvrtc::Ptx;
use sapwood_core::error::{Error, Result};

use crate::kernels::{self, CudaSource, Kernel, Target};
use crate::tiles::DEFAULT_SHARED_BYTES;

/// Whether the CUDA driver library (`libcuda.so`) can be loaded. cudarc panics when a
/// context is created without it, so this is checked first.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library by its candidate names.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

pub(crate) fn driver_error(what: &str, e: DriverError) -> Error {
    Error::Backend(format!("CUDA {what}: {e}"))
}

/// Number of CUDA devices, or a clear error without a driver or a GPU.
pub fn device_count() -> Result<usize> {
    if !driver_present() {
        return Err(Error::Backend(
            "device `cuda` needs the NVIDIA driver, but libcuda.so was not found \
             (no NVIDIA driver is installed, or it is not on the library path)"
                .into(),
        ));
    }
    let n = CudaContext::device_count().map_err(|e| {
        Error::Backend(format!(
            "device `cuda`: the NVIDIA driver found no usable GPU ({e})"
        ))
    })?;
    if n <= 0 {
        return Err(Error::Backend(
            "device `cuda`: the NVIDIA driver reports no GPU".into(),
        ));
    }
    Ok(n as usize)
}

/// One GPU's context and its loaded kernels, shared by every logical device on it.
pub struct GpuShared {
    /// The primary context.
    pub ctx: Arc<CudaContext>,
    /// Device name.
    pub name: String,
    /// Compute capability as major * 10 + minor.
    pub arch: u32,
    /// What the kernels were compiled to.
    pub target: Target,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Largest dynamic shared memory a block may opt in to.
    pub max_shared_bytes: u32,
    functions: HashMap<Kernel, CudaFunction>,
}

fn gpus() -> &'static Mutex<HashMap<usize, Arc<GpuShared>>> {
    static G: OnceLock<Mutex<HashMap<usize, Arc<GpuShared>>>> = OnceLock::new();
    G.get_or_init(Default::default)
}

/// The target to build for a device of compute capability `arch`, given what NVRTC
/// supports: a CUBIN for the device itself, else PTX for the newest older architecture.
pub fn choose_target(arch: u32, supported: &[u32]) -> Result<Target> {
    if supported.contains(&arch) {
        return Ok(Target::Cubin(arch));
    }
    supported
        .iter()
        .copied()
        .filter(|&a| a <= arch)
        .max()
        .map(Target::Ptx)
        .ok_or_else(|| {
            Error::Backend(format!(
                "this NVRTC cannot compile for sm_{arch} (it supports {supported:?})"
            ))
        })
}

impl GpuShared {
    /// The context and kernels of GPU `ordinal`, created and compiled on first use.
    pub fn get(ordinal: usize) -> Result<Arc<GpuShared>> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(Error::Backend(format!(
                "CUDA device {ordinal} requested, {count} present"
            )));
        }
        let mut map = gpus().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(g) = map.get(&ordinal) {
            return Ok(g.clone());
        }
        let g = Arc::new(Self::open(ordinal)?);
        map.insert(ordinal, g.clone());
        Ok(g)
    }

    fn open(ordinal: usize) -> Result<GpuShared> {
        let ctx = CudaContext::new(ordinal).map_err(|e| driver_error("context", e))?;
        let name = ctx
            .name()
            .unwrap_or_else(|_| format!("CUDA device {ordinal}"));
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| driver_error("compute capability", e))?;
        let arch = (major * 10 + minor) as u32;
        let attr = |a| {
            ctx.attribute(a)
                .map_err(|e| driver_error("device attribute", e))
        };
        let sms = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let max_shared_bytes =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32;
        let target = choose_target(arch, &kernels::supported_archs()?)?;
        let mut functions = HashMap::new();
        for k in Kernel::ALL {
            let c = kernels::compile(k, target)?;
            let image = match target {
                Target::Cubin(_) => Ptx::from_binary(c.image),
                Target::Ptx(_) => Ptx::from_src(kernels::ptx_text(&c.image).unwrap_or_default()),
            };
            let module = ctx.load_module(image).map_err(|e| {
                Error::Backend(format!(
                    "the CUDA driver refused {} built for {} by NVRTC {:?}: {e} (PTX from an \
                     NVRTC newer than the driver is refused; use NVRTC 13.0 with a CUDA 13.0 \
                     driver)",
                    k.file(),
                    target.arch(),
                    kernels::nvrtc_version().ok()
                ))
            })?;
            let f = module
                .load_function(k.entry())
                .map_err(|e| driver_error(&format!("function {}", k.entry()), e))?;
            functions.insert(k, f);
        }
        Ok(GpuShared {
            ctx,
            name,
            arch,
            target,
            sms,
            max_shared_bytes: max_shared_bytes.max(DEFAULT_SHARED_BYTES),
            functions,
        })
    }

    /// A loaded kernel.
    pub(crate) fn function(&self, k: Kernel) -> &CudaFunction {
        &self.functions[&k]
    }

    /// Lets hist_shared use `bytes` of dynamic shared memory per block.
    pub(crate) fn allow_shared(&self, bytes: u32) -> Result<()> {
        if bytes <= DEFAULT_SHARED_BYTES {
            return Ok(());
        }
        if bytes > self.max_shared_bytes {
            return Err(Error::Backend(format!(
                "a histogram tile of {bytes} bytes exceeds the {} bytes of shared memory a \
                 block of {} may use",
                self.max_shared_bytes, self.name
            )));
        }
        self.function(Kernel::HistShared)
            .set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .map_err(|e| driver_error("shared memory attribute", e))
    }
}

/// A logical device: a GPU and a stream of its own. Several logical devices may share a GPU
/// (one per worker), each working asynchronously on its stream.
pub struct Gpu {
    /// The GPU.
    pub shared: Arc<GpuShared>,
    /// This logical device's stream.
    pub stream: Arc<CudaStream>,
    /// Ordinal of the GPU.
    pub ordinal: usize,
}

impl Gpu {
    /// A new logical device on GPU `ordinal`.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let shared = GpuShared::get(ordinal)?;
        let stream = shared
            .ctx
            .new_stream()
            .map_err(|e| driver_error("stream", e))?;
        Ok(Gpu {
            shared,
            stream,
            ordinal,
        })
    }

    /// The GPU's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Blocks for a grid-stride kernel over `items`, `per_thread` items per thread at least.
    pub(crate) fn blocks(&self, items: usize, per_thread: usize) -> u32 {
        let want = items.div_ceil(256 * per_thread.max(1)).max(1);
        // a few waves of blocks over every SM are enough for a grid-stride loop
        want.min(self.shared.sms.max(1) as usize * 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_prefer_a_cubin_for_the_device_itself() {
        let nvrtc13 = [75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121];
        assert_eq!(choose_target(90, &nvrtc13).unwrap(), Target::Cubin(90));
        assert_eq!(choose_target(80, &nvrtc13).unwrap(), Target::Cubin(80));
        // an architecture NVRTC does not know: PTX for the newest older one (driver JIT)
        assert_eq!(choose_target(95, &nvrtc13).unwrap(), Target::Ptx(90));
        assert!(choose_target(70, &nvrtc13).is_err());
    }
}
