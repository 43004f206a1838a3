//! The binned rows on a device, and adding trees to margins there: what training (the
//! driver's `update_margins`) and prediction share.

use super::encoders::check_binding;
use super::{bytes_f32, f32_bytes, u32_bytes, BinScalars, Call, Launch, Scalars, ShardDevice};
use crate::backend::gpu_layout::{encode_tree, BinLayout};
use crate::backend::shard::kernels::Kernel;
use crate::data::BinnedMatrix;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::tree::Tree;

/// Trees added to margins between two flushes of the device's queue in prediction.
const TREES_PER_FLUSH: usize = 64;

/// Rows `lo..hi` of the bins, bound at once.
pub(crate) struct Chunk<B> {
    pub lo: u32,
    pub hi: u32,
    pub bins: B,
}

/// The binned rows on a device, in chunks that each fit the device's chunk size: kernels
/// that read bins run once a chunk and skip rows outside it.
pub(crate) struct DeviceBins<B> {
    pub layout: BinLayout,
    pub n_features: usize,
    pub chunks: Vec<Chunk<B>>,
}

impl<B> DeviceBins<B> {
    /// Uploads `binned` in chunks of at most the device's chunk size.
    pub(crate) fn upload<D: ShardDevice<Buffer = B>>(
        dev: &D,
        binned: &BinnedMatrix,
    ) -> Result<Self> {
        let layout = BinLayout::of(binned);
        let n = binned.n_rows();
        let row_bytes = (layout.row_words.max(1) * 4) as u64;
        let rows_per_chunk = (dev.limits().chunk_bytes / row_bytes).clamp(1, n.max(1) as u64);
        let mut chunks = Vec::new();
        let mut lo = 0;
        while lo < n {
            let hi = (lo + rows_per_chunk as usize).min(n);
            let packed = layout.pack(binned, lo, hi);
            chunks.push(Chunk {
                lo: lo as u32,
                hi: hi as u32,
                bins: dev.upload(&u32_bytes(&packed), "bins")?,
            });
            lo = hi;
        }
        Ok(DeviceBins {
            layout,
            n_features: binned.n_features(),
            chunks,
        })
    }

    /// The scalars of a kernel reading chunk `c`.
    pub(crate) fn scalars(
        &self,
        c: &Chunk<B>,
        total_bins: usize,
        k: usize,
        group: usize,
    ) -> BinScalars {
        BinScalars {
            n_features: self.n_features as u32,
            row_words: self.layout.row_words as u32,
            bin_bits: self.layout.bits,
            total_bins: total_bins as u32,
            chunk_lo: c.lo,
            chunk_hi: c.hi,
            k: k as u32,
            group: group as u32,
        }
    }
}

/// Queues the addition of one tree's leaf values to the margins of `group` of `k`.
pub(crate) fn add_tree<D: ShardDevice>(
    dev: &D,
    bins: &DeviceBins<D::Buffer>,
    tree: &Tree,
    k: usize,
    group: usize,
    margins: &D::Buffer,
) -> Result<()> {
    if bins.chunks.is_empty() {
        return Ok(());
    }
    let (words, values, cats) = encode_tree(tree);
    let tree_buf = dev.upload(&u32_bytes(&words), "tree")?;
    let value_buf = dev.upload(&f32_bytes(&values), "leaf values")?;
    let cat_buf = dev.upload(&u32_bytes(&cats), "bin sets")?;
    for c in &bins.chunks {
        dev.launch(&Call {
            kernel: Launch::Kernel(Kernel::Predict),
            scalars: Scalars::Tree {
                bins: bins.scalars(c, 0, k, group),
                nodes: tree.nodes.len() as u32,
            },
            buffers: &[&c.bins, &tree_buf, &value_buf, &cat_buf, margins],
            items: (c.hi - c.lo) as usize,
            y: 1,
            z: 1,
            shared_bytes: 0,
        })?;
    }
    Ok(())
}

/// Margins (`groups` per row) of binned rows using the model's first `rounds` rounds,
/// computed on `dev`; bit-identical to `Model::predict_binned`.
pub fn predict_binned<D: ShardDevice>(
    dev: &D,
    model: &Model,
    binned: &BinnedMatrix,
    rounds: usize,
) -> Result<Vec<f32>> {
    let k = model.groups.max(1);
    let n = binned.n_rows();
    if n == 0 {
        return Ok(Vec::new());
    }
    // the kernels address rows with 32-bit indices: a grid-stride loop would wrap past them
    let max_rows = dev.limits().shard.max_rows;
    if n > max_rows {
        return Err(Error::Backend(format!(
            "{} cannot predict {n} rows at once (at most {max_rows}, its 32-bit row \
             indices): predict them in parts",
            dev.name()
        )));
    }
    check_binding(
        dev,
        4 * (n * k) as u64,
        "the margins of the rows to predict",
    )?;
    let bins = DeviceBins::upload(dev, binned)?;
    let start: Vec<f32> = (0..n)
        .flat_map(|_| model.base_margin.iter().copied())
        .collect();
    let margins = dev.upload(&f32_bytes(&start), "margins")?;
    let trees = &model.trees[..(rounds.min(model.num_rounds()) * k).min(model.trees.len())];
    for (t, tree) in trees.iter().enumerate() {
        add_tree(dev, &bins, tree, k, t % k, &margins)?;
        // a device that records work until it reads (wgpu) would otherwise hold every
        // tree's buffers and run them all in one long submission
        if (t + 1) % TREES_PER_FLUSH == 0 {
            dev.flush()?;
        }
    }
    Ok(bytes_f32(&dev.read(&[(&margins, 0, 4 * n * k)])?.remove(0)))
}
