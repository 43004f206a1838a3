//! CUDA devices: the driver check, the GPU's primary context, kernels compiled with NVRTC at
//! first use (once per target architecture) and loaded once per GPU, and one stream per
//! logical device.
//!
//! Start-up of several GPUs runs in parallel: the process-wide map is locked only to find a
//! GPU's slot, each GPU is opened under its own slot's lock, and compilation under the lock
//! of its target, so GPUs of one architecture share one compilation and GPUs of different
//! ones compile side by side.
//!
//! Every logical device holds a `CudaContext` handle of its own on the GPU's primary context
//! (the driver context is one; retaining it again only counts a reference). cudarc keeps the
//! deferred errors of drops (frees, events) in the handle, and reports one at the next call
//! through it: with a handle per logical device, a worker's deferred error is reported to that
//! worker, never to another worker on the same GPU.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DriverError};
use cudarc::nvrtc::Ptx;
use sapwood_core::backend::device::Launch;
use sapwood_core::error::{Error, Result};

use crate::kernels::{self, CodecKernel, CudaSource, Kernel, Target};
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
    /// The primary context (the handle the kernels were loaded through).
    pub ctx: Arc<CudaContext>,
    /// Device name.
    pub name: String,
    /// The device's UUID: the same physical GPU has the same UUID in every process.
    pub uuid: [u8; 16],
    /// Compute capability as major * 10 + minor.
    pub arch: u32,
    /// What the kernels were compiled to.
    pub target: Target,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Largest dynamic shared memory a block of hist_shared may opt in to.
    pub max_shared_bytes: u32,
    functions: HashMap<Kernel, CudaFunction>,
    codecs: HashMap<CodecKernel, CudaFunction>,
    /// The dynamic shared memory hist_shared is allowed now; only ever raised.
    shared_limit: Mutex<u32>,
}

/// A slot filled once, under its own lock.
type Slot<T> = Arc<Mutex<Option<T>>>;

/// A process-wide map of slots, locked only to find one.
type Slots<K, T> = OnceLock<Mutex<HashMap<K, Slot<T>>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The slot of `key` in a process-wide map, whose lock is held only to find it.
fn slot<K: std::hash::Hash + Eq, T>(map: &Mutex<HashMap<K, Slot<T>>>, key: K) -> Slot<T> {
    lock(map).entry(key).or_default().clone()
}

fn gpus() -> &'static Mutex<HashMap<usize, Slot<Arc<GpuShared>>>> {
    static G: Slots<usize, Arc<GpuShared>> = OnceLock::new();
    G.get_or_init(Default::default)
}

/// Every kernel compiled for `target` (the core's list, then the encoders), compiled at the
/// first call for it (under the lock of that target only).
fn compiled(target: Target) -> Result<Arc<Vec<kernels::Compiled>>> {
    static C: Slots<Target, Arc<Vec<kernels::Compiled>>> = OnceLock::new();
    let slot = slot(C.get_or_init(Default::default), target);
    let mut done = lock(&slot);
    if let Some(c) = &*done {
        return Ok(c.clone());
    }
    let all = Kernel::ALL
        .iter()
        .map(|&k| kernels::compile(k, target))
        .chain(
            CodecKernel::ALL
                .iter()
                .map(|&k| kernels::compile_codec(k, target)),
        )
        .collect::<Result<Vec<_>>>()?;
    let all = Arc::new(all);
    *done = Some(all.clone());
    Ok(all)
}

/// The dynamic shared-memory limit to set so that a block may use `wanted` bytes, given the
/// limit set now and the device's largest: `None` when `current` already allows it, else the
/// device's largest (set once: the limit is process-wide, on the function, and a second
/// backend must never lower what the first one launches with).
pub fn shared_limit_to_set(current: u32, wanted: u32, max: u32) -> Result<Option<u32>> {
    if wanted > max {
        return Err(Error::Backend(format!(
            "a histogram tile of {wanted} bytes exceeds the {max} bytes of shared memory a \
             block may use on this GPU"
        )));
    }
    Ok((wanted > current).then_some(max))
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
        let slot = slot(gpus(), ordinal);
        let mut opened = lock(&slot);
        if let Some(g) = &*opened {
            return Ok(g.clone());
        }
        let g = Arc::new(Self::open(ordinal)?);
        *opened = Some(g.clone());
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
        let uuid = ctx
            .uuid()
            .map(|u| u.bytes.map(|b| b as u8))
            .map_err(|e| driver_error("device UUID", e))?;
        let target = choose_target(arch, &kernels::supported_archs()?)?;
        let compiled = compiled(target)?;
        let load = |file: String, entry: &str, c: &kernels::Compiled| -> Result<CudaFunction> {
            let image = match target {
                Target::Cubin(_) => Ptx::from_binary(c.image.clone()),
                Target::Ptx(_) => Ptx::from_src(kernels::ptx_text(&c.image).unwrap_or_default()),
            };
            let module = ctx.load_module(image).map_err(|e| {
                Error::Backend(format!(
                    "the CUDA driver refused {file} built for {} by NVRTC {:?}: {e} (PTX from an \
                     NVRTC newer than the driver is refused; use NVRTC 13.0 with a CUDA 13.0 \
                     driver)",
                    target.arch(),
                    kernels::nvrtc_version().ok()
                ))
            })?;
            module
                .load_function(entry)
                .map_err(|e| driver_error(&format!("function {entry}"), e))
        };
        // compiled() holds Kernel::ALL, then CodecKernel::ALL, in order
        let mut functions = HashMap::new();
        for (&k, c) in Kernel::ALL.iter().zip(compiled.iter()) {
            functions.insert(k, load(k.file(), k.entry(), c)?);
        }
        let mut codecs = HashMap::new();
        for (&k, c) in CodecKernel::ALL
            .iter()
            .zip(compiled.iter().skip(Kernel::ALL.len()))
        {
            codecs.insert(k, load(k.file(), k.entry(), c)?);
        }
        // the dynamic shared memory of hist_shared: the opt-in limit less its static shared
        // memory (none today)
        let static_shared = functions[&Kernel::HistShared]
            .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
            .map_err(|e| driver_error("function attribute", e))?
            .max(0) as u32;
        Ok(GpuShared {
            ctx,
            name,
            uuid,
            arch,
            target,
            sms,
            max_shared_bytes: max_shared_bytes
                .saturating_sub(static_shared)
                .max(DEFAULT_SHARED_BYTES),
            functions,
            codecs,
            shared_limit: Mutex::new(DEFAULT_SHARED_BYTES),
        })
    }

    /// A loaded kernel.
    pub(crate) fn function(&self, k: Kernel) -> &CudaFunction {
        &self.functions[&k]
    }

    /// A loaded kernel or encoder.
    pub(crate) fn launchable(&self, k: Launch) -> &CudaFunction {
        match k {
            Launch::Kernel(k) => &self.functions[&k],
            Launch::Codec(c) => &self.codecs[&c],
        }
    }

    /// Lets hist_shared use `bytes` of dynamic shared memory per block. The attribute belongs
    /// to the function, shared by every logical device on the GPU: under the lock it is only
    /// ever raised, straight to the device's largest, so no backend lowers the limit another
    /// one launches with.
    pub(crate) fn allow_shared(&self, bytes: u32) -> Result<()> {
        let mut limit = lock(&self.shared_limit);
        let set = shared_limit_to_set(*limit, bytes, self.max_shared_bytes)
            .map_err(|e| Error::Backend(format!("{} ({})", e, self.name)))?;
        if let Some(to) = set {
            self.ctx
                .bind_to_thread()
                .map_err(|e| driver_error("context", e))?;
            self.function(Kernel::HistShared)
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    to as i32,
                )
                .map_err(|e| driver_error("shared memory attribute", e))?;
            *limit = to;
        }
        Ok(())
    }

    /// The dynamic shared memory hist_shared may use now.
    pub fn shared_limit(&self) -> u32 {
        *lock(&self.shared_limit)
    }
}

/// A logical device: a GPU and a stream of its own. Several logical devices may share a GPU
/// (one per worker), each working asynchronously on its stream.
#[derive(Clone)]
pub struct Gpu {
    /// The GPU.
    pub shared: Arc<GpuShared>,
    /// This logical device's stream.
    pub stream: Arc<CudaStream>,
    /// Ordinal of the GPU.
    pub ordinal: usize,
}

impl Gpu {
    /// A new logical device on GPU `ordinal`: a context handle of its own on the primary
    /// context (its own deferred-error state) and a stream.
    ///
    /// The handle's stream puts cudarc in its multi-stream mode (any stream made with
    /// `new_stream` does), where every allocation creates events and every launch records and
    /// waits on them for each buffer; a logical device uses its one stream for all its
    /// buffers, so that tracking buys nothing and is off.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let shared = GpuShared::get(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| driver_error("context", e))?;
        // SAFETY: every buffer of this handle is allocated, used and freed on its one stream
        // (NCCL's stream never sees them: its sums go through host memory).
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| driver_error("stream", e))?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_memory_limit_is_only_ever_raised_to_the_device_maximum() {
        let max = 227 * 1024;
        // within the default: nothing to set
        assert_eq!(shared_limit_to_set(48 * 1024, 1024, max).unwrap(), None);
        assert_eq!(
            shared_limit_to_set(48 * 1024, 48 * 1024, max).unwrap(),
            None
        );
        // beyond it: straight to the maximum, once
        assert_eq!(
            shared_limit_to_set(48 * 1024, 64 * 1024, max).unwrap(),
            Some(max)
        );
        // a second backend asking for less (or the same) never lowers it
        for wanted in [0, 16 * 1024, 64 * 1024, max] {
            assert_eq!(shared_limit_to_set(max, wanted, max).unwrap(), None);
        }
        let e = shared_limit_to_set(max, max + 1, max).unwrap_err();
        assert!(e.to_string().contains("exceeds"), "{e}");
    }

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
