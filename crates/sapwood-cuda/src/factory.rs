//! `CudaFactory`: one logical device (a stream of its own) per backend, i.e. per worker,
//! spread round-robin over the GPUs, so `--workers N` on one GPU gives N logical devices.

use std::sync::atomic::{AtomicUsize, Ordering};

use sapwood_core::backend::HistBackend;
use sapwood_core::backend::{BackendFactory, ShardData};
use sapwood_core::error::{Error, Result};

use crate::backend::{CudaBackend, CudaDevice};
use crate::device::{device_count, Gpu};

/// Where logical devices go, and tuning knobs for tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CudaOptions {
    /// GPU ordinals the logical devices are spread over, round-robin (default: every GPU).
    /// Repeating an ordinal (`[0, 0, 0, 0]`) puts several logical devices on one GPU.
    pub devices: Option<Vec<usize>>,
    /// Bins per shared-memory histogram tile (default: what 48 KiB holds, 3072); features
    /// wider than a tile use the global-memory kernel. Above 3072 the block opts in to more
    /// shared memory, up to the device's limit.
    pub tile_bins: Option<u32>,
}

/// Builds CUDA backends; `Send + Sync`, shared by every worker thread of a job.
#[derive(Debug, Default)]
pub struct CudaFactory {
    options: CudaOptions,
    next: AtomicUsize,
}

impl CudaFactory {
    /// A factory over every GPU with default options. Nothing is touched until `create`.
    pub fn new() -> Self {
        Self::with_options(CudaOptions::default())
    }

    /// A factory with `options`.
    pub fn with_options(options: CudaOptions) -> Self {
        CudaFactory {
            options,
            next: AtomicUsize::new(0),
        }
    }

    /// The GPU ordinals logical devices are spread over; a clear error without a driver or
    /// a GPU.
    pub fn ordinals(&self) -> Result<Vec<usize>> {
        if matches!(&self.options.devices, Some(d) if d.is_empty()) {
            return Err(Error::param("device", "an empty list of CUDA devices"));
        }
        let count = device_count().map_err(|e| match (e, &self.options.devices) {
            // say which device was asked for: the driver's absence is the same either way
            (Error::Backend(m), Some(d)) => {
                Error::Backend(format!("{m}; requested: {}", device_list(d)))
            }
            (e, _) => e,
        })?;
        match &self.options.devices {
            None => Ok((0..count).collect()),
            Some(d) => {
                if let Some(&bad) = d.iter().find(|&&o| o >= count) {
                    return Err(Error::param(
                        "device",
                        format!(
                            "`cuda:{bad}` requested, but the NVIDIA driver reports {count} \
                             GPU{} (cuda:0{})",
                            if count == 1 { "" } else { "s" },
                            if count > 1 {
                                format!(" to cuda:{}", count - 1)
                            } else {
                                String::new()
                            }
                        ),
                    ));
                }
                Ok(d.clone())
            }
        }
    }

    /// Opens the next logical device (round-robin over the GPUs).
    pub fn open_device(&self) -> Result<Gpu> {
        let ordinals = self.ordinals()?;
        let i = self.next.fetch_add(1, Ordering::Relaxed) % ordinals.len();
        Gpu::open(ordinals[i])
    }

    /// The GPU of worker `rank`: `ordinals()[rank % len]`, a function of the rank alone
    /// (never of the order in which threads reach the factory), so that one process per GPU
    /// or one thread per GPU puts each rank on a GPU of its own.
    pub fn ordinal_for_rank(&self, rank: usize) -> Result<usize> {
        let ordinals = self.ordinals()?;
        Ok(ordinals[rank % ordinals.len()])
    }

    /// A logical device on the GPU of worker `rank` (see [`CudaFactory::ordinal_for_rank`]),
    /// e.g. for `nccl::NcclCollective::new`; leaves the round-robin of `create` alone.
    pub fn open_device_for_rank(&self, rank: usize) -> Result<Gpu> {
        Gpu::open(self.ordinal_for_rank(rank)?)
    }
}

/// Devices as the `device` setting writes them: `cuda:0,cuda:1`.
fn device_list(ordinals: &[usize]) -> String {
    ordinals
        .iter()
        .map(|o| format!("cuda:{o}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl BackendFactory for CudaFactory {
    fn create(&self, shard: ShardData) -> Result<Box<dyn HistBackend>> {
        let gpu = self.open_device()?;
        Ok(Box::new(CudaBackend::new(
            CudaDevice::new(gpu, self.options.tile_bins)?,
            shard,
        )?))
    }
}
