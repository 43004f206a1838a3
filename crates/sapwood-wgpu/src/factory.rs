//! `WgpuFactory`: creates one logical device per backend (per worker), spread round-robin
//! over the adapters found, so `--workers N` on one adapter gives N logical devices.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use sapwood_core::backend::{BackendFactory, HistBackend, ShardData};
use sapwood_core::error::{Error, Result};

use crate::adapters::find_adapters;
use crate::backend::{WgpuBackend, WgpuDevice};
use crate::gpu::Gpu;

/// Tuning knobs, mostly for tests that must exercise the rarely taken paths on small data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WgpuOptions {
    /// Bins per shared-memory histogram tile (default and maximum: what the adapter's
    /// workgroup storage holds); features wider than a tile use the global-memory kernel.
    pub tile_bins: Option<u32>,
    /// Largest chunk of the binned shard bound at once, in bytes (default and maximum: the
    /// adapter's storage binding limit).
    pub max_chunk_bytes: Option<u64>,
    /// Largest storage binding used, in bytes (default and maximum: the adapter's limit), so
    /// that tests split batches of node histograms and their encodings on small data.
    pub max_binding_bytes: Option<u64>,
    /// Indices of the adapters logical devices are spread over, round-robin, in the order
    /// [`WgpuFactory::adapter_names`] lists them (`device = "wgpu:0"`); default: every one.
    pub adapters: Option<Vec<usize>>,
}

/// Builds wgpu backends; `Send + Sync`, shared by every worker thread of a job.
pub struct WgpuFactory {
    options: WgpuOptions,
    adapters: OnceLock<std::result::Result<Vec<wgpu::Adapter>, String>>,
    next: AtomicUsize,
}

impl Default for WgpuFactory {
    fn default() -> Self {
        Self::new()
    }
}

impl WgpuFactory {
    /// A factory with default options; adapters are looked for on first use.
    pub fn new() -> Self {
        Self::with_options(WgpuOptions::default())
    }

    /// A factory with `options`.
    pub fn with_options(options: WgpuOptions) -> Self {
        WgpuFactory {
            options,
            adapters: OnceLock::new(),
            next: AtomicUsize::new(0),
        }
    }

    fn adapters(&self) -> Result<&[wgpu::Adapter]> {
        self.adapters
            .get_or_init(|| {
                find_adapters().map_err(|e| match e {
                    Error::Backend(m) => m,
                    other => other.to_string(),
                })
            })
            .as_deref()
            .map_err(|e| Error::Backend(e.clone()))
    }

    /// Names of the adapters logical devices are spread over.
    pub fn adapter_names(&self) -> Result<Vec<String>> {
        Ok(self
            .adapters()?
            .iter()
            .map(|a| {
                let i = a.get_info();
                format!("{} ({:?}, {:?})", i.name, i.backend, i.device_type)
            })
            .collect())
    }

    /// The adapter indices logical devices are spread over: the chosen ones, or every
    /// adapter; an error naming `device` for an index beyond the adapters found.
    pub fn chosen(&self) -> Result<Vec<usize>> {
        let adapters = self.adapters()?;
        match &self.options.adapters {
            None => Ok((0..adapters.len()).collect()),
            Some(list) if list.is_empty() => {
                Err(Error::param("device", "an empty list of wgpu adapters"))
            }
            Some(list) => {
                if let Some(&bad) = list.iter().find(|&&i| i >= adapters.len()) {
                    let n = adapters.len();
                    return Err(Error::param(
                        "device",
                        format!(
                            "`wgpu:{bad}` requested, but {n} wgpu adapter{} found: {}",
                            if n == 1 { " was" } else { "s were" },
                            self.adapter_names()?
                                .iter()
                                .enumerate()
                                .map(|(i, a)| format!("wgpu:{i} {a}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
                Ok(list.clone())
            }
        }
    }

    /// Opens a new logical device on the next chosen adapter (round-robin).
    pub fn open_device(&self) -> Result<Arc<Gpu>> {
        let chosen = self.chosen()?;
        let adapters = self.adapters()?;
        let i = chosen[self.next.fetch_add(1, Ordering::Relaxed) % chosen.len()];
        Ok(Arc::new(Gpu::open(
            &adapters[i],
            self.options.tile_bins,
            self.options.max_chunk_bytes,
            self.options.max_binding_bytes,
        )?))
    }
}

impl BackendFactory for WgpuFactory {
    fn create(&self, shard: ShardData) -> Result<Box<dyn HistBackend>> {
        let gpu = self.open_device()?;
        Ok(Box::new(WgpuBackend::new(WgpuDevice::new(gpu), shard)?))
    }
}
