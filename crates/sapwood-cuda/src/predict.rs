//! Prediction on the GPU: every row routed through each tree by its bins, margins added in
//! tree order exactly as `Model::predict_binned` does.

use sapwood_core::data::BinnedMatrix;
use sapwood_core::error::Result;
use sapwood_core::model::Model;

use crate::backend::{add_tree, upload};
use crate::device::{driver_error, Gpu};
use crate::layout::BinParams;
use sapwood_core::backend::gpu_layout::BinLayout;

/// Margins (`groups` per row) of binned rows using the model's first `rounds` rounds,
/// computed on `gpu`; bit-identical to `Model::predict_binned`.
pub fn predict_binned(
    gpu: &Gpu,
    model: &Model,
    binned: &BinnedMatrix,
    rounds: usize,
) -> Result<Vec<f32>> {
    let k = model.groups.max(1);
    let n = binned.n_rows();
    if n == 0 {
        return Ok(Vec::new());
    }
    let layout = BinLayout::of(binned);
    let bins = upload(gpu, &layout.pack(binned, 0, binned.n_rows()), "bins")?;
    let start: Vec<f32> = (0..n)
        .flat_map(|_| model.base_margin.iter().copied())
        .collect();
    let mut margins = upload(gpu, &start, "margins")?;
    let trees = &model.trees[..(rounds.min(model.num_rounds()) * k).min(model.trees.len())];
    for (t, tree) in trees.iter().enumerate() {
        let bp = BinParams::new(&layout, n as u32, 0, k as u32, (t % k) as u32);
        add_tree(gpu, &bp, &bins, tree, &mut margins)?;
    }
    gpu.stream
        .clone_dtoh(&margins.slice(0..n * k))
        .map_err(|e| driver_error("read-back", e))
}
