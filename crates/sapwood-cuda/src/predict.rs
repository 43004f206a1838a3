//! Prediction on the GPU: every row routed through each tree by its bins, margins added in
//! tree order exactly as `Model::predict_binned` does (the core's device driver does the
//! work; this is its entry point for a CUDA device).

use sapwood_core::data::BinnedMatrix;
use sapwood_core::error::Result;
use sapwood_core::model::Model;

use crate::backend::CudaDevice;
use crate::device::Gpu;

/// Margins (`groups` per row) of binned rows using the model's first `rounds` rounds,
/// computed on `gpu`; bit-identical to `Model::predict_binned`.
pub fn predict_binned(
    gpu: &Gpu,
    model: &Model,
    binned: &BinnedMatrix,
    rounds: usize,
) -> Result<Vec<f32>> {
    let dev = CudaDevice::new(gpu.clone(), None)?;
    sapwood_core::backend::device::predict_binned(&dev, model, binned, rounds)
}
