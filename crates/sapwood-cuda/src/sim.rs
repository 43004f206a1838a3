//! The CUDA simulator as a device of the shard driver (feature `sim`): the kernels of
//! `shaders/cuda/` compiled as C++ for the CPU (`sim/sim.h` gives them the CUDA dialect, one
//! fiber per CUDA thread), launched with the CUDA backend's own [`plan`]s, on buffers in host
//! memory of the sizes the CUDA device allocates. So a test on the simulator runs every
//! kernel, and every line of the host code the GPU runs but `CudaDevice`'s own driver calls
//! (allocation, copies, clears, read-backs, the launch itself).
//!
//! What it checks beyond the results, as a GPU would punish it: the launch geometry (grid and
//! block limits, dynamic shared memory beyond the opt-in maximum), uninitialised dynamic
//! shared memory (poisoned before every block), barriers not reached by every thread of a
//! block, full-mask warp operations not reached by all 32 lanes, and writes past either end
//! of a buffer (guard words checked after every launch). Schedules chosen by a seed
//! interleave the threads: shuffled at every switch, or one warp at a time up to its next
//! barrier. See `sim/README.md` for what it cannot catch.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};

use sapwood_core::backend::device::{Call, DeviceLimits, DeviceShard, Region, ShardDevice};
use sapwood_core::backend::{BackendFactory, HistBackend, ShardData};
use sapwood_core::error::{Error, Result};

use crate::plan::{plan, Arg, Param, BLOCK};

/// The CUDA backend's shard driver on the simulator.
pub type SimBackend = DeviceShard<SimDevice>;

// The kernels built a second time acting as sm_75 (`SM75_BUILDS`), from the build script.
include!(concat!(env!("OUT_DIR"), "/sim_builds.rs"));

/// Most dynamic shared memory a block may use (227 KiB, the sm_90 opt-in maximum).
const MAX_SHARED_BYTES: u32 = 232_448;
/// Blocks along y or z of one launch.
const MAX_GRID_YZ: u32 = 65_535;
/// Guard words before and after every buffer.
const GUARD_WORDS: usize = 8;
/// What the guard words hold.
const GUARD: u64 = 0x5eed_f00d_dead_beef;

#[repr(C)]
struct SimLaunch {
    grid: [u32; 3],
    block: [u32; 3],
    dynamic_shared_bytes: u32,
    schedule: u32,
    seed: u64,
}

extern "C" {
    fn sapwood_sim_launch(
        entry: *const c_char,
        launch: *const SimLaunch,
        args: *mut *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
}

/// How the simulator interleaves the threads of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// Every switch picks a random runnable thread.
    Shuffled,
    /// One warp at a time, each until all its lanes wait at a barrier or have finished:
    /// the most skew between warps.
    WarpAtATime,
}

/// A simulated logical device.
pub struct SimDevice {
    schedule: Schedule,
    seed: u64,
    sms: u32,
    limits: DeviceLimits,
    /// The compute capability it acts as (75 or 90): sm_75 has no warp reduction
    /// instruction, and the kernels that use one take another path there.
    arch: u32,
    /// Launches so far: each launch gets a seed of its own.
    launches: AtomicU64,
}

/// A buffer of the simulator: host memory between guard words.
pub struct SimBuffer {
    words: UnsafeCell<Vec<u64>>,
    bytes: usize,
}

/// What the bytes between a buffer's end and its last whole word hold (checked like the
/// guard words: a write there is past the end on a GPU too).
const SLACK: u8 = 0xa5;

impl SimBuffer {
    fn new(bytes: usize) -> Self {
        let mut words = vec![0u64; 2 * GUARD_WORDS + bytes.div_ceil(8)];
        let n = words.len();
        words[..GUARD_WORDS].fill(GUARD);
        words[n - GUARD_WORDS..].fill(GUARD);
        let b = SimBuffer {
            words: UnsafeCell::new(words),
            bytes,
        };
        b.slack_mut().fill(SLACK);
        b
    }

    /// The bytes after the end, up to the next whole word.
    #[allow(clippy::mut_from_ref)]
    fn slack_mut(&self) -> &mut [u8] {
        let len = self.bytes.next_multiple_of(8) - self.bytes;
        // SAFETY: the data words hold bytes.next_multiple_of(8) bytes from ptr; no kernel
        // runs meanwhile and no other view of these bytes is alive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr().add(self.bytes), len) }
    }

    /// The buffer's bytes as the kernels see them.
    fn ptr(&self) -> *mut u8 {
        // SAFETY: the vector is never resized; the pointer stays inside it.
        unsafe { (*self.words.get()).as_mut_ptr().add(GUARD_WORDS).cast() }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `bytes` bytes from ptr lie inside the vector; no kernel runs meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.bytes) }
    }

    #[allow(clippy::mut_from_ref)]
    fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: as above; the device's calls run one at a time, so no other view is alive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.bytes) }
    }

    /// Whether both guards and the slack after the end are whole (no kernel wrote past
    /// either end).
    fn guards_hold(&self) -> bool {
        let slack = self.slack_mut().iter().all(|&b| b == SLACK);
        // SAFETY: read-only view of the vector between launches.
        let w = unsafe { &*self.words.get() };
        let n = w.len();
        slack
            && w[..GUARD_WORDS]
                .iter()
                .chain(&w[n - GUARD_WORDS..])
                .all(|&g| g == GUARD)
    }

    fn range(&self, at: usize, len: usize, what: &str) -> Result<std::ops::Range<usize>> {
        match at.checked_add(len) {
            Some(end) if end <= self.bytes => Ok(at..end),
            _ => Err(Error::Backend(format!(
                "simulator: {what} of bytes {at}..{} leaves a buffer of {} bytes",
                at.saturating_add(len),
                self.bytes
            ))),
        }
    }
}

impl SimDevice {
    /// A simulated device of `sms` multiprocessors whose launches interleave threads by
    /// `schedule`, seeded by `seed`; `tile_bins` caps a shared-memory histogram tile
    /// (default: what 48 KiB holds), as on a GPU.
    pub fn new(schedule: Schedule, seed: u64, sms: u32, tile_bins: Option<u32>) -> Self {
        SimDevice {
            schedule,
            seed,
            sms: sms.max(1),
            limits: crate::plan::limits(tile_bins),
            arch: 90,
            launches: AtomicU64::new(0),
        }
    }

    /// The device acting as compute capability `arch`: below 80, the kernels built for
    /// sm_75 (warp ORs by shuffles) run instead of those for sm_80 and later.
    pub fn acting_as(mut self, arch: u32) -> Self {
        self.arch = arch;
        self
    }

    fn launch_seed(&self) -> u64 {
        let n = self.launches.fetch_add(1, Ordering::Relaxed);
        // the runtime mixes it further (splitmix64): distinct inputs are enough here
        self.seed.rotate_left(17) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

impl ShardDevice for SimDevice {
    type Buffer = SimBuffer;

    fn name(&self) -> String {
        format!("cuda simulator ({:?}, seed {})", self.schedule, self.seed)
    }

    fn limits(&self) -> DeviceLimits {
        // the CUDA backend's own
        self.limits
    }

    // the sizes CudaDevice allocates, so that the guards sit where the GPU's buffer ends
    fn upload(&self, bytes: &[u8], what: &str) -> Result<SimBuffer> {
        if bytes.is_empty() {
            return self.zeroed(16, what);
        }
        let b = SimBuffer::new(bytes.len());
        b.bytes_mut().copy_from_slice(bytes);
        Ok(b)
    }

    fn zeroed(&self, bytes: usize, _what: &str) -> Result<SimBuffer> {
        Ok(SimBuffer::new(bytes.max(16)))
    }

    fn write(&self, buffer: &SimBuffer, bytes: &[u8], what: &str) -> Result<()> {
        let r = buffer.range(0, bytes.len(), what)?;
        buffer.bytes_mut()[r].copy_from_slice(bytes);
        Ok(())
    }

    fn launch(&self, call: &Call<'_, SimBuffer>) -> Result<()> {
        let p = plan(call, self.sms);
        let (x, y, z) = p.grid;
        if y == 0 || z == 0 {
            return Ok(());
        }
        let stem = p.kernel.stem();
        let entry = if self.arch < 80 && SM75_BUILDS.contains(&stem) {
            format!("{stem}_sm75")
        } else {
            stem.to_string()
        };
        if x == 0 || x > i32::MAX as u32 || y > MAX_GRID_YZ || z > MAX_GRID_YZ {
            return Err(Error::Backend(format!(
                "simulator: {entry}.cu launched with grid ({x}, {y}, {z}), outside CUDA's \
                 limits (x up to 2^31 - 1, y and z up to 65,535)"
            )));
        }
        if p.shared_bytes > MAX_SHARED_BYTES {
            return Err(Error::Backend(format!(
                "simulator: {entry}.cu asks for {} bytes of dynamic shared memory, more than \
                 the {MAX_SHARED_BYTES} a block may use",
                p.shared_bytes
            )));
        }
        // every argument's value at a stable address, as cuLaunchKernel takes them: the
        // vectors are complete before any pointer into them is taken
        let mut params: Vec<Param> = Vec::new();
        let mut pointers: Vec<*mut u8> = Vec::new();
        for a in &p.args {
            match a {
                Arg::Param(v) => params.push(*v),
                Arg::Buffer(b) => pointers.push(b.ptr()),
            }
        }
        let (mut values, mut buffers) = (params.iter_mut(), pointers.iter_mut());
        let mut args: Vec<*mut c_void> = Vec::with_capacity(p.args.len());
        for a in &p.args {
            args.push(match a {
                Arg::Param(_) => param_ptr(values.next().expect("one value a parameter")),
                Arg::Buffer(_) => {
                    let b = buffers.next().expect("one pointer a buffer");
                    (b as *mut *mut u8).cast()
                }
            });
        }
        let launch = SimLaunch {
            grid: [x, y, z],
            block: [BLOCK, 1, 1],
            dynamic_shared_bytes: p.shared_bytes,
            schedule: match self.schedule {
                Schedule::Shuffled => 0,
                Schedule::WarpAtATime => 1,
            },
            seed: self.launch_seed(),
        };
        let name = CString::new(entry.as_str()).expect("kernel names hold no NUL");
        let mut err = vec![0u8; 1024];
        // SAFETY: the plan's arguments are the kernel's parameters in order; each pointer in
        // `args` points at a live value of the parameter's type (a parameter block, a u32
        // or a buffer's pointer), and every buffer outlives the launch, which returns only
        // when the kernel has finished.
        let rc = unsafe {
            sapwood_sim_launch(
                name.as_ptr(),
                &launch,
                args.as_mut_ptr(),
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        if rc != 0 {
            let end = err.iter().position(|&c| c == 0).unwrap_or(err.len());
            return Err(Error::Backend(format!(
                "simulator: {}",
                String::from_utf8_lossy(&err[..end])
            )));
        }
        for (i, b) in call.buffers.iter().enumerate() {
            if !b.guards_hold() {
                return Err(Error::Backend(format!(
                    "simulator: {entry}.cu wrote past an end of its buffer argument {i} of {} \
                     bytes",
                    b.bytes
                )));
            }
        }
        Ok(())
    }

    fn copy(
        &self,
        src: &SimBuffer,
        from: usize,
        dst: &SimBuffer,
        to: usize,
        bytes: usize,
    ) -> Result<()> {
        let s = src.range(from, bytes, "a copy")?;
        let d = dst.range(to, bytes, "a copy")?;
        if std::ptr::eq(src, dst) {
            dst.bytes_mut().copy_within(s, d.start);
        } else {
            dst.bytes_mut()[d].copy_from_slice(&src.bytes()[s]);
        }
        Ok(())
    }

    fn clear(&self, buffer: &SimBuffer, bytes: usize) -> Result<()> {
        let r = buffer.range(0, bytes, "a clear")?;
        buffer.bytes_mut()[r].fill(0);
        Ok(())
    }

    fn read(&self, regions: &[Region<'_, SimBuffer>]) -> Result<Vec<Vec<u8>>> {
        regions
            .iter()
            .map(|&(b, at, len)| Ok(b.bytes()[b.range(at, len, "a read-back")?].to_vec()))
            .collect()
    }
}

/// A pointer to a parameter's value, as the kernel's by-value argument.
fn param_ptr(p: &mut Param) -> *mut c_void {
    match p {
        Param::Grad(v) => (v as *mut crate::layout::GradParams).cast(),
        Param::Quant(v) => (v as *mut crate::layout::QuantParams).cast(),
        Param::Sample(v) => (v as *mut crate::layout::SampleParams).cast(),
        Param::Bins(v) => (v as *mut crate::layout::BinParams).cast(),
        Param::U32(v) => (v as *mut u32).cast(),
    }
}

/// Builds shard drivers on simulated devices, each with a seed of its own (the factory's
/// seed and the order of creation), for the conformance suite and the determinism tests.
#[derive(Debug)]
pub struct SimFactory {
    schedule: Schedule,
    seed: u64,
    tile_bins: Option<u32>,
    arch: u32,
    created: AtomicU64,
}

impl SimFactory {
    /// Devices scheduled by `schedule` from `seed`, with `tile_bins` as [`SimDevice::new`].
    pub fn new(schedule: Schedule, seed: u64, tile_bins: Option<u32>) -> Self {
        SimFactory {
            schedule,
            seed,
            tile_bins,
            arch: 90,
            created: AtomicU64::new(0),
        }
    }

    /// The next device.
    pub fn open_device(&self) -> SimDevice {
        let n = self.created.fetch_add(1, Ordering::Relaxed);
        // 2 SMs: few blocks, so the kernels' grid-stride loops take several turns
        SimDevice::new(self.schedule, self.seed.wrapping_add(n), 2, self.tile_bins)
            .acting_as(self.arch)
    }

    /// Devices acting as compute capability `arch` (see [`SimDevice::acting_as`]).
    pub fn acting_as(mut self, arch: u32) -> Self {
        self.arch = arch;
        self
    }
}

impl BackendFactory for SimFactory {
    fn create(&self, shard: ShardData) -> Result<Box<dyn HistBackend>> {
        Ok(Box::new(SimBackend::new(self.open_device(), shard)?))
    }
}
