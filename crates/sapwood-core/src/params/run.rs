//! How a job runs: never saved, and never a bit of difference in the model.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::names::{canonical, num, Setting};
use crate::error::{Error, Result};

/// Where histograms are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// The CPU backend (rayon threads).
    #[default]
    Cpu,
    /// The WGSL backend through wgpu (Vulkan, Metal, DX12).
    Wgpu,
    /// The CUDA backend through cudarc.
    Cuda,
}

impl FromStr for Device {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "wgpu" | "gpu-wgsl" => Ok(Device::Wgpu),
            "cuda" | "gpu" => Ok(Device::Cuda),
            other => Err(Error::param(
                "device",
                format!("`{other}` is not cpu, wgpu or cuda"),
            )),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Device::Cpu => "cpu",
            Device::Wgpu => "wgpu",
            Device::Cuda => "cuda",
        })
    }
}

/// How histograms exchanged between workers are encoded (always exactly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommCodec {
    /// Plain 64-bit integers.
    None,
    /// Lanes narrowed to proven widths and packed several per 64-bit word.
    Packed,
    /// Zero bins suppressed, values varint-coded.
    Sparse,
    /// Chosen per message by size.
    #[default]
    Auto,
}

impl FromStr for CommCodec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(CommCodec::None),
            "packed" => Ok(CommCodec::Packed),
            "sparse" => Ok(CommCodec::Sparse),
            "auto" => Ok(CommCodec::Auto),
            other => Err(Error::param(
                "comm_codec",
                format!("`{other}` is not none, packed, sparse or auto"),
            )),
        }
    }
}

/// Which transport carries the workers' exchanges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CollectiveKind {
    /// Workers are threads of this process (`workers`).
    #[default]
    InProcess,
    /// One worker per MPI rank, launched by `mpirun`.
    Mpi,
}

impl FromStr for CollectiveKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "in-process" | "inprocess" | "in_process" => Ok(CollectiveKind::InProcess),
            "mpi" => Ok(CollectiveKind::Mpi),
            other => Err(Error::param(
                "collective",
                format!("`{other}` is not in-process or mpi"),
            )),
        }
    }
}

/// How a training job runs: never saved, and never changes a bit of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// Threads for the CPU backend (per process, shared by its workers); 0 means all cores.
    pub threads: usize,
    /// Where histograms are built.
    pub device: Device,
    /// In-process workers, each with its own shard and backend.
    pub workers: usize,
    /// The transport between workers.
    pub collective: CollectiveKind,
    /// Encoding of exchanged histograms.
    pub comm_codec: CommCodec,
    /// Longest wait for a peer (MPI ranks) before the job fails naming the rank.
    pub comm_timeout: std::time::Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: 0,
            device: Device::Cpu,
            workers: 1,
            collective: CollectiveKind::InProcess,
            comm_codec: CommCodec::Auto,
            comm_timeout: std::time::Duration::from_secs(60),
        }
    }
}

impl RunOptions {
    /// Checks every option's range.
    pub fn validate(&self) -> Result<()> {
        if self.workers == 0 {
            return Err(Error::param("workers", "must be at least 1"));
        }
        Ok(())
    }

    /// Sets one option from text, by its name or an alias (`nthread`, `n_jobs`, ...).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let v = value.trim();
        match canonical(key)? {
            Setting::Run("threads") => self.threads = num("threads", v)?,
            Setting::Run("device") => self.device = v.parse()?,
            Setting::Run("workers") => self.workers = num("workers", v)?,
            Setting::Run("collective") => self.collective = v.parse()?,
            Setting::Run("comm_codec") => self.comm_codec = v.parse()?,
            Setting::Run("comm_timeout") => {
                let secs: f64 = num("comm_timeout", v)?;
                if !(secs.is_finite() && secs > 0.0) {
                    return Err(Error::param(
                        "comm_timeout",
                        format!("{v} must be a finite number of seconds > 0"),
                    ));
                }
                self.comm_timeout = std::time::Duration::from_secs_f64(secs);
            }
            Setting::Run(_) => unreachable!("RUN_OPTION_NAMES lists only names handled here"),
            Setting::Param(name) => {
                return Err(Error::param(
                    name,
                    "is a model parameter, not a run option: set it on Params",
                ))
            }
        }
        Ok(())
    }
}
