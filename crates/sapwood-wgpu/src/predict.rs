//! Prediction on the device: every row routed through each tree by its bins, margins added in
//! tree order exactly as `Model::predict_binned` does.

use sapwood_core::data::BinnedMatrix;
use sapwood_core::error::Result;
use sapwood_core::model::Model;
use sapwood_core::tree::Tree;

use crate::chunks::DeviceBins;
use crate::gpu::{Gpu, WG};
use crate::shaders::Kernel;
use sapwood_core::backend::gpu_layout::encode_tree;

/// Adds one tree's leaf values to the margins of `group` (no read-back).
pub(crate) fn add_tree(
    gpu: &Gpu,
    bins: &DeviceBins,
    tree: &Tree,
    k: usize,
    group: usize,
    margins: &wgpu::Buffer,
) -> Result<()> {
    let (words, values, cats) = encode_tree(tree);
    let tree_buf = gpu.storage("tree", bytemuck::cast_slice(&words));
    let value_buf = gpu.storage("leaf values", bytemuck::cast_slice(&values));
    let cat_buf = gpu.storage("bin sets", bytemuck::cast_slice(&cats));
    let mut enc = gpu.encoder();
    for c in &bins.chunks {
        let bp = gpu.uniform(&bins.params(c, 0, k, group));
        gpu.dispatch(
            &mut enc,
            Kernel::Predict,
            &[&bp, &c.bins, &tree_buf, &value_buf, &cat_buf, margins],
            [gpu.row_groups((c.hi - c.lo) as usize, WG * 16), 1, 1],
        );
    }
    gpu.submit(enc)
}

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
    gpu.check_binding(4 * (n * k) as u64, "the margins of the rows to predict")?;
    let bins = DeviceBins::upload(gpu, binned);
    let start: Vec<f32> = (0..n)
        .flat_map(|_| model.base_margin.iter().copied())
        .collect();
    let margins = gpu.storage("margins", bytemuck::cast_slice(&start));
    let trees = &model.trees[..(rounds.min(model.num_rounds()) * k).min(model.trees.len())];
    for (t, tree) in trees.iter().enumerate() {
        add_tree(gpu, &bins, tree, k, t % k, &margins)?;
    }
    let b = gpu.read(gpu.encoder(), &[(&margins, 0, 4 * (n * k) as u64)])?;
    Ok(bytemuck::pod_collect_to_vec(&b[0][..4 * n * k]))
}
