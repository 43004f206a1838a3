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
                format!(
                    "`{other}` is not cpu, wgpu or cuda (a GPU may take an index: cuda:1, \
                     wgpu:0; or a list, one per worker: cuda:0,cuda:1)"
                ),
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

/// The most devices a `device` list may name (one per in-process worker).
pub const MAX_DEVICES: usize = 16;

/// Which devices of the job's kind its workers use, by index (`cuda:1`, `wgpu:0`), in
/// worker order; empty means every device the backend finds, shared round-robin. A fixed
/// array keeps [`RunOptions`] `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceIndices {
    len: u8,
    ids: [u16; MAX_DEVICES],
}

impl DeviceIndices {
    /// The indices, in worker order.
    pub fn as_slice(&self) -> &[u16] {
        &self.ids[..self.len as usize]
    }

    /// Whether no index was given (every device of the kind).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many indices were given.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The indices as `usize`, for the backends' factories.
    pub fn to_vec(self) -> Vec<usize> {
        self.as_slice().iter().map(|&i| usize::from(i)).collect()
    }

    /// Indices from a slice; an error naming `device` past [`MAX_DEVICES`] or `u16::MAX`.
    pub fn from_indices(ids: &[usize]) -> Result<Self> {
        if ids.len() > MAX_DEVICES {
            return Err(Error::param(
                "device",
                format!(
                    "{} devices listed; at most {MAX_DEVICES} (one per in-process worker)",
                    ids.len()
                ),
            ));
        }
        let mut out = DeviceIndices::default();
        for (k, &i) in ids.iter().enumerate() {
            out.ids[k] = u16::try_from(i)
                .map_err(|_| Error::param("device", format!("device index {i} is out of range")))?;
        }
        out.len = ids.len() as u8;
        Ok(out)
    }
}

/// Parses a `device` value: `cpu`, `wgpu`, `cuda` (every device of the kind), one device
/// by index (`cuda:1`), or a comma-separated list with one device per worker
/// (`cuda:0,cuda:1`; an index may repeat to put several workers on one device).
pub fn parse_devices(text: &str) -> Result<(Device, DeviceIndices)> {
    let bad = |why: String| Error::param("device", why);
    let items: Vec<&str> = text.split(',').map(str::trim).collect();
    let mut kind = None;
    let mut ids = Vec::with_capacity(items.len());
    for item in &items {
        if item.is_empty() {
            return Err(bad(format!(
                "`{text}` has an empty entry; expected cpu, wgpu or cuda, optionally with an \
                 index (cuda:1) or as a comma-separated list (cuda:0,cuda:1)"
            )));
        }
        let (name, index) = match item.split_once(':') {
            Some((name, index)) => (name.trim(), Some(index.trim())),
            None => (*item, None),
        };
        let device: Device = name.parse()?;
        match kind {
            None => kind = Some(device),
            Some(k) if k != device => {
                return Err(bad(format!(
                    "`{text}` mixes {k} and {device}; a list names devices of one kind"
                )))
            }
            Some(_) => {}
        }
        match (device, index) {
            (Device::Cpu, Some(_)) => {
                return Err(bad(format!(
                    "`{item}`: cpu takes no index (its threads are set by `threads`)"
                )))
            }
            (_, Some(i)) => {
                let n = if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) {
                    i.parse::<u16>().ok()
                } else {
                    None
                };
                let n = n.ok_or_else(|| {
                    bad(format!(
                        "`{item}`: the index after `:` must be a whole number below 65536, \
                         as in {device}:0 or {device}:1"
                    ))
                })?;
                ids.push(usize::from(n));
            }
            (_, None) => {}
        }
    }
    let kind = kind.unwrap_or_default();
    if items.len() > 1 {
        if kind == Device::Cpu {
            return Err(bad(format!(
                "`{text}`: cpu takes no list (workers share the CPU's threads)"
            )));
        }
        if ids.len() != items.len() {
            return Err(bad(format!(
                "`{text}`: every entry of a list needs an index ({kind}:0,{kind}:1)"
            )));
        }
    }
    Ok((kind, DeviceIndices::from_indices(&ids)?))
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
    /// One worker per process, joined over TCP through a coordinator address.
    Tcp,
}

impl FromStr for CollectiveKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "in-process" | "inprocess" | "in_process" => Ok(CollectiveKind::InProcess),
            "mpi" => Ok(CollectiveKind::Mpi),
            "tcp" => Ok(CollectiveKind::Tcp),
            other => Err(Error::param(
                "collective",
                format!("`{other}` is not in-process, mpi or tcp"),
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
    /// Which devices of that kind, one per worker or one for all (`device = "cuda:1"` or
    /// `"cuda:0,cuda:1"`); empty: every device the backend finds, round-robin.
    pub device_indices: DeviceIndices,
    /// In-process workers, each with its own shard and backend.
    pub workers: usize,
    /// The transport between workers.
    pub collective: CollectiveKind,
    /// Encoding of exchanged histograms.
    pub comm_codec: CommCodec,
    /// Exchange a level's histograms in chunks, each behind the build of the next.
    pub comm_overlap: bool,
    /// Longest wait for a peer (MPI ranks) before the job fails naming the rank; it also
    /// bounds how long the others wait while worker 0 computes the bin cuts.
    pub comm_timeout: std::time::Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: 0,
            device: Device::Cpu,
            device_indices: DeviceIndices::default(),
            workers: 1,
            collective: CollectiveKind::InProcess,
            comm_codec: CommCodec::Auto,
            comm_overlap: true,
            comm_timeout: std::time::Duration::from_secs(60),
        }
    }
}

impl super::Check for RunOptions {
    fn check(&self) -> Result<()> {
        self.validate()
    }
}

impl RunOptions {
    /// Checks every option's range (through [`super::Checked::new`] where options enter).
    pub(crate) fn validate(&self) -> Result<()> {
        if self.workers == 0 {
            return Err(Error::param("workers", "must be at least 1"));
        }
        let n = self.device_indices.len();
        if self.device == Device::Cpu && n > 0 {
            return Err(Error::param("device", "cpu takes no index"));
        }
        // MPI ranks are checked against the world size when training starts
        if n > 1 && self.collective == CollectiveKind::InProcess && n != self.workers {
            return Err(Error::param(
                "device",
                format!(
                    "`{}` lists {n} devices for {} worker{}: give one device per worker \
                     (workers = {n}), or one device for all",
                    self.device_spec(),
                    self.workers,
                    if self.workers == 1 { "" } else { "s" }
                ),
            ));
        }
        Ok(())
    }

    /// Runs on `device`, on the devices of that kind with these indices: one per worker,
    /// one for all, or none for every device the backend finds (what `device = "cuda:1"`
    /// or `"cuda:0,cuda:1"` sets). Checked against `workers` by `RunOptions::validate`.
    pub fn select_devices(&mut self, device: Device, indices: &[usize]) -> Result<()> {
        if device == Device::Cpu && !indices.is_empty() {
            return Err(Error::param("device", "cpu takes no index"));
        }
        self.device_indices = DeviceIndices::from_indices(indices)?;
        self.device = device;
        Ok(())
    }

    /// The `device` setting as text: `cuda`, `cuda:1` or `cuda:0,cuda:1`.
    pub fn device_spec(&self) -> String {
        if self.device_indices.is_empty() {
            return self.device.to_string();
        }
        let d = self.device;
        self.device_indices
            .as_slice()
            .iter()
            .map(|i| format!("{d}:{i}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The device indices worker `rank` of `world` uses: the whole list for in-process
    /// workers (each backend takes the next), the rank's own entry for a distributed rank
    /// (one worker per process); an error naming `device` when a list of several does not
    /// have one entry per rank.
    pub fn devices_for_rank(&self, rank: usize, world: usize) -> Result<Vec<usize>> {
        let ids = self.device_indices.to_vec();
        if ids.len() <= 1 || self.collective == CollectiveKind::InProcess {
            return Ok(ids);
        }
        if ids.len() != world {
            return Err(Error::param(
                "device",
                format!(
                    "`{}` lists {} devices for {world} ranks: give one device per rank, or \
                     one device for all",
                    self.device_spec(),
                    ids.len()
                ),
            ));
        }
        Ok(vec![ids[rank]])
    }

    /// Sets one option from text, by its name or an alias (`nthread`, `n_jobs`, ...).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let v = value.trim();
        match canonical(key)? {
            Setting::Run("threads") => self.threads = num("threads", v)?,
            Setting::Run("device") => (self.device, self.device_indices) = parse_devices(v)?,
            Setting::Run("workers") => self.workers = num("workers", v)?,
            Setting::Run("collective") => self.collective = v.parse()?,
            Setting::Run("comm_codec") => self.comm_codec = v.parse()?,
            Setting::Run("comm_overlap") => self.comm_overlap = super::flag("comm_overlap", v)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn devices(text: &str) -> (Device, Vec<usize>) {
        let (d, ids) = parse_devices(text).unwrap();
        (d, ids.to_vec())
    }

    #[test]
    fn device_forms_parse_to_kind_and_indices() {
        assert_eq!(devices("cpu"), (Device::Cpu, vec![]));
        assert_eq!(devices("cuda"), (Device::Cuda, vec![]));
        assert_eq!(devices("cuda:1"), (Device::Cuda, vec![1]));
        assert_eq!(devices("gpu:2"), (Device::Cuda, vec![2]));
        assert_eq!(devices(" wgpu:0 "), (Device::Wgpu, vec![0]));
        assert_eq!(devices("cuda:0,cuda:1"), (Device::Cuda, vec![0, 1]));
        assert_eq!(devices("cuda:1, cuda:0"), (Device::Cuda, vec![1, 0]));
        // a repeated index puts several workers on one GPU
        assert_eq!(devices("cuda:0,cuda:0"), (Device::Cuda, vec![0, 0]));
        let sixteen = vec!["wgpu:3"; MAX_DEVICES].join(",");
        assert_eq!(devices(&sixteen), (Device::Wgpu, vec![3; MAX_DEVICES]));
    }

    #[test]
    fn bad_device_forms_are_errors_naming_the_parameter() {
        let seventeen = vec!["cuda:0"; MAX_DEVICES + 1].join(",");
        for (text, words) in [
            ("cuda:x", "whole number"),
            ("cuda:", "whole number"),
            ("cuda:-1", "whole number"),
            ("cuda:1.5", "whole number"),
            ("cuda:70000", "whole number"),
            ("cpu:1", "cpu takes no index"),
            ("cpu,cpu", "cpu takes no list"),
            ("cuda,cuda:1", "needs an index"),
            ("cuda:0,wgpu:0", "mixes cuda and wgpu"),
            ("cuda:0,", "empty entry"),
            ("", "empty entry"),
            ("tpu:0", "`tpu` is not cpu, wgpu or cuda"),
            (seventeen.as_str(), "at most 16"),
        ] {
            let err = parse_devices(text).unwrap_err().to_string();
            assert!(err.contains("`device`"), "{text}: {err}");
            assert!(err.contains(words), "{text}: {err}");
        }
    }

    #[test]
    fn a_device_list_needs_one_device_per_worker() {
        let mut run = RunOptions::default();
        run.set("device", "cuda:0,cuda:1").unwrap();
        assert_eq!(run.device, Device::Cuda);
        assert_eq!(run.device_spec(), "cuda:0,cuda:1");
        // one worker, two devices: refused naming the parameter and both counts
        let err = run.validate().unwrap_err().to_string();
        assert!(
            err.contains("`device`") && err.contains("2 devices for 1 worker"),
            "{err}"
        );
        run.set("workers", "2").unwrap();
        run.validate().unwrap();
        run.workers = 3;
        assert!(run.validate().is_err());
        // one device serves any number of workers
        run.set("device", "cuda:1").unwrap();
        run.validate().unwrap();
        assert_eq!(run.devices_for_rank(2, 3).unwrap(), vec![1]);
        // setting the plain kind again forgets the indices
        run.set("device", "wgpu").unwrap();
        assert_eq!(
            (run.device_spec().as_str(), run.device_indices.len()),
            ("wgpu", 0)
        );
        assert!(run.device_indices.is_empty());
    }

    #[test]
    fn distributed_ranks_take_their_own_entry() {
        let mut run = RunOptions {
            collective: CollectiveKind::Mpi,
            ..RunOptions::default()
        };
        run.set("device", "cuda:1,cuda:0,cuda:3").unwrap();
        // `workers` is the collective's there: the list is checked against the world
        run.validate().unwrap();
        assert_eq!(run.devices_for_rank(0, 3).unwrap(), vec![1]);
        assert_eq!(run.devices_for_rank(2, 3).unwrap(), vec![3]);
        let err = run.devices_for_rank(0, 2).unwrap_err().to_string();
        assert!(err.contains("3 devices for 2 ranks"), "{err}");
        // in-process workers share the whole list
        run.collective = CollectiveKind::InProcess;
        run.workers = 3;
        assert_eq!(run.devices_for_rank(0, 3).unwrap(), vec![1, 0, 3]);
    }

    #[test]
    fn devices_can_be_selected_without_text() {
        let mut run = RunOptions::default();
        run.select_devices(Device::Wgpu, &[0]).unwrap();
        assert_eq!(run.device_spec(), "wgpu:0");
        assert!(run.select_devices(Device::Cpu, &[0]).is_err());
        assert!(run.select_devices(Device::Cuda, &[70_000]).is_err());
        assert!(run
            .select_devices(Device::Cuda, &[0; MAX_DEVICES + 1])
            .is_err());
        // a failed selection leaves the options as they were
        assert_eq!(run.device_spec(), "wgpu:0");
    }
}
