//! Each WGSL kernel against its definition through what the backend reads back besides
//! the trait: every row's gradients, histogram values and exact values; histograms with
//! 16-bin tiles and 4 KiB chunks (several shared tiles, features of 17 and 40 bins in
//! global memory); device prediction. The conformance suite (`conformance.rs`) checks the
//! rest through the backend trait.

use std::sync::{Arc, OnceLock};

use sapwood_core::backend::ShardData;
use sapwood_core::Result;
use sapwood_testkit::{conformance, probe};
use sapwood_wgpu::{Gpu, WgpuBackend, WgpuDevice, WgpuFactory, WgpuOptions};

fn options() -> WgpuOptions {
    WgpuOptions {
        tile_bins: Some(16),
        max_chunk_bytes: Some(4096),
        ..WgpuOptions::default()
    }
}

/// The device every backend of this binary shares (16-bin tiles, 4 KiB chunks).
fn small_gpu() -> Arc<Gpu> {
    static G: OnceLock<Arc<Gpu>> = OnceLock::new();
    G.get_or_init(|| {
        WgpuFactory::with_options(options())
            .open_device()
            .expect("a wgpu adapter (run crates/sapwood-wgpu/install-lavapipe.sh)")
    })
    .clone()
}

fn backend(s: ShardData) -> Result<WgpuBackend> {
    WgpuBackend::new(WgpuDevice::new(small_gpu()), s)
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn gradients_read_back_match_the_objective_bit_for_bit() {
    probe::gradients_read_back_match_the_objective_bit_for_bit(
        backend,
        WgpuBackend::read_gradients,
    );
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn quantised_values_read_back_match_the_core_exactly() {
    probe::quantised_values_read_back_match_the_core_exactly(
        backend,
        WgpuBackend::read_hist_values,
        Some(WgpuBackend::read_exact_values),
    );
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn histograms_partitions_and_sums_match_the_cpu_with_16_bin_tiles() {
    let factory = WgpuFactory::with_options(options());
    conformance::histograms_partitions_and_sums_match_the_cpu_with_u8_bins(&factory);
    conformance::histograms_partitions_and_sums_match_the_cpu_with_u16_bins(&factory);
}

#[test]
#[cfg_attr(
    sapwood_no_adapter,
    ignore = "no wgpu adapter: run install-lavapipe.sh"
)]
fn device_prediction_equals_model_prediction() {
    let gpu = WgpuFactory::new()
        .open_device()
        .expect("a wgpu adapter (run crates/sapwood-wgpu/install-lavapipe.sh)");
    probe::device_prediction_equals_model_prediction(&|model, binned, rounds| {
        sapwood_wgpu::predict_binned(&gpu, model, binned, rounds)
    });
}
