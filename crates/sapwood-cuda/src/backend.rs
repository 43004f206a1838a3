//! The CUDA backend: the core's shard driver ([`DeviceShard`]) on a logical CUDA device.
//! This file is the device: byte buffers on the logical device's stream, launches of the
//! kernels' [`plan`]s, asynchronous copies and clears, and read-backs that wait.
#![allow(unsafe_code)]

use cudarc::driver::{sys, CudaSlice, DevicePtr, PushKernelArg};
use sapwood_core::backend::device::{Call, DeviceLimits, DeviceShard, Region, Runs, ShardDevice};
use sapwood_core::error::{Error, Result};

use crate::device::{driver_error, Gpu};
use crate::plan::{plan, Arg, Param, BLOCK};
use crate::tiles::BYTES_PER_BIN;

/// The CUDA backend of one worker (one logical device).
pub type CudaBackend = DeviceShard<CudaDevice>;

/// Largest pitch a 2D copy is sure to take (the driver's limit is at least this).
const MAX_PITCH_BYTES: usize = i32::MAX as usize;

/// A logical CUDA device as the shard driver sees it: its work runs in order on the
/// logical device's stream.
pub struct CudaDevice {
    gpu: Gpu,
    limits: DeviceLimits,
}

impl CudaDevice {
    /// The shard driver's view of `gpu`; `tile_bins` caps the bins of a shared-memory
    /// histogram tile (default: what 48 KiB of shared memory holds).
    ///
    /// Tiles wider than the default 48 KiB let `hist_shared` use more dynamic shared memory
    /// here, once, so that a GPU that cannot is an error before anything is uploaded.
    pub fn new(gpu: Gpu, tile_bins: Option<u32>) -> Result<Self> {
        let limits = crate::plan::limits(tile_bins);
        gpu.shared
            .allow_shared(limits.tile_bins.saturating_mul(BYTES_PER_BIN))?;
        Ok(CudaDevice { gpu, limits })
    }

    /// The logical device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn ptr(&self, b: &CudaSlice<u8>) -> sys::CUdeviceptr {
        // event tracking is off (see Gpu::open): the guard records nothing
        b.device_ptr(&self.gpu.stream).0
    }

    fn stream(&self) -> sys::CUstream {
        self.gpu.stream.cu_stream()
    }

    fn bind(&self) -> Result<()> {
        self.gpu
            .stream
            .context()
            .bind_to_thread()
            .map_err(|e| driver_error("context", e))
    }
}

/// Fails unless `at..at + bytes` lies inside `b`.
fn inside(b: &CudaSlice<u8>, at: usize, bytes: usize, what: &str) -> Result<()> {
    if at.checked_add(bytes).is_none_or(|end| end > b.len()) {
        return Err(Error::Backend(format!(
            "CUDA: {what} of bytes {at}..{} leaves a buffer of {} bytes",
            at.saturating_add(bytes),
            b.len()
        )));
    }
    Ok(())
}

impl ShardDevice for CudaDevice {
    type Buffer = CudaSlice<u8>;

    fn name(&self) -> String {
        format!("cuda: {}", self.gpu.shared.name)
    }

    fn limits(&self) -> DeviceLimits {
        self.limits
    }

    fn upload(&self, bytes: &[u8], what: &str) -> Result<CudaSlice<u8>> {
        if bytes.is_empty() {
            // zero-size allocations are refused
            return self.zeroed(16, what);
        }
        self.gpu
            .stream
            .clone_htod(bytes)
            .map_err(|e| driver_error(&format!("upload of {what}"), e))
    }

    fn zeroed(&self, bytes: usize, what: &str) -> Result<CudaSlice<u8>> {
        self.gpu
            .stream
            .alloc_zeros(bytes.max(16))
            .map_err(|e| driver_error(&format!("allocation of {what}"), e))
    }

    fn write(&self, buffer: &CudaSlice<u8>, bytes: &[u8], what: &str) -> Result<()> {
        inside(buffer, 0, bytes.len(), what)?;
        self.bind()?;
        // SAFETY: the destination holds bytes.len() bytes (checked above); the host slice
        // outlives the copy, which the synchronisation below completes.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                self.ptr(buffer),
                bytes.as_ptr().cast(),
                bytes.len(),
                self.stream(),
            )
        }
        .result()
        .map_err(|e| driver_error(&format!("upload of {what}"), e))?;
        self.flush()
    }

    fn launch(&self, call: &Call<'_, CudaSlice<u8>>) -> Result<()> {
        let p = plan(call, self.gpu.shared.sms);
        if p.grid.1 == 0 || p.grid.2 == 0 {
            return Ok(());
        }
        let f = self.gpu.shared.launchable(p.kernel);
        let mut b = self.gpu.stream.launch_builder(f);
        for a in &p.args {
            match a {
                Arg::Param(Param::Grad(v)) => b.arg(v),
                Arg::Param(Param::Quant(v)) => b.arg(v),
                Arg::Param(Param::Sample(v)) => b.arg(v),
                Arg::Param(Param::Bins(v)) => b.arg(v),
                Arg::Param(Param::U32(v)) => b.arg(v),
                Arg::Buffer(buf) => b.arg(*buf),
            };
        }
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: p.grid,
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: p.shared_bytes,
        };
        // SAFETY: the plan's arguments are the kernel's declared parameters in order (the
        // simulator runs the same plans against the CPU reference), and the shard driver
        // sizes every buffer for what the kernel indexes.
        unsafe { b.launch(cfg) }
            .map(drop)
            .map_err(|e| driver_error(&format!("launch of {}.cu", p.kernel.stem()), e))
    }

    fn copy(
        &self,
        src: &CudaSlice<u8>,
        from: usize,
        dst: &CudaSlice<u8>,
        to: usize,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        inside(src, from, bytes, "a copy")?;
        inside(dst, to, bytes, "a copy")?;
        self.bind()?;
        // SAFETY: both ranges lie inside their buffers (checked above), on this context.
        unsafe {
            sys::cuMemcpyDtoDAsync_v2(
                self.ptr(dst) + to as u64,
                self.ptr(src) + from as u64,
                bytes,
                self.stream(),
            )
        }
        .result()
        .map_err(|e| driver_error("copy", e))
    }

    fn copy_runs(&self, src: &CudaSlice<u8>, dst: &CudaSlice<u8>, r: Runs) -> Result<()> {
        if r.run == 0 || r.rows == 0 {
            return Ok(());
        }
        if !r.inside(src.len(), dst.len()) {
            return Err(Error::Backend(format!(
                "CUDA: the runs {r:?} leave buffers of {} and {} bytes",
                src.len(),
                dst.len()
            )));
        }
        if r.src_pitch > MAX_PITCH_BYTES {
            // a pitch a 2D copy may refuse: one copy a run
            for (from, to) in r.each() {
                self.copy(src, from.start, dst, to.start, r.run)?;
            }
            return Ok(());
        }
        self.bind()?;
        let copy = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: self.ptr(src) + r.src_at as u64,
            srcArray: std::ptr::null_mut(),
            srcPitch: r.src_pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: self.ptr(dst) + r.dst_at as u64,
            dstArray: std::ptr::null_mut(),
            dstPitch: r.run,
            WidthInBytes: r.run,
            Height: r.rows,
        };
        // SAFETY: both are device buffers of this stream's context; every run read lies
        // inside `src` and every run written inside `dst` (checked above).
        unsafe { sys::cuMemcpy2DAsync_v2(&copy, self.stream()) }
            .result()
            .map_err(|e| driver_error("strided copy", e))
    }

    fn clear(&self, buffer: &CudaSlice<u8>, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        inside(buffer, 0, bytes, "a clear")?;
        self.bind()?;
        // SAFETY: the range lies inside the buffer (checked above).
        unsafe { sys::cuMemsetD8Async(self.ptr(buffer), 0, bytes, self.stream()) }
            .result()
            .map_err(|e| driver_error("memset", e))
    }

    fn read(&self, regions: &[Region<'_, CudaSlice<u8>>]) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::with_capacity(regions.len());
        for &(b, at, bytes) in regions {
            if bytes == 0 {
                out.push(Vec::new());
                continue;
            }
            inside(b, at, bytes, "a read-back")?;
            out.push(
                self.gpu
                    .stream
                    .clone_dtoh(&b.slice(at..at + bytes))
                    .map_err(|e| driver_error("read-back", e))?,
            );
        }
        self.flush()?;
        Ok(out)
    }

    fn flush(&self) -> Result<()> {
        self.gpu
            .stream
            .synchronize()
            .map_err(|e| driver_error("stream", e))?;
        self.gpu
            .stream
            .context()
            .check_err()
            .map_err(|e| driver_error("deferred error", e))
    }
}
