//! `DeviceShard`: the binned shard, labels, weights, margins, gradients, histogram values and
//! row partition live on the device for the whole training; only scalars, split decisions
//! and histograms cross to the host. Every call queues its kernels and waits once, when it
//! reads its result back; a level's nodes (or splits) go in one launch.

use std::ops::Range;

use super::encoders::{self, check_binding, group_bytes_bound};
use super::predict::{add_tree, DeviceBins};
use super::{
    bytes_f32, bytes_i64, bytes_u32, f32_bytes, u32_bytes, Call, DeviceLimits, Launch, Runs,
    Scalars, ShardDevice,
};
use crate::backend::gpu_layout::{encode_splits, plan_tiles, Tile, TilePlan};
use crate::backend::shard::kernels::{
    maxima_from_bits, GradScalars, Kernel, QuantScalars, SampleScalars,
};
use crate::backend::shard::{self, NodeSpans, ShardShape, Span};
use crate::backend::{HistBackend, NodeSplit, ShardData, TreeBackend, TreeSetup};
use crate::error::{Error, Result};
use crate::hist::HistBin;
use crate::objective::{exp_tables, sigmoid_table};
use crate::tree::{NodeId, Tree};

/// Blocks along y or z of one launch (the grid limit of CUDA and portable WGSL): nodes,
/// splits or feature tiles.
const MAX_BATCH: usize = 65_535;

/// A buffer and the bytes it was made with.
struct Held<B> {
    buffer: B,
    bytes: usize,
}

/// The shard driver of one worker on one device: [`HistBackend`] written once for every
/// device backend.
pub struct DeviceShard<D: ShardDevice> {
    dev: D,
    limits: DeviceLimits,
    shape: ShardShape,
    grad_scalars: GradScalars,
    row_offset: u64,
    bins: DeviceBins<D::Buffer>,
    offsets: D::Buffer,
    labels: D::Buffer,
    weights: D::Buffer,
    margins: D::Buffer,
    grad: D::Buffer,
    gh: D::Buffer,
    exact: Held<D::Buffer>,
    lowbit: bool,
    rows: D::Buffer,
    moved: D::Buffer,
    sigmoid: D::Buffer,
    exp: D::Buffer,
    maxes: D::Buffer,
    count: D::Buffer,
    plan: TilePlan,
    /// The shared-memory tiles, at most [`MAX_BATCH`] a buffer (one launch each).
    shared_tiles: Vec<(D::Buffer, u32)>,
    /// The global-memory tiles, likewise.
    global_tiles: Vec<(D::Buffer, u32)>,
    hist: Option<Held<D::Buffer>>,
    spans: NodeSpans,
    /// the quantisation scalars of the tree started last (its group, for `square_sums`)
    quant: QuantScalars,
}

/// (start, len) words of each span, as the kernels read nodes.
fn span_words(spans: &[Span]) -> Vec<u32> {
    spans.iter().flat_map(|s| [s.start, s.len]).collect()
}

/// (Σg, Σh) pairs of little-endian i64 read back from a device, decoded in place.
fn hist_bins(bytes: &[u8]) -> impl Iterator<Item = HistBin> + '_ {
    let word = |c: &[u8]| i64::from_le_bytes(c.try_into().expect("8 bytes"));
    bytes
        .chunks_exact(16)
        .map(move |c| [word(&c[..8]), word(&c[8..])])
}

/// `0..count` in ranges of at most [`MAX_BATCH`]: the launches along one grid dimension.
pub(crate) fn grid_chunks(count: usize) -> impl Iterator<Item = Range<usize>> {
    (0..count)
        .step_by(MAX_BATCH)
        .map(move |first| first..(first + MAX_BATCH).min(count))
}

/// The smallest range of row positions holding every non-empty span (`None` when all are
/// empty): where a batch of splits moved rows.
pub(crate) fn union_of(spans: &[Span]) -> Option<Range<usize>> {
    let moved = spans.iter().filter(|s| s.len > 0);
    let lo = moved.clone().map(|s| s.start as usize).min()?;
    let hi = moved.map(|s| s.range().end).max()?;
    Some(lo..hi)
}

/// A launch of `kernel` striding over `n` rows, one block along y and z.
fn over_rows<'a, B>(
    n: usize,
    kernel: Kernel,
    scalars: Scalars,
    buffers: &'a [&'a B],
) -> Call<'a, B> {
    Call {
        kernel: Launch::Kernel(kernel),
        scalars,
        buffers,
        items: n,
        y: 1,
        z: 1,
        shared_bytes: 0,
    }
}

/// Tiles in buffers of at most [`MAX_BATCH`] tiles each, with their counts.
fn tile_buffers<D: ShardDevice>(dev: &D, tiles: &[Tile]) -> Result<Vec<(D::Buffer, u32)>> {
    grid_chunks(tiles.len())
        .map(|r| {
            let w: Vec<u32> = tiles[r.clone()].iter().flat_map(|t| t.words()).collect();
            Ok((dev.upload(&u32_bytes(&w), "tiles")?, r.len() as u32))
        })
        .collect()
}

impl<D: ShardDevice> DeviceShard<D> {
    /// Uploads `s` to `dev`.
    pub fn new(dev: D, s: ShardData) -> Result<Self> {
        let limits = dev.limits();
        let shape = shard::validate(&s, limits.shard)?;
        let (n, k) = (shape.n, shape.k);
        let nk = (n * k) as u64;
        for (bytes, what) in [
            (16 * n as u64, "the histogram values of a shard"),
            (8 * nk, "the gradients of a shard"),
            (4 * nk, "the margins of a shard"),
            (4 * n as u64, "the row partition of a shard"),
        ] {
            check_binding(&dev, bytes, what)?;
        }
        let plan = plan_tiles(&s.offsets, limits.tile_bins.max(1));
        let margins = s.starting_margins()?;
        let backend = DeviceShard {
            grad_scalars: GradScalars::of(&shape, &s.objective, s.weights.is_some()),
            row_offset: s.row_offset,
            bins: DeviceBins::upload(&dev, &s.binned)?,
            offsets: dev.upload(&u32_bytes(&s.offsets), "offsets")?,
            labels: dev.upload(&f32_bytes(&s.labels), "labels")?,
            weights: match &s.weights {
                Some(w) => dev.upload(&f32_bytes(w), "weights")?,
                None => dev.zeroed(16, "weights")?,
            },
            margins: dev.upload(&f32_bytes(&margins), "margins")?,
            grad: dev.zeroed(8 * n * k, "gradients")?,
            gh: dev.zeroed(16 * n, "histogram values")?,
            exact: Held {
                buffer: dev.zeroed(16, "exact values")?,
                bytes: 16,
            },
            lowbit: false,
            rows: dev.zeroed(4 * n, "rows")?,
            moved: dev.zeroed(4 * n, "moved rows")?,
            sigmoid: dev.upload(&u32_bytes(sigmoid_table()), "sigmoid table")?,
            exp: dev.upload(&u32_bytes(&exp_tables()), "exp tables")?,
            maxes: dev.zeroed(8 * k, "maxima")?,
            count: dev.zeroed(16, "count")?,
            shared_tiles: tile_buffers(&dev, &plan.shared)?,
            global_tiles: tile_buffers(&dev, &plan.global)?,
            plan,
            hist: None,
            spans: NodeSpans::new(),
            quant: QuantScalars::default(),
            shape,
            limits,
            dev,
        };
        backend.dev.flush()?;
        Ok(backend)
    }

    /// The device this shard lives on (its encoders take uploaded values too).
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// Caps the histogram buffer of one batch at `bytes` (one node a batch at least), so
    /// that a test reaches the batch boundaries on a small shard.
    pub fn set_max_batch_bytes(&mut self, bytes: u64) {
        self.limits.batch_bytes = bytes;
    }

    fn read(&self, buffer: &D::Buffer, bytes: usize) -> Result<Vec<u8>> {
        Ok(self.dev.read(&[(buffer, 0, bytes)])?.remove(0))
    }

    /// Nodes per batch whose histograms (and their encodings, `bytes` a node at most) fit
    /// one binding and the histogram buffer of one batch.
    fn nodes_per_batch(&self, bytes: usize) -> Result<usize> {
        check_binding(&self.dev, bytes as u64, "one node's histogram")?;
        let room = self.limits.binding_bytes.min(self.limits.batch_bytes);
        Ok(((room / bytes.max(1) as u64) as usize).clamp(1, MAX_BATCH))
    }

    /// Queues the building of the histograms of `batch` into the histogram buffer.
    fn queue_histograms(&mut self, batch: &[Span]) -> Result<()> {
        let width = self.shape.total_bins;
        let bytes = 16 * batch.len() * width;
        if self.hist.as_ref().is_none_or(|h| h.bytes < bytes) {
            self.hist = Some(Held {
                buffer: self.dev.zeroed(bytes, "histograms")?,
                bytes,
            });
        }
        let hist = &self.hist.as_ref().expect("allocated above").buffer;
        let nodes_buf = self.dev.upload(&u32_bytes(&span_words(batch)), "nodes")?;
        let max_len = batch.iter().map(|s| s.len as usize).max().unwrap_or(0);
        self.dev.clear(hist, bytes)?;
        if max_len == 0 {
            return Ok(());
        }
        for c in &self.bins.chunks {
            let bp = self.bins.scalars(c, width, self.shape.k, 0);
            for (kernel, tiles, shared_bytes) in [
                (
                    Kernel::HistShared,
                    &self.shared_tiles,
                    self.plan.shared_bytes,
                ),
                (Kernel::HistGlobal, &self.global_tiles, 0),
            ] {
                for (buf, count) in tiles {
                    self.dev.launch(&Call {
                        kernel: Launch::Kernel(kernel),
                        scalars: Scalars::Bins(bp),
                        buffers: &[
                            &c.bins,
                            &self.offsets,
                            &self.gh,
                            &self.rows,
                            &nodes_buf,
                            buf,
                            hist,
                        ],
                        items: max_len,
                        y: *count,
                        z: batch.len() as u32,
                        shared_bytes,
                    })?;
                }
            }
        }
        Ok(())
    }

    fn hist_buffer(&self) -> &D::Buffer {
        &self.hist.as_ref().expect("built before it is read").buffer
    }

    /// Builds the histograms of `nodes` as `build_histograms` does and group-encodes each
    /// node's `2 * total_bins` values on the device (what the `auto` codec sends, before
    /// its choice of varint pairs for an almost empty block): one message per node, the
    /// bytes after the GROUPS tag, exactly as `codec::encode_groups` gives them. Only the
    /// encoded bytes (and 4 bytes per 32 values of group sizes) reach the host.
    pub fn build_group_encoded_histograms(&mut self, nodes: &[NodeId]) -> Result<Vec<Vec<u8>>> {
        let width = self.shape.total_bins;
        let spans = self.spans.of(nodes)?;
        if width == 0 || nodes.is_empty() {
            return Ok(vec![Vec::new(); nodes.len()]);
        }
        let per_batch = self.nodes_per_batch((16 * width).max(group_bytes_bound(2 * width)))?;
        let mut out = Vec::with_capacity(nodes.len());
        for batch in spans.chunks(per_batch) {
            self.queue_histograms(batch)?;
            out.extend(encoders::groups(
                &self.dev,
                self.hist_buffer(),
                2 * width,
                batch.len(),
            )?);
        }
        Ok(out)
    }

    /// Diagnostics: the last computed (g, h) of every row and group, `2 * groups` per row.
    pub fn read_gradients(&self) -> Result<Vec<f32>> {
        Ok(bytes_f32(
            &self.read(&self.grad, 8 * self.shape.n * self.shape.k)?,
        ))
    }

    /// Diagnostics: the (g, h) each row adds to the current tree's histograms.
    pub fn read_hist_values(&self) -> Result<Vec<HistBin>> {
        Ok(hist_bins(&self.read(&self.gh, 16 * self.shape.n)?).collect())
    }

    /// Diagnostics: the exact (g, h) of every row kept for leaf refits in low-bit mode.
    pub fn read_exact_values(&self) -> Result<Vec<HistBin>> {
        if !self.lowbit {
            return self.read_hist_values();
        }
        Ok(hist_bins(&self.read(&self.exact.buffer, 16 * self.shape.n)?).collect())
    }

    /// The sums a per-node kernel (`leaf_sums`, `square_sums`: buffers `input`, the rows,
    /// the nodes' spans and the sums) writes for `nodes`, `bytes` a node, in batches under
    /// the grid's limit.
    fn node_sums(
        &self,
        nodes: &[NodeId],
        kernel: Kernel,
        scalars: Scalars,
        input: &D::Buffer,
        bytes: usize,
    ) -> Result<Vec<u8>> {
        let spans = self.spans.of(nodes)?;
        let mut out = Vec::with_capacity(bytes * nodes.len());
        for batch in spans.chunks(MAX_BATCH) {
            let nodes_buf = self.dev.upload(&u32_bytes(&span_words(batch)), "nodes")?;
            let sums = self.dev.zeroed(bytes * batch.len(), "sums")?;
            let max_len = batch.iter().map(|s| s.len as usize).max().unwrap_or(0);
            self.dev.launch(&Call {
                kernel: Launch::Kernel(kernel),
                scalars,
                buffers: &[input, &self.rows, &nodes_buf, &sums],
                items: max_len,
                y: batch.len() as u32,
                z: 1,
                shared_bytes: 0,
            })?;
            out.extend(self.read(&sums, bytes * batch.len())?);
        }
        Ok(out)
    }

    /// Diagnostics: the rows of `node`, ascending.
    pub fn read_node_rows(&self, node: NodeId) -> Result<Vec<u32>> {
        let span = self.spans.get(node)?;
        let b = self
            .dev
            .read(&[(&self.rows, 4 * span.start as usize, 4 * span.len as usize)])?;
        let mut v = bytes_u32(&b[0]);
        v.sort_unstable();
        Ok(v)
    }
}

impl<D: ShardDevice> TreeBackend for DeviceShard<D> {
    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        shard::check_group(s.group, self.shape.k)?;
        let n = self.shape.n;
        let quant = QuantScalars::of(&self.shape, s, self.row_offset);
        self.quant = quant;
        self.lowbit = quant.lowbit != 0;
        if self.lowbit && self.exact.bytes < 16 * n {
            self.exact = Held {
                buffer: self.dev.zeroed(16 * n, "exact values")?,
                bytes: 16 * n,
            };
        }
        self.dev.launch(&over_rows(
            n,
            Kernel::Quantise,
            Scalars::Quant(quant),
            &[&self.grad, &self.gh, &self.exact.buffer],
        ))?;
        let sample = SampleScalars::of(&self.shape, s, self.row_offset);
        self.dev.clear(&self.count, 4)?;
        self.dev.launch(&over_rows(
            n,
            Kernel::SampleRows,
            Scalars::Sample(sample),
            &[&self.rows, &self.count],
        ))?;
        let count = if sample.keep_all != 0 {
            n as u32
        } else {
            bytes_u32(&self.read(&self.count, 4)?)[0]
        };
        // `moved` mirrors `rows` outside the spans a partition writes, so that one copy of
        // the union of a batch's spans brings the partition back (see apply_splits)
        if count > 0 {
            self.dev
                .copy(&self.rows, 0, &self.moved, 0, 4 * count as usize)?;
        }
        self.spans.reset(count);
        Ok(count as u64)
    }

    fn build_histograms(&mut self, nodes: &[NodeId], out: &mut [HistBin]) -> Result<()> {
        let width = self.shape.total_bins;
        shard::check_hist_len(out.len(), nodes.len(), width)?;
        if width == 0 || nodes.is_empty() {
            return Ok(());
        }
        let spans = self.spans.of(nodes)?;
        let per_batch = self.nodes_per_batch(16 * width)?;
        for (batch, out) in spans
            .chunks(per_batch)
            .zip(out.chunks_mut(per_batch * width))
        {
            self.queue_histograms(batch)?;
            let b = self.read(self.hist_buffer(), 16 * batch.len() * width)?;
            for (o, v) in out.iter_mut().zip(hist_bins(&b)) {
                *o = v;
            }
        }
        Ok(())
    }

    fn build_packed_histograms(
        &mut self,
        nodes: &[NodeId],
        widths: &[u32],
    ) -> Result<Option<Vec<i64>>> {
        if widths.len() != nodes.len() {
            return Err(Error::Backend(format!(
                "{} lane widths for {} nodes: one width per node",
                widths.len(),
                nodes.len()
            )));
        }
        let width = self.shape.total_bins;
        let spans = self.spans.of(nodes)?;
        if width == 0 || nodes.is_empty() {
            return Ok(Some(Vec::new()));
        }
        // the packed words of a batch are never more than its histograms
        let per_batch = self.nodes_per_batch(16 * width)?;
        let mut words = Vec::new();
        for (batch, widths) in spans.chunks(per_batch).zip(widths.chunks(per_batch)) {
            self.queue_histograms(batch)?;
            words.extend(encoders::pack(
                &self.dev,
                self.hist_buffer(),
                2 * width,
                widths,
            )?);
        }
        Ok(Some(words))
    }

    fn build_encoded_blocks(
        &mut self,
        nodes: &[NodeId],
        blocks: &[Range<usize>],
        own: usize,
        hists: &mut [HistBin],
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let width = self.shape.total_bins;
        shard::check_blocks(blocks, own, width)?;
        shard::check_hist_len(hists.len(), nodes.len(), width)?;
        let spans = self.spans.of(nodes)?;
        let mut messages = vec![Vec::new(); blocks.len()];
        if width == 0 || nodes.is_empty() {
            return Ok(Some(messages));
        }
        // a block's nodes are one message, gathered into one buffer and bound whole by the
        // encoder, which addresses values and bytes with 32-bit offsets (the group encoding
        // of a concatenation differs from the concatenation of its parts' encodings)
        let n = nodes.len();
        let binding = self.limits.binding_bytes;
        let too_wide = |b: usize, r: &Range<usize>| {
            let values = 2 * n * r.len();
            // a block sent elsewhere is bound by the encoder; the own one is only copied
            b != own
                && (8 * values as u64 > binding
                    || group_bytes_bound(values) as u64 > binding.min(u32::MAX as u64))
        };
        if blocks.iter().enumerate().any(|(b, r)| too_wide(b, r)) {
            return Ok(None);
        }
        let per_batch = self.nodes_per_batch(16 * width)?;
        // every block gathered node after node, the own block too (read back once)
        let gathered = blocks
            .iter()
            .map(|r| {
                let bytes = 16 * n * r.len();
                (bytes > 0)
                    .then(|| self.dev.zeroed(bytes, "gathered block").map(|b| (b, bytes)))
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        for (k, batch) in spans.chunks(per_batch).enumerate() {
            self.queue_histograms(batch)?;
            let hist = self.hist.as_ref().expect("built by queue_histograms");
            for (r, dst) in blocks.iter().zip(&gathered) {
                let Some((dst, dst_bytes)) = dst else {
                    continue;
                };
                let runs = Runs::of_block(r, width, k * per_batch, batch.len());
                // a device copies whatever it is told: every run must lie inside both
                if !runs.inside(hist.bytes, *dst_bytes) {
                    return Err(Error::Backend(format!(
                        "{}: the runs {runs:?} leave buffers of {} and {dst_bytes} bytes",
                        self.dev.name(),
                        hist.bytes
                    )));
                }
                self.dev.copy_runs(&hist.buffer, dst, runs)?;
            }
        }
        let mine = blocks[own].clone();
        if let Some((src, bytes)) = &gathered[own] {
            let v = self.read(src, *bytes)?;
            let bins: Vec<HistBin> = hist_bins(&v).collect();
            for (i, node) in bins.chunks_exact(mine.len()).enumerate() {
                hists[i * width + mine.start..i * width + mine.end].copy_from_slice(node);
            }
        }
        for (b, (r, src)) in blocks.iter().zip(&gathered).enumerate() {
            match src {
                Some((src, _)) if b != own => {
                    messages[b] = encoders::groups(&self.dev, src, 2 * n * r.len(), 1)?.remove(0);
                }
                _ => {}
            }
        }
        Ok(Some(messages))
    }

    fn apply_splits(&mut self, splits: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        let spans = self.spans.for_splits(splits, self.shape.nf)?;
        let mut moved = Vec::with_capacity(splits.len());
        for (batch, spans) in splits.chunks(MAX_BATCH).zip(spans.chunks(MAX_BATCH)) {
            let (w, cats) = encode_splits(batch, spans);
            let split_buf = self.dev.upload(&u32_bytes(&w), "splits")?;
            let cat_buf = self.dev.upload(&u32_bytes(&cats), "bin sets")?;
            let counters = self.dev.zeroed(8 * batch.len(), "split counts")?;
            let max_len = spans.iter().map(|s| s.len as usize).max().unwrap_or(0);
            for c in &self.bins.chunks {
                self.dev.launch(&Call {
                    kernel: Launch::Kernel(Kernel::Partition),
                    scalars: Scalars::Bins(self.bins.scalars(
                        c,
                        self.shape.total_bins,
                        self.shape.k,
                        0,
                    )),
                    buffers: &[
                        &c.bins,
                        &self.rows,
                        &self.moved,
                        &split_buf,
                        &cat_buf,
                        &counters,
                    ],
                    items: max_len,
                    y: batch.len() as u32,
                    z: 1,
                    shared_bytes: 0,
                })?;
            }
            // one copy for the batch: outside the split spans `moved` equals `rows` (set at
            // start_tree, kept by copying back every span a partition writes)
            if let Some(r) = union_of(spans) {
                self.dev.copy(
                    &self.moved,
                    4 * r.start,
                    &self.rows,
                    4 * r.start,
                    4 * r.len(),
                )?;
            }
            let c = bytes_u32(&self.read(&counters, 8 * batch.len())?);
            moved.extend(c.chunks_exact(2).map(|c| [c[0], c[1]]));
        }
        self.spans.record(splits, &spans, &moved)
    }

    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        let values = if self.lowbit {
            &self.exact.buffer
        } else {
            &self.gh
        };
        let sums = self.node_sums(nodes, Kernel::LeafSums, Scalars::None, values, 16)?;
        Ok(hist_bins(&sums).collect())
    }

    fn square_sums(&mut self, nodes: &[NodeId], shift: i32) -> Result<Vec<i64>> {
        // quantise's block at the squares' shift (CUDA takes it as the scale 2^shift)
        let scalars = Scalars::Quant(QuantScalars {
            g_shift: shift,
            ..self.quant
        });
        let sums = self.node_sums(nodes, Kernel::SquareSums, scalars, &self.grad, 8)?;
        Ok(bytes_i64(&sums))
    }
}

impl<D: ShardDevice> HistBackend for DeviceShard<D> {
    fn num_rows(&self) -> usize {
        self.shape.n
    }

    fn name(&self) -> String {
        self.dev.name()
    }

    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        let k = self.shape.k;
        self.dev.clear(&self.maxes, 8 * k)?;
        self.dev.launch(&Call {
            kernel: Launch::Kernel(Kernel::Gradients),
            scalars: Scalars::Grad(self.grad_scalars),
            buffers: &[
                &self.labels,
                &self.weights,
                &self.margins,
                &self.grad,
                &self.maxes,
                &self.sigmoid,
                &self.exp,
            ],
            items: self.shape.n,
            y: 1,
            z: 1,
            shared_bytes: 0,
        })?;
        Ok(maxima_from_bits(&bytes_u32(
            &self.read(&self.maxes, 8 * k)?,
        )))
    }

    fn set_gradients(&mut self, grad: &[[f32; 2]]) -> Result<()> {
        shard::check_gradients(grad.len(), self.shape.n * self.shape.k)?;
        let flat: Vec<f32> = grad.iter().flatten().copied().collect();
        if flat.is_empty() {
            return Ok(());
        }
        self.dev
            .write(&self.grad, &f32_bytes(&flat), "host gradients")
    }

    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()> {
        shard::check_group(group, self.shape.k)?;
        add_tree(
            &self.dev,
            &self.bins,
            tree,
            self.shape.k,
            group,
            &self.margins,
        )
    }

    fn margins(&self) -> Result<Vec<f32>> {
        Ok(bytes_f32(
            &self.read(&self.margins, 4 * self.shape.n * self.shape.k)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_chunks_keep_every_launch_within_the_y_and_z_limit() {
        assert_eq!(grid_chunks(0).count(), 0);
        assert_eq!(grid_chunks(5).collect::<Vec<_>>(), vec![0..5]);
        assert_eq!(grid_chunks(65_535).collect::<Vec<_>>(), vec![0..65_535]);
        assert_eq!(
            grid_chunks(65_536).collect::<Vec<_>>(),
            vec![0..65_535, 65_535..65_536]
        );
        let many: Vec<_> = grid_chunks(200_000).collect();
        assert!(many.iter().all(|r| r.len() <= MAX_BATCH && !r.is_empty()));
        assert_eq!(many.first().unwrap().start, 0);
        assert_eq!(many.last().unwrap().end, 200_000);
        assert!(many.windows(2).all(|w| w[0].end == w[1].start));
    }

    #[test]
    fn the_union_of_spans_covers_every_non_empty_span() {
        let span = |start, len| Span { start, len };
        assert_eq!(union_of(&[]), None);
        assert_eq!(union_of(&[span(4, 0)]), None);
        assert_eq!(union_of(&[span(10, 5), span(0, 3)]), Some(0..15));
        // empty spans do not widen it
        assert_eq!(
            union_of(&[span(100, 0), span(10, 5), span(2, 0)]),
            Some(10..15)
        );
    }
}
