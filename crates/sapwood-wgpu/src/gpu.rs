//! One logical device: the wgpu device and queue, its compiled kernels, and the helpers every
//! kernel call uses (buffers, bind groups, dispatches, read-backs). Device errors are
//! collected, never allowed to panic, and surface as `Error::Backend` at the next check.

use std::borrow::Cow;
use std::sync::{mpsc, Arc, Mutex};

use sapwood_core::error::{Error, Result};
use wgpu::util::DeviceExt;

use crate::shaders::{CodecKernel, Kernel, Wgsl};

/// Rows per workgroup that justify another workgroup (more only adds zeroing and flushing).
pub(crate) const ROWS_PER_GROUP: usize = 4096;
/// Threads per workgroup of every kernel (`WG` in common.wgsl).
pub(crate) const WG: usize = 256;

/// The compiled pipelines of one device.
pub(crate) struct Kernels {
    pipelines: Vec<wgpu::ComputePipeline>,
    codecs: Vec<wgpu::ComputePipeline>,
}

/// A kernel with a pipeline on every device: the core's list and this backend's encoders.
pub(crate) trait Compiled: Wgsl {
    /// Its pipeline among `kernels`.
    fn pipeline(self, kernels: &Kernels) -> &wgpu::ComputePipeline;
}

impl Compiled for Kernel {
    fn pipeline(self, kernels: &Kernels) -> &wgpu::ComputePipeline {
        let i = Kernel::ALL.iter().position(|&x| x == self).unwrap_or(0);
        &kernels.pipelines[i]
    }
}

impl Compiled for CodecKernel {
    fn pipeline(self, kernels: &Kernels) -> &wgpu::ComputePipeline {
        let i = CodecKernel::ALL
            .iter()
            .position(|&x| x == self)
            .unwrap_or(0);
        &kernels.codecs[i]
    }
}

/// A logical device with its kernels.
pub struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) kernels: Kernels,
    pub(crate) limits: wgpu::Limits,
    /// Bins per shared-memory histogram tile.
    pub(crate) tile_bins: u32,
    /// Largest chunk of bins bound at once.
    pub(crate) max_chunk_bytes: u64,
    /// Largest storage binding used (the adapter's, or less where a test asks).
    max_binding: u64,
    name: String,
    errors: Arc<Mutex<Vec<String>>>,
}

fn lock(errors: &Mutex<Vec<String>>) -> std::sync::MutexGuard<'_, Vec<String>> {
    // a poisoned lock only means another thread panicked while pushing a message
    errors.lock().unwrap_or_else(|e| e.into_inner())
}

/// A device error as the core's error type.
pub(crate) fn device_error(what: impl std::fmt::Display) -> Error {
    Error::Backend(format!("wgpu: {what}"))
}

impl Gpu {
    /// Opens a logical device on `adapter` with the adapter's real limits, and compiles every
    /// kernel inside error scopes.
    pub(crate) fn open(
        adapter: &wgpu::Adapter,
        tile_bins: Option<u32>,
        max_chunk_bytes: Option<u64>,
        max_binding_bytes: Option<u64>,
    ) -> Result<Self> {
        let info = adapter.get_info();
        let name = format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type);
        let limits = adapter.limits();
        // no optional feature is needed: the kernels use portable 32-bit atomics only
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("sapwood"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| device_error(format!("cannot open a device on {name}: {e}")))?;
        let errors = Arc::new(Mutex::new(Vec::new()));
        {
            let errors = errors.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                lock(&errors).push(e.to_string());
            }));
        }
        {
            let errors = errors.clone();
            device.set_device_lost_callback(move |reason, msg| {
                lock(&errors).push(format!("device lost ({reason:?}): {msg}"));
            });
        }
        // 16 bytes per bin: (Σg, Σh) as two i64 pairs of u32 words
        let fit = (limits.max_compute_workgroup_storage_size / 16).max(1);
        let tile_bins = tile_bins.unwrap_or(fit).clamp(1, fit);
        let adapter_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let binding = max_binding_bytes
            .unwrap_or(adapter_binding)
            .clamp(16, adapter_binding);
        let max_chunk_bytes = max_chunk_bytes.unwrap_or(binding).clamp(4, binding);
        let mut pipelines = Vec::with_capacity(Kernel::ALL.len());
        for k in Kernel::ALL {
            pipelines.push(compile(&device, k, tile_bins * 4)?);
        }
        let codecs = CodecKernel::ALL
            .iter()
            .map(|&k| compile(&device, k, tile_bins * 4))
            .collect::<Result<Vec<_>>>()?;
        Ok(Gpu {
            device,
            queue,
            kernels: Kernels { pipelines, codecs },
            limits,
            tile_bins,
            max_chunk_bytes,
            max_binding: binding,
            name,
            errors,
        })
    }

    /// The adapter's name, backend and type.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Fails with the first device error reported since the last check.
    pub(crate) fn check(&self) -> Result<()> {
        let mut e = lock(&self.errors);
        if e.is_empty() {
            return Ok(());
        }
        let msg = e.join("; ");
        e.clear();
        Err(device_error(msg))
    }

    /// Largest storage binding this device allows.
    pub(crate) fn max_binding(&self) -> u64 {
        self.max_binding
    }

    /// A storage buffer holding `data` (never empty: wgpu cannot bind zero bytes).
    pub(crate) fn storage(&self, label: &str, data: &[u8]) -> wgpu::Buffer {
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        if data.len() < 16 || !data.len().is_multiple_of(4) {
            let mut padded = data.to_vec();
            padded.resize(data.len().max(16).next_multiple_of(4), 0);
            return self
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(label),
                    contents: &padded,
                    usage,
                });
        }
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: data,
                usage,
            })
    }

    /// Overwrites the start of `buffer` with `data` (a multiple of 4 bytes), ahead of every
    /// later submission.
    pub(crate) fn write(&self, buffer: &wgpu::Buffer, data: &[u8]) -> Result<()> {
        if !data.is_empty() {
            self.queue.write_buffer(buffer, 0, data);
            self.submit(self.encoder())?;
        }
        Ok(())
    }

    /// A zeroed storage buffer of at least `bytes` bytes.
    pub(crate) fn zeroed(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(16).next_multiple_of(4),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// A uniform buffer holding `v`.
    pub(crate) fn uniform<T: bytemuck::Pod>(&self, v: &T) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("params"),
                contents: bytemuck::bytes_of(v),
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }

    /// Records one dispatch of `k` with `buffers` bound at bindings 0, 1, 2, ...
    pub(crate) fn dispatch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        k: impl Compiled,
        buffers: &[&wgpu::Buffer],
        groups: [u32; 3],
    ) {
        if groups.contains(&0) {
            return;
        }
        let pipeline = k.pipeline(&self.kernels);
        let entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&k.name()),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(&k.name()),
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
    }

    /// Workgroups along x for `rows` rows handled with a grid-stride loop.
    pub(crate) fn row_groups(&self, rows: usize, rows_per_group: usize) -> u32 {
        let cap = self
            .limits
            .max_compute_workgroups_per_dimension
            .clamp(1, 4096) as usize;
        rows.div_ceil(rows_per_group.max(1)).clamp(1, cap) as u32
    }

    /// A new command encoder.
    pub(crate) fn encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
    }

    /// Submits `encoder` without waiting.
    pub(crate) fn submit(&self, encoder: wgpu::CommandEncoder) -> Result<()> {
        self.queue.submit([encoder.finish()]);
        self.check()
    }

    /// Submits `encoder` after copying each (buffer, offset, bytes) region to the host, waits,
    /// and returns the regions' bytes.
    pub(crate) fn read(
        &self,
        mut encoder: wgpu::CommandEncoder,
        regions: &[(&wgpu::Buffer, u64, u64)],
    ) -> Result<Vec<Vec<u8>>> {
        let total: u64 = regions.iter().map(|r| r.2).sum();
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read-back"),
            size: total.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut at = 0;
        for &(b, offset, bytes) in regions {
            if bytes > 0 {
                encoder.copy_buffer_to_buffer(b, offset, &staging, at, bytes);
            }
            at += bytes;
        }
        self.queue.submit([encoder.finish()]);
        let (tx, rx) = mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(device_error)?;
        self.check()?;
        rx.recv()
            .map_err(|_| device_error("the read-back was dropped"))?
            .map_err(device_error)?;
        let out = {
            let view = staging.get_mapped_range(..).map_err(device_error)?;
            let mut out = Vec::with_capacity(regions.len());
            let mut at = 0usize;
            for r in regions {
                out.push(view[at..at + r.2 as usize].to_vec());
                at += r.2 as usize;
            }
            out
        };
        staging.unmap();
        Ok(out)
    }
}

/// Compiles one kernel inside validation and internal error scopes: wgpu would otherwise
/// report a bad shader through the panicking default handler.
fn compile(device: &wgpu::Device, k: impl Wgsl, tile_words: u32) -> Result<wgpu::ComputePipeline> {
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(&k.name()),
        source: wgpu::ShaderSource::Wgsl(Cow::Owned(k.source(tile_words))),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(&k.name()),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let v = pollster::block_on(validation.pop());
    let i = pollster::block_on(internal.pop());
    if let Some(e) = v.or(i) {
        return Err(device_error(format!("cannot compile {}: {e}", k.name())));
    }
    Ok(pipeline)
}
