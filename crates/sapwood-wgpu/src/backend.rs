//! `WgpuBackend`: the binned shard, labels, weights, margins, gradients, histogram values and
//! row partition live on the device for the whole training; only scalars, split decisions and
//! histograms cross to the host.

use std::ops::Range;
use std::sync::Arc;

use sapwood_core::backend::gpu_layout::{encode_splits, plan_tiles, Tile};
use sapwood_core::backend::shard::kernels::{
    maxima_from_bits, GradScalars, QuantScalars, SampleScalars,
};
use sapwood_core::backend::shard::{self, NodeSpans, ShardLimits, ShardShape, Span};
use sapwood_core::backend::{HistBackend, NodeSplit, ShardData, TreeSetup};
use sapwood_core::error::{Error, Result};
use sapwood_core::hist::HistBin;
use sapwood_core::objective::{exp_tables, sigmoid_table};
use sapwood_core::tree::{NodeId, Tree};

use crate::chunks::{Chunk, DeviceBins};
use crate::encode::{self, Messages};
use crate::gpu::{Gpu, ROWS_PER_GROUP, WG};
use crate::layout::{BinParams, GradParams, QuantParams, SampleParams};
use crate::predict::add_tree;
use crate::shaders::Kernel;

/// Classes the softmax kernel sums in one u32 (Σ of k values below 2^24 each).
const MAX_CLASSES: usize = 255;
/// Nodes or splits per dispatch along y or z (the portable workgroup-count limit).
const MAX_BATCH: usize = 65_535;

/// The wgpu backend of one worker.
pub struct WgpuBackend {
    gpu: Arc<Gpu>,
    shape: ShardShape,
    grad_scalars: GradScalars,
    row_offset: u64,
    bins: DeviceBins,
    offsets: wgpu::Buffer,
    labels: wgpu::Buffer,
    weights: wgpu::Buffer,
    margins: wgpu::Buffer,
    grad: wgpu::Buffer,
    gh: wgpu::Buffer,
    exact: wgpu::Buffer,
    lowbit: bool,
    rows: wgpu::Buffer,
    moved: wgpu::Buffer,
    sigmoid: wgpu::Buffer,
    exp: wgpu::Buffer,
    maxes: wgpu::Buffer,
    count: wgpu::Buffer,
    shared_tiles: (wgpu::Buffer, u32),
    global_tiles: (wgpu::Buffer, u32),
    hist: Option<wgpu::Buffer>,
    spans: NodeSpans,
}

fn words(v: &[u32]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// (Σg, Σh) pairs of little-endian i64 read back from the device.
fn hist_bins(bytes: &[u8]) -> impl Iterator<Item = HistBin> + '_ {
    let word = |c: &[u8]| i64::from_le_bytes(c.try_into().expect("8 bytes"));
    bytes
        .chunks_exact(16)
        .map(move |c| [word(&c[..8]), word(&c[8..])])
}

/// (start, len) words of each span, as the kernels read nodes.
fn span_words(spans: &[Span]) -> Vec<u32> {
    spans.iter().flat_map(|s| [s.start, s.len]).collect()
}

impl WgpuBackend {
    /// Uploads `s` to `gpu`.
    pub fn new(gpu: Arc<Gpu>, s: ShardData) -> Result<Self> {
        let limits = ShardLimits {
            // the partition kernels address rows as 4-byte words below u32::MAX
            max_rows: (u32::MAX / 4) as usize,
            max_groups: MAX_CLASSES,
        };
        let shape = shard::validate(&s, limits)?;
        let (n, k) = (shape.n, shape.k);
        let nk = (n * k) as u64;
        for (bytes, what) in [
            (16 * n as u64, "the histogram values of a shard"),
            (8 * nk, "the gradients of a shard"),
            (4 * nk, "the margins of a shard"),
            (4 * n as u64, "the row partition of a shard"),
        ] {
            gpu.check_binding(bytes, what)?;
        }
        let bins = DeviceBins::upload(&gpu, &s.binned);
        let plan = plan_tiles(&s.offsets, gpu.tile_bins);
        let tiles = |t: &[Tile]| -> (wgpu::Buffer, u32) {
            let w: Vec<u32> = t.iter().flat_map(|t| t.words()).collect();
            (gpu.storage("tiles", words(&w)), t.len() as u32)
        };
        let margins: Vec<f32> = s.starting_margins()?;
        let backend = WgpuBackend {
            shape,
            grad_scalars: GradScalars::of(&shape, &s.objective, s.weights.is_some()),
            row_offset: s.row_offset,
            bins,
            offsets: gpu.storage("offsets", words(&s.offsets)),
            labels: gpu.storage("labels", bytemuck::cast_slice(&s.labels)),
            weights: match &s.weights {
                Some(w) => gpu.storage("weights", bytemuck::cast_slice(w)),
                None => gpu.zeroed("weights", 16),
            },
            margins: gpu.storage("margins", bytemuck::cast_slice(&margins)),
            grad: gpu.zeroed("gradients", 8 * nk),
            gh: gpu.zeroed("histogram values", 16 * n as u64),
            exact: gpu.zeroed("exact values", 16),
            lowbit: false,
            rows: gpu.zeroed("rows", 4 * n as u64),
            moved: gpu.zeroed("moved rows", 4 * n as u64),
            sigmoid: gpu.storage("sigmoid table", words(sigmoid_table())),
            exp: gpu.storage("exp tables", words(&exp_tables())),
            maxes: gpu.zeroed("maxima", 8 * k as u64),
            count: gpu.zeroed("count", 16),
            shared_tiles: tiles(&plan.shared),
            global_tiles: tiles(&plan.global),
            hist: None,
            spans: NodeSpans::new(),
            gpu,
        };
        backend.gpu.check()?;
        Ok(backend)
    }

    /// The adapter this backend runs on.
    pub fn device_name(&self) -> &str {
        self.gpu.name()
    }

    fn bin_params(&self, c: &Chunk, group: usize) -> BinParams {
        self.bins
            .params(c, self.shape.total_bins, self.shape.k, group)
    }

    /// A histogram buffer of at least `bytes`, reused between calls.
    fn hist_buffer(&mut self, bytes: u64) -> &wgpu::Buffer {
        if self.hist.as_ref().is_none_or(|h| h.size() < bytes) {
            self.hist = Some(self.gpu.zeroed("histograms", bytes));
        }
        self.hist.as_ref().expect("just made")
    }

    fn read_all(&self, buffer: &wgpu::Buffer, bytes: usize) -> Result<Vec<u8>> {
        let g = &self.gpu;
        Ok(g.read(g.encoder(), &[(buffer, 0, bytes as u64)])?.remove(0))
    }

    /// Nodes per batch whose histograms (and their encodings, `bytes` a node at most) fit
    /// one storage binding and one dispatch.
    fn nodes_per_batch(&self, bytes: u64) -> Result<usize> {
        self.gpu.check_binding(bytes, "one node's histogram")?;
        Ok(((self.gpu.max_binding() / bytes) as usize).clamp(1, MAX_BATCH))
    }

    /// Records the building of the histograms of `batch` into the histogram buffer; returns
    /// the encoder, not yet submitted.
    fn record_histograms(&mut self, batch: &[Span]) -> wgpu::CommandEncoder {
        let width = self.shape.total_bins;
        let bytes = 16 * (batch.len() * width) as u64;
        self.hist_buffer(bytes);
        let g = &self.gpu;
        let hist = self.hist.as_ref().expect("made above");
        let nodes_buf = g.storage("nodes", words(&span_words(batch)));
        let max_len = batch.iter().map(|s| s.len as usize).max().unwrap_or(0);
        let x = g.row_groups(max_len, ROWS_PER_GROUP);
        let mut enc = g.encoder();
        enc.clear_buffer(hist, 0, Some(bytes));
        for c in &self.bins.chunks {
            let bp = g.uniform(&self.bin_params(c, 0));
            for (kernel, (tiles, count)) in [
                (Kernel::HistShared, &self.shared_tiles),
                (Kernel::HistGlobal, &self.global_tiles),
            ] {
                g.dispatch(
                    &mut enc,
                    kernel,
                    &[
                        &bp,
                        &c.bins,
                        &self.offsets,
                        &self.gh,
                        &self.rows,
                        &nodes_buf,
                        tiles,
                        hist,
                    ],
                    [x, *count, batch.len() as u32],
                );
            }
        }
        enc
    }

    /// The first `count` histograms of the histogram buffer, as messages of 2 · total bins
    /// values.
    fn hist_messages(&self, count: usize) -> Messages<'_> {
        Messages {
            src: self.hist.as_ref().expect("built before it is read"),
            len: 2 * self.shape.total_bins,
            count,
        }
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
        let encoded = encode::group_bytes_bound(2 * width);
        let per_batch = self.nodes_per_batch((16 * width as u64).max(encoded))?;
        let mut out = Vec::with_capacity(nodes.len());
        for batch in spans.chunks(per_batch) {
            let enc = self.record_histograms(batch);
            out.extend(encode::groups(
                &self.gpu,
                enc,
                self.hist_messages(batch.len()),
            )?);
        }
        Ok(out)
    }

    /// The logical device this backend runs on (its encoders take uploaded values too).
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Diagnostics: the last computed (g, h) of every row and group, `2 * groups` per row.
    pub fn read_gradients(&self) -> Result<Vec<f32>> {
        let b = self.read_all(&self.grad, 8 * self.shape.n * self.shape.k)?;
        Ok(bytemuck::pod_collect_to_vec(&b))
    }

    /// Diagnostics: the (g, h) each row adds to the current tree's histograms.
    pub fn read_hist_values(&self) -> Result<Vec<HistBin>> {
        let b = self.read_all(&self.gh, 16 * self.shape.n)?;
        Ok(hist_bins(&b).collect())
    }

    /// Diagnostics: the exact (g, h) of every row kept for leaf refits in low-bit mode.
    pub fn read_exact_values(&self) -> Result<Vec<HistBin>> {
        if !self.lowbit {
            return self.read_hist_values();
        }
        let b = self.read_all(&self.exact, 16 * self.shape.n)?;
        Ok(hist_bins(&b).collect())
    }

    /// Diagnostics: the rows of `node`, ascending.
    pub fn read_node_rows(&self, node: NodeId) -> Result<Vec<u32>> {
        let span = self.spans.get(node)?;
        let g = &self.gpu;
        let b = g.read(
            g.encoder(),
            &[(&self.rows, 4 * span.start as u64, 4 * span.len as u64)],
        )?;
        let mut v: Vec<u32> = bytemuck::pod_collect_to_vec(&b[0]);
        v.sort_unstable();
        Ok(v)
    }
}

impl HistBackend for WgpuBackend {
    fn num_rows(&self) -> usize {
        self.shape.n
    }

    fn name(&self) -> String {
        format!("wgpu: {}", self.device_name())
    }

    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        let g = &self.gpu;
        let mut enc = g.encoder();
        enc.clear_buffer(&self.maxes, 0, None);
        let p = g.uniform(&GradParams::from(self.grad_scalars));
        g.dispatch(
            &mut enc,
            Kernel::Gradients,
            &[
                &p,
                &self.labels,
                &self.weights,
                &self.margins,
                &self.grad,
                &self.maxes,
                &self.sigmoid,
                &self.exp,
            ],
            [g.row_groups(self.shape.n, WG * 16), 1, 1],
        );
        let bytes = g.read(enc, &[(&self.maxes, 0, 8 * self.shape.k as u64)])?;
        Ok(maxima_from_bits(bytemuck::cast_slice(&bytes[0])))
    }

    fn set_gradients(&mut self, grad: &[[f32; 2]]) -> Result<()> {
        shard::check_gradients(grad.len(), self.shape.n * self.shape.k)?;
        self.gpu.write(&self.grad, bytemuck::cast_slice(grad))
    }

    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        shard::check_group(s.group, self.shape.k)?;
        let n = self.shape.n;
        let quant = QuantScalars::of(&self.shape, s, self.row_offset);
        self.lowbit = quant.lowbit != 0;
        if self.lowbit && self.exact.size() < 16 * n as u64 {
            self.exact = self.gpu.zeroed("exact values", 16 * n as u64);
        }
        let g = &self.gpu;
        let mut enc = g.encoder();
        let q = g.uniform(&QuantParams::from(quant));
        let groups = g.row_groups(n, WG * 16);
        g.dispatch(
            &mut enc,
            Kernel::Quantise,
            &[&q, &self.grad, &self.gh, &self.exact],
            [groups, 1, 1],
        );
        let sample = SampleScalars::of(&self.shape, s, self.row_offset);
        enc.clear_buffer(&self.count, 0, None);
        let sp = g.uniform(&SampleParams::from(sample));
        g.dispatch(
            &mut enc,
            Kernel::SampleRows,
            &[&sp, &self.rows, &self.count],
            [groups, 1, 1],
        );
        let count = if sample.keep_all != 0 {
            g.submit(enc)?;
            n as u32
        } else {
            let b = g.read(enc, &[(&self.count, 0, 4)])?;
            u32::from_le_bytes([b[0][0], b[0][1], b[0][2], b[0][3]])
        };
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
        let per_batch = self.nodes_per_batch(16 * width as u64)?;
        for (batch, out) in spans
            .chunks(per_batch)
            .zip(out.chunks_mut(per_batch * width))
        {
            let enc = self.record_histograms(batch);
            let m = self.hist_messages(batch.len());
            let b = self
                .gpu
                .read(enc, &[(m.src, 0, 16 * (batch.len() * width) as u64)])?;
            for (o, v) in out.iter_mut().zip(hist_bins(&b[0])) {
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
        let per_batch = self.nodes_per_batch(16 * width as u64)?;
        let mut words = Vec::new();
        for (batch, widths) in spans.chunks(per_batch).zip(widths.chunks(per_batch)) {
            let enc = self.record_histograms(batch);
            words.extend(encode::pack(
                &self.gpu,
                enc,
                self.hist_messages(batch.len()),
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
        // a block's nodes are one message: gathered into one buffer, bound whole by the
        // encoder, which writes at most its worst case (the group encoding of a
        // concatenation differs from the concatenation of its parts' encodings)
        let n = nodes.len() as u64;
        let binding = self.gpu.max_binding();
        let too_wide = |b: usize, r: &Range<usize>| {
            let values = 2 * nodes.len() * r.len();
            b != own && (8 * values as u64 > binding || encode::group_bytes_bound(values) > binding)
        };
        if blocks.iter().enumerate().any(|(b, r)| too_wide(b, r)) {
            return Ok(None);
        }
        let per_batch = self.nodes_per_batch(16 * width as u64)?;
        let gathered: Vec<Option<wgpu::Buffer>> = blocks
            .iter()
            .enumerate()
            .map(|(b, r)| {
                (b != own && !r.is_empty())
                    .then(|| self.gpu.zeroed("gathered block", 16 * n * r.len() as u64))
            })
            .collect();
        let mine = blocks[own].clone();
        for (k, batch) in spans.chunks(per_batch).enumerate() {
            let first = k * per_batch;
            let mut enc = self.record_histograms(batch);
            let hist = self.hist.as_ref().expect("built by record_histograms");
            let at = |i: usize, bin: usize| 16 * (i * width + bin) as u64;
            for (r, dst) in blocks.iter().zip(&gathered) {
                let Some(dst) = dst else { continue };
                let run = 16 * r.len() as u64;
                for i in 0..batch.len() {
                    let to = (first + i) as u64 * run;
                    enc.copy_buffer_to_buffer(hist, at(i, r.start), dst, to, run);
                }
            }
            if mine.is_empty() {
                self.gpu.submit(enc)?;
                continue;
            }
            let regions: Vec<_> = (0..batch.len())
                .map(|i| (hist, at(i, mine.start), 16 * mine.len() as u64))
                .collect();
            for (i, bytes) in self.gpu.read(enc, &regions)?.iter().enumerate() {
                let node = (first + i) * width;
                let out = &mut hists[node + mine.start..node + mine.end];
                for (o, v) in out.iter_mut().zip(hist_bins(bytes)) {
                    *o = v;
                }
            }
        }
        for ((r, src), msg) in blocks.iter().zip(&gathered).zip(&mut messages) {
            if let Some(src) = src {
                let m = Messages {
                    src,
                    len: 2 * nodes.len() * r.len(),
                    count: 1,
                };
                *msg = encode::groups(&self.gpu, self.gpu.encoder(), m)?.remove(0);
            }
        }
        Ok(Some(messages))
    }

    fn apply_splits(&mut self, splits: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        let spans = self.spans.for_splits(splits, self.shape.nf)?;
        let mut moved = Vec::with_capacity(splits.len());
        for (batch, spans) in splits.chunks(MAX_BATCH).zip(spans.chunks(MAX_BATCH)) {
            let (w, cats) = encode_splits(batch, spans);
            let g = &self.gpu;
            let split_buf = g.storage("splits", words(&w));
            let cat_buf = g.storage("bin sets", words(&cats));
            let counters = g.zeroed("split counts", 8 * batch.len() as u64);
            let max_len = spans.iter().map(|s| s.len as usize).max().unwrap_or(0);
            let x = g.row_groups(max_len, ROWS_PER_GROUP);
            let mut enc = g.encoder();
            for c in &self.bins.chunks {
                let bp = g.uniform(&self.bin_params(c, 0));
                g.dispatch(
                    &mut enc,
                    Kernel::Partition,
                    &[
                        &bp,
                        &c.bins,
                        &self.rows,
                        &self.moved,
                        &split_buf,
                        &cat_buf,
                        &counters,
                    ],
                    [x, batch.len() as u32, 1],
                );
            }
            for span in spans.iter().filter(|s| s.len > 0) {
                let at = 4 * span.start as u64;
                enc.copy_buffer_to_buffer(&self.moved, at, &self.rows, at, 4 * span.len as u64);
            }
            let b = g.read(enc, &[(&counters, 0, 8 * batch.len() as u64)])?;
            let c: &[u32] = bytemuck::cast_slice(&b[0]);
            moved.extend(c.chunks_exact(2).map(|c| [c[0], c[1]]));
        }
        self.spans.record(splits, &spans, &moved)
    }

    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        let spans = self.spans.of(nodes)?;
        let values = if self.lowbit { &self.exact } else { &self.gh };
        let g = &self.gpu;
        let mut out = Vec::with_capacity(nodes.len());
        for batch in spans.chunks(MAX_BATCH) {
            let nodes_buf = g.storage("nodes", words(&span_words(batch)));
            let sums = g.zeroed("sums", 16 * batch.len() as u64);
            let max_len = batch.iter().map(|s| s.len as usize).max().unwrap_or(0);
            let mut enc = g.encoder();
            g.dispatch(
                &mut enc,
                Kernel::LeafSums,
                &[values, &self.rows, &nodes_buf, &sums],
                [g.row_groups(max_len, ROWS_PER_GROUP), batch.len() as u32, 1],
            );
            let b = g.read(enc, &[(&sums, 0, 16 * batch.len() as u64)])?;
            out.extend(hist_bins(&b[0]));
        }
        Ok(out)
    }

    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()> {
        shard::check_group(group, self.shape.k)?;
        add_tree(
            &self.gpu,
            &self.bins,
            tree,
            self.shape.k,
            group,
            &self.margins,
        )
    }

    fn margins(&self) -> Result<Vec<f32>> {
        let g = &self.gpu;
        let b = g.read(
            g.encoder(),
            &[(&self.margins, 0, 4 * (self.shape.n * self.shape.k) as u64)],
        )?;
        Ok(bytemuck::pod_collect_to_vec(&b[0]))
    }
}
