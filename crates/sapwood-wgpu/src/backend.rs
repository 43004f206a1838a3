//! The WGSL backend: the core's shard driver ([`DeviceShard`]) on a wgpu device. This file
//! is the device: storage buffers, uniform parameter blocks, dispatches recorded into one
//! pending command encoder, and read-backs that submit it.

use std::sync::{Arc, Mutex, MutexGuard};

use sapwood_core::backend::device::{
    Call, DeviceLimits, DeviceShard, Launch, Region, Scalars, ShardDevice,
};
use sapwood_core::backend::shard::ShardLimits;
use sapwood_core::error::Result;

use crate::gpu::{Gpu, ROWS_PER_GROUP, WG};
use crate::layout::{BinParams, CodecParams, GradParams, QuantParams, SampleParams};

/// The WGSL backend of one worker.
pub type WgpuBackend = DeviceShard<WgpuDevice>;

/// Classes the softmax kernel sums in one u32 (Σ of k values below 2^24 each).
const MAX_CLASSES: usize = 255;
/// Groups of 32 values one workgroup of groups.wgsl encodes at a time.
const GROUPS_PER_WG: usize = WG / 32;

/// A wgpu device as the shard driver sees it: its work is recorded into one pending command
/// encoder, submitted when something is read back or written from the host.
pub struct WgpuDevice {
    gpu: Arc<Gpu>,
    pending: Mutex<Option<wgpu::CommandEncoder>>,
}

impl WgpuDevice {
    /// The shard driver's view of `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        WgpuDevice {
            gpu,
            pending: Mutex::new(None),
        }
    }

    /// The logical device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    fn pending(&self) -> MutexGuard<'_, Option<wgpu::CommandEncoder>> {
        // a poisoned lock only means a panic while recording: the encoder is still whole
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records into the pending encoder.
    fn record<R>(&self, f: impl FnOnce(&mut wgpu::CommandEncoder) -> R) -> R {
        let mut p = self.pending();
        f(p.get_or_insert_with(|| self.gpu.encoder()))
    }

    /// The pending encoder (or a new one), to submit.
    fn take(&self) -> wgpu::CommandEncoder {
        self.pending().take().unwrap_or_else(|| self.gpu.encoder())
    }

    /// Workgroups along x for a call's work (each kernel strides over its items).
    fn groups_x(&self, call: &Call<'_, wgpu::Buffer>) -> u32 {
        use sapwood_core::backend::shard::kernels::{CodecKernel, Kernel};
        let g = &self.gpu;
        match call.kernel {
            Launch::Kernel(
                Kernel::Gradients | Kernel::Quantise | Kernel::SampleRows | Kernel::Predict,
            ) => g.row_groups(call.items, WG * 16),
            Launch::Kernel(_) => g.row_groups(call.items, ROWS_PER_GROUP),
            Launch::Codec(CodecKernel::Pack) => g.row_groups(call.items, WG),
            Launch::Codec(CodecKernel::Groups) => {
                let cap = g.limits.max_compute_workgroups_per_dimension.max(1) as usize;
                (call.items / 32).div_ceil(GROUPS_PER_WG).clamp(1, cap) as u32
            }
        }
    }
}

impl ShardDevice for WgpuDevice {
    type Buffer = wgpu::Buffer;

    fn name(&self) -> String {
        format!("wgpu: {}", self.gpu.name())
    }

    fn limits(&self) -> DeviceLimits {
        let binding = self.gpu.max_binding();
        DeviceLimits {
            shard: ShardLimits {
                // the partition kernels address rows as 4-byte words below u32::MAX
                max_rows: (u32::MAX / 4) as usize,
                max_groups: MAX_CLASSES,
            },
            binding_bytes: binding,
            batch_bytes: binding,
            chunk_bytes: self.gpu.max_chunk_bytes,
            tile_bins: self.gpu.tile_bins,
        }
    }

    fn upload(&self, bytes: &[u8], what: &str) -> Result<wgpu::Buffer> {
        Ok(self.gpu.storage(what, bytes))
    }

    fn zeroed(&self, bytes: usize, what: &str) -> Result<wgpu::Buffer> {
        Ok(self.gpu.zeroed(what, bytes as u64))
    }

    fn write(&self, buffer: &wgpu::Buffer, bytes: &[u8], _what: &str) -> Result<()> {
        // a queued write runs before the next submission: submit what was recorded first
        self.gpu.submit(self.take())?;
        self.gpu.write(buffer, bytes)
    }

    fn launch(&self, call: &Call<'_, wgpu::Buffer>) -> Result<()> {
        let g = &self.gpu;
        let params = match call.scalars {
            Scalars::Grad(s) => Some(g.uniform(&GradParams::from(s))),
            Scalars::Quant(s) => Some(g.uniform(&QuantParams::from(s))),
            Scalars::Sample(s) => Some(g.uniform(&SampleParams::from(s))),
            Scalars::Bins(s) | Scalars::Tree { bins: s, .. } => {
                Some(g.uniform(&BinParams::from(s)))
            }
            Scalars::Codec(s) => Some(g.uniform(&CodecParams {
                values: s.values,
                messages: s.messages,
                groups: s.groups,
                write: s.write,
            })),
            Scalars::None => None,
        };
        let buffers: Vec<&wgpu::Buffer> =
            params.iter().chain(call.buffers.iter().copied()).collect();
        let groups = [self.groups_x(call), call.y, call.z];
        self.record(|enc| match call.kernel {
            Launch::Kernel(k) => g.dispatch(enc, k, &buffers, groups),
            Launch::Codec(k) => g.dispatch(enc, k, &buffers, groups),
        });
        Ok(())
    }

    fn copy(
        &self,
        src: &wgpu::Buffer,
        from: usize,
        dst: &wgpu::Buffer,
        to: usize,
        bytes: usize,
    ) -> Result<()> {
        if bytes > 0 {
            self.record(|enc| {
                enc.copy_buffer_to_buffer(src, from as u64, dst, to as u64, bytes as u64)
            });
        }
        Ok(())
    }

    fn clear(&self, buffer: &wgpu::Buffer, bytes: usize) -> Result<()> {
        if bytes > 0 {
            self.record(|enc| enc.clear_buffer(buffer, 0, Some(bytes as u64)));
        }
        Ok(())
    }

    fn read(&self, regions: &[Region<'_, wgpu::Buffer>]) -> Result<Vec<Vec<u8>>> {
        let r: Vec<(&wgpu::Buffer, u64, u64)> = regions
            .iter()
            .map(|&(b, at, bytes)| (b, at as u64, bytes as u64))
            .collect();
        self.gpu.read(self.take(), &r)
    }

    fn flush(&self) -> Result<()> {
        self.gpu.submit(self.take())
    }
}
