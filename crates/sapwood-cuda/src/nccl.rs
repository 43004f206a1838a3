//! Feature `nccl`: histograms summed between GPUs with NCCL, carrying packed integer lanes.
//!
//! [`NcclCollective`] wraps the job's host collective (the in-process one for several GPUs
//! in one process): scalars, gathers and broadcasts go through it, while `allreduce_sum` —
//! the histograms, the bulk of the traffic — packs the i64 values into lanes as narrow as the
//! proven `bound` allows (the collective's codec,
//! `sapwood_collective::codec`: lane i weighted by 2^(w·i)), sums the packed words with one `ncclInt64`
//! all-reduce on the GPU (an integer sum of packed words is exact), and unpacks. NCCL
//! therefore moves the compressed words, `64 / lane_width(bound)` values per 8 bytes.
//!
//! NCCL needs `libnccl.so` on the library path (PyPI's `nvidia-nccl-cu13` ships only
//! `libnccl.so.2`: add a `libnccl.so` link next to it). Not tested without GPUs.
#![allow(unsafe_code)]

use std::sync::Arc;

use cudarc::driver::CudaStream;
use cudarc::nccl::{Comm, Id, ReduceOp};
use sapwood_core::collective::{Collective, CommStats};
use sapwood_core::error::{Error, Result};

use sapwood_collective::codec::{lane_width, lanes_per_word, pack, unpack};

/// A communicator owned by one worker thread.
struct OwnedComm(Comm);

// SAFETY: an NCCL communicator may be used from any thread as long as calls on it are not
// concurrent; OwnedComm is owned by one worker and only used through &mut self.
unsafe impl Send for OwnedComm {}

/// A collective whose integer sums run on the GPUs through NCCL.
pub struct NcclCollective {
    host: Box<dyn Collective>,
    comm: OwnedComm,
    stream: Arc<CudaStream>,
    stats: CommStats,
}

fn nccl_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Collective(format!("NCCL {what}: {e:?}"))
}

impl NcclCollective {
    /// Joins the NCCL clique of the job. Every worker calls this collectively with its host
    /// collective and a stream on its GPU (e.g. `CudaFactory::open_device()?.stream`):
    /// rank 0 creates the NCCL id and broadcasts it through `host`.
    pub fn new(mut host: Box<dyn Collective>, stream: Arc<CudaStream>) -> Result<Self> {
        // SAFETY: only tries to dlopen libnccl by its candidate names.
        if !unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Err(Error::Collective(
                "feature `nccl` needs libnccl.so on the library path (PyPI's \
                 nvidia-nccl-cu13 ships libnccl.so.2 only: add a libnccl.so link)"
                    .into(),
            ));
        }
        let (rank, size) = (host.rank(), host.world_size());
        let mut id_bytes = if rank == 0 {
            let id = Id::new().map_err(|e| nccl_error("id", e))?;
            id.internal().iter().map(|&c| c as u8).collect()
        } else {
            Vec::new()
        };
        host.broadcast(&mut id_bytes, 0)?;
        if id_bytes.len() != 128 {
            return Err(Error::Collective("malformed NCCL id".into()));
        }
        let mut internal = [0 as std::ffi::c_char; 128];
        for (d, &b) in internal.iter_mut().zip(&id_bytes) {
            *d = b as std::ffi::c_char;
        }
        let comm = Comm::from_rank(stream.clone(), rank, size, Id::uninit(internal))
            .map_err(|e| nccl_error("communicator", e))?;
        Ok(NcclCollective {
            host,
            comm: OwnedComm(comm),
            stream,
            stats: CommStats::default(),
        })
    }
}

impl Collective for NcclCollective {
    fn rank(&self) -> usize {
        self.host.rank()
    }

    fn world_size(&self) -> usize {
        self.host.world_size()
    }

    fn allreduce_sum(&mut self, data: &mut [i64], bound: u64) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let bits = lane_width(bound);
        let words = pack(data, bits);
        let mut dev = self
            .stream
            .clone_htod(&words)
            .map_err(|e| nccl_error("upload", e))?;
        self.comm
            .0
            .all_reduce_in_place(&mut dev, &ReduceOp::Sum)
            .map_err(|e| nccl_error("all-reduce", e))?;
        let summed = self
            .stream
            .clone_dtoh(&dev)
            .map_err(|e| nccl_error("read-back", e))?;
        data.copy_from_slice(&unpack(&summed, bits, data.len()));
        self.stats.bytes_sent += 8 * words.len() as u64;
        self.stats.bytes_uncompressed += 8 * data.len() as u64;
        self.stats.allreduce_calls += 1;
        debug_assert_eq!(words.len(), data.len().div_ceil(lanes_per_word(bits)));
        Ok(())
    }

    fn allreduce_max(&mut self, data: &mut [u64]) -> Result<()> {
        self.host.allreduce_max(data)
    }

    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.host.allgather(data)
    }

    fn broadcast(&mut self, data: &mut Vec<u8>, root: usize) -> Result<()> {
        self.host.broadcast(data, root)
    }

    fn stats(&self) -> CommStats {
        let h = self.host.stats();
        CommStats {
            bytes_sent: h.bytes_sent + self.stats.bytes_sent,
            bytes_uncompressed: h.bytes_uncompressed + self.stats.bytes_uncompressed,
            allreduce_calls: h.allreduce_calls + self.stats.allreduce_calls,
        }
    }
}
