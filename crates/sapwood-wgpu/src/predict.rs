//! Prediction on the device: every row routed through each tree by its bins, margins added in
//! tree order exactly as `Model::predict_binned` does (the core's device driver does the
//! work; this is its entry point for a wgpu device).

use std::sync::Arc;

use sapwood_core::data::BinnedMatrix;
use sapwood_core::error::Result;
use sapwood_core::model::Model;

use crate::backend::WgpuDevice;
use crate::gpu::Gpu;

/// Margins (`groups` per row) of binned rows using the model's first `rounds` rounds,
/// computed on `gpu`; bit-identical to `Model::predict_binned`.
pub fn predict_binned(
    gpu: &Arc<Gpu>,
    model: &Model,
    binned: &BinnedMatrix,
    rounds: usize,
) -> Result<Vec<f32>> {
    sapwood_core::backend::device::predict_binned(
        &WgpuDevice::new(gpu.clone()),
        model,
        binned,
        rounds,
    )
}
