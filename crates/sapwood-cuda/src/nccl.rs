//! Feature `nccl`: histograms summed between GPUs with NCCL, carrying packed integer lanes.
//!
//! [`NcclCollective`] wraps the job's host collective (the in-process one for several GPUs
//! in one process, MPI or TCP between processes): scalars, gathers and broadcasts go through
//! it, while the histograms — the bulk of the traffic — are summed as packed lanes, as
//! narrow as the proven bounds allow (the collective's codec, `sapwood_collective::codec`:
//! lane i weighted by 2^(w·i)), with one `ncclUint64` all-reduce on the GPU (unsigned, so
//! that wrap-around, which the codec's arithmetic relies on, is defined). NCCL therefore
//! moves the compressed words, `64 / lane_width(bound)` values per 8 bytes. The collective
//! offers those widths to the grower ([`DeviceExchange::packed_widths`]), so the backend packs
//! each level's histograms on the device with its `pack` kernel and only the packed words
//! cross to the host; the sum runs on a communication stream of the rank's own, so with
//! `comm_overlap` one chunk's sum overlaps the next chunk's build on the compute stream.
//!
//! NCCL runs one rank per GPU. Each rank's GPU comes from its rank
//! ([`crate::CudaFactory::open_device_for_rank`]), and before NCCL is touched every rank
//! reports its GPU's UUID through the host collective ([`crate::topology`]): when two ranks
//! share a GPU (several logical devices per GPU) every rank keeps the host collective for
//! the sums too and [`NcclCollective::fallback`] says why; when a rank cannot load libnccl
//! every rank returns the same error. The communicator is created with the rank's context
//! bound to the calling thread (`ncclCommInitRank` uses the current device), and destroyed
//! on drop without ever panicking.
//!
//! NCCL needs `libnccl.so` on the library path (PyPI's `nvidia-nccl-cu13` ships only
//! `libnccl.so.2`: add a `libnccl.so` link next to it). Tested on GPUs only
//! (`tests/nccl.rs`); the decision above is tested everywhere.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtrMut};
use cudarc::nccl::result as nccl;
use cudarc::nccl::sys;
use sapwood_core::collective::{Collective, CommStats, DeviceExchange};
use sapwood_core::error::{Error, Result};

use sapwood_collective::codec::{
    check_segments, lane_width, lanes_per_word, pack, unpack, unpack_segments,
};

use crate::device::Gpu;
use crate::topology::{plan, NcclPlan, RankDevice};

/// Whether libnccl can be loaded (cudarc panics on the first NCCL call without it).
pub fn nccl_present() -> bool {
    // SAFETY: only tries to dlopen libnccl by its candidate names.
    unsafe { sys::is_culib_present() }
}

fn nccl_error(what: &str, e: nccl::NcclError) -> Error {
    // SAFETY: libnccl is loaded (a communicator or an id exists); the string is static.
    let text = unsafe {
        let p = sys::ncclGetErrorString(e.0);
        if p.is_null() {
            String::new()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    Error::Collective(format!("NCCL {what}: {:?} ({text})", e.0))
}

/// A communicator owned by one worker, destroyed on drop.
struct OwnedComm {
    comm: sys::ncclComm_t,
    stream: Arc<CudaStream>,
}

// SAFETY: an NCCL communicator may be used from any thread as long as calls on it are not
// concurrent; OwnedComm is owned by one worker and only used through &mut self.
unsafe impl Send for OwnedComm {}

impl Drop for OwnedComm {
    fn drop(&mut self) {
        // never panics: errors while tearing down are ignored (cudarc's own Comm panics
        // when ncclCommAbort fails, which is why it is not used)
        let _ = self.stream.context().bind_to_thread();
        let _ = self.stream.synchronize();
        // SAFETY: the communicator was created by ncclCommInitRank and is destroyed once.
        if unsafe { nccl::comm_destroy(self.comm) }.is_err() {
            // SAFETY: as above; abort frees what destroy could not.
            let _ = unsafe { nccl::comm_abort(self.comm) };
        }
    }
}

/// A collective whose integer sums run on the GPUs through NCCL (or, when ranks share a
/// GPU, through the host collective).
pub struct NcclCollective {
    host: Box<dyn Collective>,
    comm: Option<OwnedComm>,
    fallback: Option<String>,
    stats: CommStats,
    /// whether NCCL sums packed lanes (else plain i64 values: the baseline packing is
    /// measured against)
    packed: bool,
}

impl NcclCollective {
    /// Joins the NCCL clique of the job. Every worker calls this collectively with its host
    /// collective and its logical device (e.g. `factory.open_device_for_rank(rank)?`, one
    /// GPU per rank): the ranks exchange their GPUs' UUIDs, and unless two share a GPU rank
    /// 0 creates the NCCL id and broadcasts it through `host`.
    pub fn new(mut host: Box<dyn Collective>, gpu: &Gpu) -> Result<Self> {
        let (rank, size) = (host.rank(), host.world_size());
        let me = RankDevice {
            has_nccl: nccl_present(),
            uuid: gpu.shared.uuid,
        };
        let reports = host.allgather(&me.encode())?;
        let ranks = reports
            .iter()
            .map(|b| RankDevice::decode(b))
            .collect::<Option<Vec<_>>>()
            .filter(|r| r.len() == size)
            .ok_or_else(|| Error::Collective("malformed NCCL rank reports".into()))?;
        match plan(&ranks) {
            NcclPlan::Fail(why) => return Err(Error::Collective(why)),
            NcclPlan::Host(why) => return Ok(Self::on_host(host, why)),
            NcclPlan::Nccl => {}
        }
        // rank 0 sends the id, or nothing when it could not make one, so that every rank
        // fails together instead of waiting for an id that never comes
        let mut id_bytes = if rank == 0 {
            match nccl::get_uniqueid() {
                Ok(id) => id.internal.iter().map(|&c| c as u8).collect(),
                Err(_) => Vec::new(),
            }
        } else {
            Vec::new()
        };
        host.broadcast(&mut id_bytes, 0)?;
        if id_bytes.len() != 128 {
            return Err(Error::Collective(
                "NCCL: rank 0 could not create the communicator id".into(),
            ));
        }
        let mut id = sys::ncclUniqueId { internal: [0; 128] };
        for (d, &b) in id.internal.iter_mut().zip(&id_bytes) {
            *d = b as std::ffi::c_char;
        }
        // a stream of its own for the sums: they overlap the builds on the compute stream
        let stream = gpu
            .stream
            .context()
            .new_stream()
            .map_err(|e| Error::Collective(format!("CUDA stream of rank {rank}: {e}")))?;
        // ncclCommInitRank takes the device current on this thread: bind this rank's first
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::Collective(format!("CUDA context of rank {rank}: {e}")))?;
        let mut comm: sys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: `comm` is a valid out-pointer; the id came from rank 0's ncclGetUniqueId.
        unsafe { nccl::comm_init_rank(&mut comm, size as i32, id, rank as i32) }
            .map_err(|e| nccl_error("communicator", e))?;
        Ok(NcclCollective {
            host,
            comm: Some(OwnedComm { comm, stream }),
            fallback: None,
            stats: CommStats::default(),
            packed: true,
        })
    }

    /// The same collective summing plain i64 values through NCCL instead of packed lanes
    /// (`false`): the uncompressed baseline the GPU kit times packing against.
    pub fn with_packing(mut self, packed: bool) -> Self {
        self.packed = packed;
        self
    }

    /// Whether the sums go through NCCL.
    pub fn uses_nccl(&self) -> bool {
        self.comm.is_some()
    }

    /// Why the sums go through the host collective instead (ranks sharing a GPU).
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// A collective that sums through `host` alone, saying `why` (ranks sharing a GPU).
    /// The host collective's exchange of device-encoded histograms, which the grower only
    /// asks for where [`DeviceExchange::takes_encoded_blocks`] or
    /// [`DeviceExchange::packed_widths`] offered it.
    fn host_exchange(&mut self) -> Result<&mut dyn DeviceExchange> {
        self.host.device_exchange().ok_or_else(|| {
            Error::Collective("the host collective takes no device-encoded histograms".into())
        })
    }

    fn on_host(host: Box<dyn Collective>, why: String) -> Self {
        NcclCollective {
            host,
            comm: None,
            fallback: Some(why),
            stats: CommStats::default(),
            packed: true,
        }
    }

    fn nccl_sum(c: &OwnedComm, data: &mut [i64], bound: u64) -> Result<u64> {
        let bits = lane_width(bound);
        let words = pack(data, bits);
        debug_assert_eq!(words.len(), data.len().div_ceil(lanes_per_word(bits)));
        let summed = Self::nccl_words(c, words)?;
        data.copy_from_slice(&unpack(&summed, bits, data.len()));
        Ok(summed.len() as u64)
    }

    /// Counts one all-reduce of `words` packed words holding `values` values: what each rank
    /// sends in NCCL's ring all-reduce, 2 (p - 1) / p of the message, as the ring collective
    /// counts it.
    fn count(&mut self, words: usize, values: usize) {
        let p = self.host.world_size() as u64;
        self.stats.bytes_sent += 2 * (p - 1) * 8 * words as u64 / p;
        self.stats.bytes_uncompressed += 2 * (p - 1) * 8 * values as u64 / p;
        self.stats.allreduce_calls += 1;
    }

    /// Sums packed words over the ranks with one all-reduce on the communication stream.
    fn nccl_words(c: &OwnedComm, words: Vec<i64>) -> Result<Vec<i64>> {
        // summed as u64: the same bits as the i64 sum, with wrap-around defined (NCCL's
        // signed sum is C++ signed arithmetic)
        let words: Vec<u64> = words.into_iter().map(|w| w as u64).collect();
        let stream = &c.stream;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::Collective(format!("CUDA context: {e}")))?;
        let mut dev = stream
            .clone_htod(&words)
            .map_err(|e| Error::Collective(format!("NCCL upload: {e}")))?;
        {
            let (ptr, _record) = dev.device_ptr_mut(stream);
            // SAFETY: `ptr` holds words.len() u64 on this communicator's GPU, written in
            // place; the stream is the one the buffer was uploaded on.
            unsafe {
                nccl::all_reduce(
                    ptr as *const std::ffi::c_void,
                    ptr as *mut std::ffi::c_void,
                    words.len(),
                    sys::ncclDataType_t::ncclUint64,
                    sys::ncclRedOp_t::ncclSum,
                    c.comm,
                    stream.cu_stream() as sys::cudaStream_t,
                )
            }
            .map_err(|e| nccl_error("all-reduce", e))?;
        }
        let summed = stream
            .clone_dtoh(&dev)
            .map_err(|e| Error::Collective(format!("NCCL read-back: {e}")))?;
        Ok(summed.into_iter().map(|w| w as i64).collect())
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
        let Some(c) = &self.comm else {
            return self.host.allreduce_sum(data, bound);
        };
        if data.is_empty() {
            return Ok(());
        }
        let start = std::time::Instant::now();
        // a 64-bit lane is the value itself: no packing
        let bound = if self.packed { bound } else { u64::MAX };
        let words = Self::nccl_sum(c, data, bound)?;
        self.stats.busy_nanos += start.elapsed().as_nanos() as u64;
        self.count(words as usize, data.len());
        Ok(())
    }

    fn allreduce_segments(
        &mut self,
        data: &mut [i64],
        segment: usize,
        bounds: &[u64],
    ) -> Result<()> {
        if self.comm.is_none() {
            return self.host.allreduce_segments(data, segment, bounds);
        }
        self.allreduce_sum(data, bounds.iter().copied().max().unwrap_or(0))
    }

    fn reduce_scatter(
        &mut self,
        data: &mut [i64],
        blocks: &[std::ops::Range<usize>],
        bound: u64,
    ) -> Result<()> {
        if self.comm.is_none() {
            return self.host.reduce_scatter(data, blocks, bound);
        }
        self.allreduce_sum(data, bound)
    }

    fn overlap(&self) -> bool {
        // the sums run on a stream of their own (or on the host collective)
        self.host.overlap()
    }

    fn allreduce_max(&mut self, data: &mut [u64]) -> Result<()> {
        self.host.allreduce_max(data)
    }

    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.host.allgather(data)
    }

    fn gather(&mut self, data: &[u8], root: usize) -> Result<Option<Vec<Vec<u8>>>> {
        self.host.gather(data, root)
    }

    fn broadcast(&mut self, data: &mut Vec<u8>, root: usize) -> Result<()> {
        self.host.broadcast(data, root)
    }

    fn device_exchange(&mut self) -> Option<&mut dyn DeviceExchange> {
        Some(self)
    }

    fn stats(&self) -> CommStats {
        let h = self.host.stats();
        CommStats {
            bytes_sent: h.bytes_sent + self.stats.bytes_sent,
            bytes_uncompressed: h.bytes_uncompressed + self.stats.bytes_uncompressed,
            allreduce_calls: h.allreduce_calls + self.stats.allreduce_calls,
            blocks: h.blocks.plus(&self.stats.blocks),
            device_encoded: h.device_encoded + self.stats.device_encoded,
            busy_nanos: h.busy_nanos + self.stats.busy_nanos,
        }
    }
}

impl DeviceExchange for NcclCollective {
    fn takes_encoded_blocks(&mut self) -> bool {
        // NCCL sums words, not bytes; the host collective may take encoded blocks
        self.comm.is_none()
            && self
                .host
                .device_exchange()
                .is_some_and(|h| h.takes_encoded_blocks())
    }

    fn reduce_scatter_encoded(
        &mut self,
        own: &mut [i64],
        lens: &[usize],
        encoded: Vec<Vec<u8>>,
    ) -> Result<()> {
        self.host_exchange()?
            .reduce_scatter_encoded(own, lens, encoded)
    }

    fn packed_widths(&mut self, bounds: &[u64]) -> Option<Vec<u32>> {
        match &self.comm {
            None => self.host.device_exchange()?.packed_widths(bounds),
            Some(_) if self.host.world_size() < 2 => None,
            // each node at the width its bound proves (64: the values themselves)
            Some(_) => Some(
                bounds
                    .iter()
                    .map(|&b| if self.packed { lane_width(b) } else { 64 })
                    .collect(),
            ),
        }
    }

    fn allreduce_packed(
        &mut self,
        words: Vec<i64>,
        widths: &[u32],
        segment: usize,
        out: &mut [i64],
    ) -> Result<()> {
        let Some(c) = &self.comm else {
            return self
                .host_exchange()?
                .allreduce_packed(words, widths, segment, out);
        };
        check_segments(words.len(), widths, segment, out.len())?;
        if words.is_empty() {
            return Ok(());
        }
        let start = std::time::Instant::now();
        let n = words.len();
        let summed = Self::nccl_words(c, words)?;
        unpack_segments(&summed, widths, segment, out);
        self.stats.busy_nanos += start.elapsed().as_nanos() as u64;
        self.count(n, out.len());
        // packed on the device: the histograms reached the host only packed
        self.stats.blocks.packed += 1;
        self.stats.device_encoded += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A host collective whose extensions all answer, counting the calls that reach it.
    #[derive(Default, Clone)]
    struct Host {
        calls: Arc<AtomicUsize>,
    }

    impl Collective for Host {
        fn rank(&self) -> usize {
            0
        }
        fn world_size(&self) -> usize {
            2
        }
        fn allreduce_sum(&mut self, _data: &mut [i64], _bound: u64) -> Result<()> {
            Ok(())
        }
        fn allreduce_max(&mut self, _data: &mut [u64]) -> Result<()> {
            Ok(())
        }
        fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
            Ok(vec![data.to_vec(); 2])
        }
        fn broadcast(&mut self, _data: &mut Vec<u8>, _root: usize) -> Result<()> {
            Ok(())
        }
        fn overlap(&self) -> bool {
            true
        }
        fn device_exchange(&mut self) -> Option<&mut dyn DeviceExchange> {
            Some(self)
        }
    }

    impl DeviceExchange for Host {
        fn takes_encoded_blocks(&mut self) -> bool {
            true
        }
        fn reduce_scatter_encoded(
            &mut self,
            _own: &mut [i64],
            _lens: &[usize],
            _encoded: Vec<Vec<u8>>,
        ) -> Result<()> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        fn packed_widths(&mut self, bounds: &[u64]) -> Option<Vec<u32>> {
            Some(bounds.iter().map(|&b| lane_width(b)).collect())
        }
        fn allreduce_packed(
            &mut self,
            _words: Vec<i64>,
            _widths: &[u32],
            _segment: usize,
            _out: &mut [i64],
        ) -> Result<()> {
            self.calls.fetch_add(10, Ordering::Relaxed);
            Ok(())
        }
    }

    #[test]
    fn the_host_fallback_keeps_overlap_and_the_device_encoders() {
        // ranks sharing a GPU sum through the host collective: what it offers (overlap,
        // device-encoded blocks, device-packed words) must reach the grower unchanged
        let host = Host::default();
        let mut c = NcclCollective::on_host(Box::new(host.clone()), "shared GPU".into());
        assert!(!c.uses_nccl());
        assert!(c.overlap(), "overlap lost");
        assert!(c.takes_encoded_blocks(), "device-encoded blocks lost");
        assert_eq!(
            c.packed_widths(&[1, 1000]),
            Some(vec![2, 11]),
            "packed widths lost"
        );
        c.allreduce_packed(vec![0], &[2], 4, &mut [0; 4]).unwrap();
        c.reduce_scatter_encoded(&mut [0; 2], &[2, 2], vec![Vec::new(), vec![0]])
            .unwrap();
        assert_eq!(
            host.calls.load(Ordering::Relaxed),
            11,
            "calls kept from the host"
        );
    }
}
