//! The WGSL backend through the conformance suite every backend runs, against the CPU
//! reference bit for bit: `factory` with the adapter's own limits, `small` with 8-bin tiles
//! and 1 KiB chunks of the binned shard, so that several tiles, the global-memory fallback
//! and chunked bins all run on small data.
//!
//! Compiled `#[ignore]` where the build script finds no Vulkan driver (reported as ignored,
//! never as passed); `SAPWOOD_REQUIRE_ADAPTER=1` makes them run regardless.

use sapwood_wgpu::{WgpuFactory, WgpuOptions};

fn tiny_tiles_and_chunks() -> WgpuFactory {
    WgpuFactory::with_options(WgpuOptions {
        tile_bins: Some(8),
        max_chunk_bytes: Some(1024),
        ..WgpuOptions::default()
    })
}

sapwood_testkit::conformance!(
    factory: WgpuFactory::new(),
    small: tiny_tiles_and_chunks(),
    #[cfg_attr(sapwood_no_adapter, ignore = "no wgpu adapter: run install-lavapipe.sh")]
);
