//! Sapwood's WGSL backend through wgpu: the whole tree build on any GPU (Vulkan, Metal,
//! DX12), bit-identical to the CPU backend.
//!
//! The binned shard, labels, weights, margins, gradients, histogram values and the row
//! partition stay on the device for the whole training. Per round only scalars (gradient
//! maxima, row counts), split decisions and histograms cross to the host. Every kernel is a
//! WGSL file in `shaders/wgsl/` using portable 32-bit atomics only: 64-bit integer sums are
//! (lo, hi) pairs of u32 with a carry into the high word, so any adapter gives the same
//! integers as the CPU, in any order.
//!
//! What a shard is apart from its kernels (validation, node row spans, the kernel list and
//! their scalars, split and tree encodings) is `sapwood_core::backend::shard` and
//! `gpu_layout`, shared with the CUDA backend; this crate holds the device, buffers,
//! dispatches and read-backs.
//!
//! The histograms of a batch of nodes can also leave the device only encoded: packed
//! lanes ([`sapwood_core::backend::TreeBackend::build_packed_histograms`]) or the group
//! encoding of the `auto` codec
//! ([`sapwood_core::backend::device::DeviceShard::build_group_encoded_histograms`]), by the
//! kernels `pack.wgsl` and `groups.wgsl`, byte for byte what sapwood-collective's codecs
//! make on the host. [`sapwood_core::backend::device::pack_values`] and
//! [`sapwood_core::backend::device::encode_groups`] run them on uploaded values. For a reduce-scatter by bin block,
//! [`sapwood_core::backend::TreeBackend::build_encoded_blocks`] gathers each block of a
//! batch's nodes into one buffer (buffer-to-buffer copies) and group-encodes it as one
//! message; only the messages and the worker's own block are read back.
//!
//! Use [`WgpuFactory`] wherever a [`sapwood_core::backend::BackendFactory`] is expected. Each
//! backend it creates is a new logical device, spread round-robin over the adapters found,
//! so several workers may share one adapter.
//!
//! # Limits
//!
//! The device is opened with the adapter's real limits. The binned shard is bound in chunks
//! that fit the storage binding limit; per-row buffers (16 bytes of histogram values per
//! row, 8 bytes of gradients per row and group) must each fit one binding, which a shard too
//! large for the adapter reports as an error (use more workers). Shared-memory histogram
//! tiles are sized from the adapter's workgroup storage; wider features fall back to global
//! atomics. No optional feature (subgroups, 64-bit atomics) is required or used yet.
//!
//! # Tests and adapters
//!
//! Tests that need an adapter are compiled `#[ignore]` when the build script finds no
//! Vulkan driver (no ICD manifest in the standard places or `VK_ICD_FILENAMES` /
//! `VK_DRIVER_FILES`), so they show as ignored, never as passed. On Linux without a GPU,
//! `crates/sapwood-wgpu/install-lavapipe.sh` installs Mesa lavapipe (software Vulkan).
//! Setting `SAPWOOD_REQUIRE_ADAPTER=1` at build time makes those tests run regardless, so a
//! missing adapter fails them (for CI, which installs lavapipe first). Setting
//! `XDG_RUNTIME_DIR` silences lavapipe's warnings.
#![deny(missing_docs)]

mod adapters;
mod backend;
mod factory;
mod gpu;
mod layout;
mod predict;
mod shaders;

pub use backend::{WgpuBackend, WgpuDevice};
pub use factory::{WgpuFactory, WgpuOptions};
pub use gpu::Gpu;
pub use predict::predict_binned;
pub use sapwood_core::backend::gpu_layout::{plan_tiles, Tile};
