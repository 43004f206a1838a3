//! Sapwood's CUDA backend through cudarc: the whole tree build on NVIDIA GPUs, bit-identical
//! to the CPU backend.
//!
//! The binned shard, labels, weights, margins, gradients, histogram values and the row
//! partition stay on the GPU for the whole training (the same resident design as the WGSL
//! backend). Per round only scalars (gradient maxima, row counts), split decisions and
//! histograms cross to the host; each backend call queues its kernels on the logical
//! device's stream and waits once, when it reads its result back, and a whole level's
//! nodes or splits go in one launch. Histograms are built in shared memory, features tiled
//! to fit it (wider features fall back to global 64-bit atomics), each i64 sum held as two
//! u32 words added with native 32-bit atomics and a carry (a 64-bit shared atomic is a
//! compare-and-swap loop on sm_80/sm_90), after the lanes of a warp that hit one bin have
//! summed their values. The sibling of each built node is the parent minus the node, taken
//! by the core's grower after the histograms are summed over workers.
//!
//! The histograms of a batch of nodes can also leave the GPU only encoded: packed lanes
//! ([`sapwood_core::backend::TreeBackend::build_packed_histograms`]) or the group encoding
//! of the `auto` codec ([`sapwood_core::backend::device::DeviceShard::build_group_encoded_histograms`]),
//! by the kernels `pack.cu` and `groups.cu` (a warp per group of 32 values), byte for byte
//! what sapwood-collective's codecs make on the host.
//! [`sapwood_core::backend::device::pack_values`] and
//! [`sapwood_core::backend::device::encode_groups`] run them on uploaded values. For a
//! reduce-scatter by bin block,
//! [`sapwood_core::backend::TreeBackend::build_encoded_blocks`] gathers each block of a
//! batch's nodes into one buffer (one strided copy a block and batch) and group-encodes it
//! as one message; only the messages and the worker's own block are read back.
//!
//! Kernels are CUDA C++ files in `shaders/cuda/` (named as their WGSL twins), embedded in
//! the binary and compiled with NVRTC at first use — a CUBIN for the GPU's own architecture
//! — then loaded once per GPU. The build needs no CUDA toolkit: cudarc loads `libcuda` and
//! `libnvrtc` at run time (`dynamic-loading`). NVRTC options turn off FMA contraction and
//! keep IEEE division and square root, and every float operation of the bit-exact contract
//! is an explicit round-to-nearest intrinsic.
//!
//! What a shard is apart from its kernels (validation, node row spans, the kernel list and
//! their scalars, split and tree encodings) is `sapwood_core::backend::shard` and
//! `gpu_layout`, shared with the WGSL backend; this crate holds contexts, allocations,
//! launches and read-backs.
//!
//! Use [`CudaFactory`] wherever a [`sapwood_core::backend::BackendFactory`] is expected: each
//! backend it creates is a logical device (a stream of its own), spread round-robin over the
//! GPUs, so several workers may share one GPU. Without the NVIDIA driver (`libcuda.so`
//! absent) or without a GPU, `create` returns [`sapwood_core::Error::Backend`] with a clear
//! message; it never panics.
//!
//! Feature `nccl` adds `nccl::NcclCollective`, which sums histograms between GPUs with NCCL
//! carrying the packed integer lanes of `sapwood_collective::codec`, one rank per GPU (chosen
//! by rank: [`CudaFactory::open_device_for_rank`]); ranks that share a GPU fall back to the
//! host collective ([`topology`]).
//!
//! # Environment and tests
//!
//! - `LD_LIBRARY_PATH` must hold NVRTC 13.0 (`libnvrtc.so.13`) at run time.
//!   `crates/sapwood-cuda/install-nvrtc.sh` pip-installs `nvidia-cuda-nvrtc==13.0.88` under
//!   `target/nvrtc` (idempotent) and prints its library directory:
//!   `export LD_LIBRARY_PATH="$(crates/sapwood-cuda/install-nvrtc.sh | tail -n1):$LD_LIBRARY_PATH"`.
//!   NVRTC 13.0 matches the CUDA 13.0 driver of the target machines; a driver refuses PTX
//!   from a newer NVRTC, which is one reason kernels are loaded as CUBIN.
//! - `SAPWOOD_REQUIRE_NVRTC=1` (at test run time): the NVRTC tests (every kernel compiles
//!   for `compute_80`, `compute_90` and every real architecture NVRTC supports, sm_75 to
//!   sm_121 for 13.0; a broken kernel's error carries the
//!   compiler log; the parameter layouts match) fail when NVRTC cannot be loaded. Without it
//!   they are reported as ignored, never as passed, where NVRTC is missing (the build script
//!   looks for it; `SAPWOOD_NVRTC_LIB_DIR` names a directory to look in besides
//!   `LD_LIBRARY_PATH`).
//! - `crates/sapwood-cuda/install-nvdisasm.sh` pip-installs nvdisasm under
//!   `target/nvdisasm` and prints its directory; with `SAPWOOD_NVDISASM` naming the binary
//!   (and `SAPWOOD_REQUIRE_NVDISASM=1` to fail rather than ignore without it) a test
//!   disassembles the sm_80/sm_90 CUBINs and checks their SASS: no shared-memory
//!   compare-and-swap loop, no unguarded conversion from f64, no runtime division in the bin
//!   lookups. The PTX-level checks (every float-to-integer conversion audited and
//!   NaN-guarded) need NVRTC only.
//! - Tests that need a GPU are ignored unless the build script finds `libcuda.so`;
//!   `SAPWOOD_REQUIRE_CUDA=1` at build time makes them run (and fail) regardless.
#![deny(missing_docs)]

pub mod backend;
pub mod device;
pub mod factory;
pub mod kernels;
pub mod layout;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod plan;
pub mod predict;
#[cfg(feature = "sim")]
pub mod sim;
pub mod tiles;
pub mod topology;

pub use backend::{CudaBackend, CudaDevice};
pub use device::{device_count, driver_present, Gpu};
pub use factory::{CudaFactory, CudaOptions};
pub use kernels::{nvrtc_present, CodecKernel, CudaSource, Kernel, Target};
pub use predict::predict_binned;

/// The helper headers followed by one probe kernel per parameter field, for the layout
/// test (see [`layout`]).
pub fn layout_probe_source() -> String {
    format!(
        "{}\n#line 1 \"layout_probe.cu\"\n{}",
        kernels::header_source(),
        layout::probe_kernels()
    )
}
