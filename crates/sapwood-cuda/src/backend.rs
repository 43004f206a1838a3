//! `CudaBackend`: the binned shard, labels, weights, margins, gradients, histogram values and
//! row partition live on the GPU for the whole training; only scalars, split decisions and
//! histograms cross to the host. Every call queues its kernels on the logical device's
//! stream and waits once, when it reads its result back; a level's nodes (or splits) go in
//! one launch.
#![allow(unsafe_code)]

use std::ops::Range;

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};
use sapwood_core::backend::gpu_layout::{encode_splits, encode_tree, BinLayout, Tile};
use sapwood_core::backend::shard::kernels::{
    maxima_from_bits, GradScalars, QuantScalars, SampleScalars,
};
use sapwood_core::backend::shard::{self, NodeSpans, ShardLimits, ShardShape, Span};
use sapwood_core::backend::{HistBackend, NodeSplit, ShardData, TreeSetup};
use sapwood_core::error::{Error, Result};
use sapwood_core::hist::HistBin;
use sapwood_core::objective::{exp_tables, sigmoid_table};
use sapwood_core::tree::{NodeId, Tree};

use crate::device::{driver_error, Gpu};
use crate::encode;
use crate::kernels::{CudaSource, Kernel};
use crate::layout::{BinParams, GradParams, QuantParams, SampleParams};
use crate::tiles::{capacity_for, plan_tiles, TilePlan, BYTES_PER_BIN, DEFAULT_SHARED_BYTES};

/// Blocks along y or z of one launch (the grid limit): nodes, splits or feature tiles.
const MAX_BATCH: usize = 65_535;
/// Threads per block of every kernel.
const BLOCK: u32 = 256;
/// Largest histogram buffer of one launch by default (bigger batches are split).
const MAX_HIST_BYTES: usize = 1 << 30;

fn cfg(grid: (u32, u32, u32), shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: grid,
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: shared,
    }
}

pub(crate) fn upload<T: DeviceRepr + ValidAsZeroBits>(
    gpu: &Gpu,
    v: &[T],
    what: &str,
) -> Result<CudaSlice<T>> {
    if v.is_empty() {
        // a one-element buffer stands for an empty one (zero-size allocations are refused)
        return zeroed(gpu, 1, what);
    }
    gpu.stream
        .clone_htod(v)
        .map_err(|e| driver_error(&format!("upload of {what}"), e))
}

pub(crate) fn zeroed<T: DeviceRepr + ValidAsZeroBits>(
    gpu: &Gpu,
    len: usize,
    what: &str,
) -> Result<CudaSlice<T>> {
    gpu.stream
        .alloc_zeros(len.max(1))
        .map_err(|e| driver_error(&format!("allocation of {what}"), e))
}

/// The CUDA backend of one worker (one logical device).
pub struct CudaBackend {
    gpu: Gpu,
    shape: ShardShape,
    grad_scalars: GradScalars,
    row_offset: u64,
    bp: BinParams,
    bins: CudaSlice<u32>,
    offsets: CudaSlice<u32>,
    labels: CudaSlice<f32>,
    weights: CudaSlice<f32>,
    margins: CudaSlice<f32>,
    grad: CudaSlice<f32>,
    gh: CudaSlice<i64>,
    exact: CudaSlice<i64>,
    lowbit: bool,
    rows: CudaSlice<u32>,
    moved: CudaSlice<u32>,
    sigmoid: CudaSlice<u32>,
    exp: CudaSlice<u32>,
    maxes: CudaSlice<u32>,
    count: CudaSlice<u32>,
    plan: TilePlan,
    shared_tiles: CudaSlice<u32>,
    global_tiles: CudaSlice<u32>,
    hist: Option<CudaSlice<u64>>,
    /// Largest histogram buffer of one launch.
    max_hist_bytes: usize,
    spans: NodeSpans,
}

/// (start, len) words of each span, as the kernels read nodes.
fn span_words(spans: &[Span]) -> Vec<u32> {
    spans.iter().flat_map(|s| [s.start, s.len]).collect()
}

/// `0..count` in ranges of at most [`MAX_BATCH`]: the launches along one grid dimension.
pub(crate) fn grid_chunks(count: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..count)
        .step_by(MAX_BATCH)
        .map(move |first| first..(first + MAX_BATCH).min(count))
}

/// The smallest range of row positions holding every non-empty span (`None` when all are
/// empty): where a batch of splits moved rows.
pub(crate) fn union_of(spans: &[Span]) -> Option<std::ops::Range<usize>> {
    let moved = spans.iter().filter(|s| s.len > 0);
    let lo = moved.clone().map(|s| s.start as usize).min()?;
    let hi = moved.map(|s| s.range().end).max()?;
    Some(lo..hi)
}

impl CudaBackend {
    /// Uploads `s` to the logical device `gpu`; `tile_bins` caps the bins of a
    /// shared-memory histogram tile (default: what 48 KiB of shared memory holds).
    pub fn new(gpu: Gpu, s: ShardData, tile_bins: Option<u32>) -> Result<Self> {
        let limits = ShardLimits {
            // the kernels keep row positions below 2^31
            max_rows: (u32::MAX / 2) as usize - 1,
            ..Default::default()
        };
        let shape = shard::validate(&s, limits)?;
        let (n, k) = (shape.n, shape.k);
        let binned = &s.binned;
        let layout = BinLayout::of(binned);
        let shared_bytes = match tile_bins {
            Some(b) => b.max(1).saturating_mul(BYTES_PER_BIN),
            None => DEFAULT_SHARED_BYTES,
        };
        let plan = plan_tiles(&s.offsets, capacity_for(shared_bytes));
        gpu.shared.allow_shared(plan.shared_bytes)?;
        let tiles = |t: &[Tile], what: &str| -> Result<CudaSlice<u32>> {
            let w: Vec<u32> = t.iter().flat_map(|t| t.words()).collect();
            upload(&gpu, &w, what)
        };
        let margins: Vec<f32> = s.starting_margins()?;
        let bp = BinParams::new(&layout, n as u32, shape.total_bins as u32, k as u32, 0);
        let backend = CudaBackend {
            shape,
            grad_scalars: GradScalars::of(&shape, &s.objective, s.weights.is_some()),
            row_offset: s.row_offset,
            bp,
            bins: upload(&gpu, &layout.pack(binned, 0, binned.n_rows()), "bins")?,
            offsets: upload(&gpu, &s.offsets, "offsets")?,
            labels: upload(&gpu, &s.labels, "labels")?,
            weights: match &s.weights {
                Some(w) => upload(&gpu, w, "weights")?,
                None => zeroed(&gpu, 1, "weights")?,
            },
            margins: upload(&gpu, &margins, "margins")?,
            grad: zeroed(&gpu, 2 * n * k, "gradients")?,
            gh: zeroed(&gpu, 2 * n, "histogram values")?,
            exact: zeroed(&gpu, 2, "exact values")?,
            lowbit: false,
            rows: zeroed(&gpu, n, "rows")?,
            moved: zeroed(&gpu, n, "moved rows")?,
            sigmoid: upload(&gpu, sigmoid_table(), "sigmoid table")?,
            exp: upload(&gpu, &exp_tables(), "exp tables")?,
            maxes: zeroed(&gpu, 2 * k, "maxima")?,
            count: zeroed(&gpu, 1, "count")?,
            shared_tiles: tiles(&plan.shared, "tiles")?,
            global_tiles: tiles(&plan.global, "tiles")?,
            plan,
            hist: None,
            max_hist_bytes: MAX_HIST_BYTES,
            spans: NodeSpans::new(),
            gpu,
        };
        backend.sync()?;
        Ok(backend)
    }

    /// The GPU this backend runs on.
    pub fn device_name(&self) -> &str {
        self.gpu.name()
    }

    fn sync(&self) -> Result<()> {
        self.gpu
            .stream
            .synchronize()
            .map_err(|e| driver_error("stream", e))
    }

    fn read<T: DeviceRepr + Default + Clone>(
        &self,
        s: &CudaSlice<T>,
        len: usize,
    ) -> Result<Vec<T>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        self.gpu
            .stream
            .clone_dtoh(&s.slice(0..len))
            .map_err(|e| driver_error("read-back", e))
    }

    /// Caps the histogram buffer of one launch at `bytes` (one node a batch at least), so
    /// that a test reaches the batch boundaries on a small shard.
    pub fn set_max_batch_bytes(&mut self, bytes: usize) {
        self.max_hist_bytes = bytes;
    }

    /// Nodes per batch whose histograms (and their encodings, `bytes` a node at most) fit
    /// the histogram buffer of one launch.
    fn nodes_per_batch(&self, bytes: usize) -> usize {
        (self.max_hist_bytes / bytes.max(1)).clamp(1, MAX_BATCH)
    }

    /// Queues the building of the histograms of `batch` into the histogram buffer (no wait).
    fn queue_histograms(&mut self, batch: &[Span]) -> Result<()> {
        let width = self.shape.total_bins;
        let len = 2 * batch.len() * width;
        if self.hist.as_ref().is_none_or(|h| h.len() < len) {
            self.hist = Some(zeroed(&self.gpu, len, "histograms")?);
        }
        let nodes_buf = upload(&self.gpu, &span_words(batch), "nodes")?;
        let max_len = batch.iter().map(|s| s.len as usize).max().unwrap_or(0);
        let stream = &self.gpu.stream;
        let hist = self.hist.as_mut().expect("allocated above");
        stream
            .memset_zeros(&mut hist.slice_mut(0..len))
            .map_err(|e| driver_error("memset", e))?;
        for (kernel, tiles, count, shared) in [
            (
                Kernel::HistShared,
                &self.shared_tiles,
                self.plan.shared.len(),
                self.plan.shared_bytes,
            ),
            (
                Kernel::HistGlobal,
                &self.global_tiles,
                self.plan.global.len(),
                0,
            ),
        ] {
            if count == 0 || max_len == 0 {
                continue;
            }
            let by_rows = max_len.div_ceil(BLOCK as usize * 8).max(1);
            let fill = (self.gpu.shared.sms as usize * 8 / (count * batch.len())).max(1);
            let x = by_rows.min(fill) as u32;
            let f = self.gpu.shared.function(kernel);
            // tiles go along y, at most 65,535 a launch
            for chunk in grid_chunks(count) {
                let these = tiles.slice(4 * chunk.start..4 * chunk.end);
                let mut b = stream.launch_builder(f);
                b.arg(&self.bp)
                    .arg(&self.bins)
                    .arg(&self.offsets)
                    .arg(&self.gh)
                    .arg(&self.rows)
                    .arg(&nodes_buf)
                    .arg(&these)
                    .arg(&mut *hist);
                // SAFETY: matches hist_shared.cu / hist_global.cu; every node range lies
                // in rows, every bin inside its feature (checked at upload), hist holds
                // batch.len() * width entries, `these` holds the chunk's tiles (4 words
                // each), and the shared tile `shared` bytes.
                let grid = (x, chunk.len() as u32, batch.len() as u32);
                unsafe { b.launch(cfg(grid, shared)) }.map_err(launch_error(kernel))?;
            }
        }
        Ok(())
    }

    /// Builds the histograms of `nodes` as `build_histograms` does and group-encodes each
    /// node's `2 * total_bins` values on the GPU (what the `auto` codec sends, before its
    /// choice of varint pairs for an almost empty block): one message per node, the bytes
    /// after the GROUPS tag, exactly as `codec::encode_groups` gives them. Only the encoded
    /// bytes (and 4 bytes per 32 values of group sizes) reach the host.
    pub fn build_group_encoded_histograms(&mut self, nodes: &[NodeId]) -> Result<Vec<Vec<u8>>> {
        let width = self.shape.total_bins;
        let spans = self.spans.of(nodes)?;
        if width == 0 || nodes.is_empty() {
            return Ok(vec![Vec::new(); nodes.len()]);
        }
        let per_batch =
            self.nodes_per_batch((16 * width).max(encode::group_bytes_bound(2 * width)));
        let mut out = Vec::with_capacity(nodes.len());
        for batch in spans.chunks(per_batch) {
            self.queue_histograms(batch)?;
            let hist = self.hist.as_ref().expect("allocated by queue_histograms");
            out.extend(encode::groups(&self.gpu, hist, 2 * width, batch.len())?);
        }
        Ok(out)
    }

    /// The logical device this backend runs on (its encoders take uploaded values too).
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Diagnostics: the last computed (g, h) of every row and group, `2 * groups` per row.
    pub fn read_gradients(&self) -> Result<Vec<f32>> {
        self.read(&self.grad, 2 * self.shape.n * self.shape.k)
    }

    /// Diagnostics: the (g, h) each row adds to the current tree's histograms.
    pub fn read_hist_values(&self) -> Result<Vec<HistBin>> {
        let v = self.read(&self.gh, 2 * self.shape.n)?;
        Ok(v.chunks_exact(2).map(|p| [p[0], p[1]]).collect())
    }

    /// Diagnostics: the rows of `node`, ascending.
    pub fn read_node_rows(&self, node: NodeId) -> Result<Vec<u32>> {
        let span = self.spans.get(node)?;
        let mut v = if span.len == 0 {
            Vec::new()
        } else {
            self.gpu
                .stream
                .clone_dtoh(&self.rows.slice(span.range()))
                .map_err(|e| driver_error("read-back", e))?
        };
        v.sort_unstable();
        Ok(v)
    }
}

fn launch_error(k: Kernel) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |e| driver_error(&format!("launch of {}", k.file()), e)
}

impl HistBackend for CudaBackend {
    fn num_rows(&self) -> usize {
        self.shape.n
    }

    fn name(&self) -> String {
        format!("cuda: {}", self.gpu.shared.name)
    }

    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        let stream = &self.gpu.stream;
        stream
            .memset_zeros(&mut self.maxes)
            .map_err(|e| driver_error("memset", e))?;
        let p = GradParams::from(self.grad_scalars);
        let f = self.gpu.shared.function(Kernel::Gradients);
        let mut b = stream.launch_builder(f);
        b.arg(&p)
            .arg(&self.labels)
            .arg(&self.weights)
            .arg(&self.margins)
            .arg(&mut self.grad)
            .arg(&mut self.maxes)
            .arg(&self.sigmoid)
            .arg(&self.exp);
        // SAFETY: the argument list matches gradients.cu; every buffer holds what the
        // kernel indexes (n labels/weights when has_weights, n*k margins, 2*n*k gradients,
        // 2*k maxima, the full tables).
        unsafe { b.launch(cfg((self.gpu.blocks(self.shape.n, 4), 1, 1), 0)) }
            .map_err(launch_error(Kernel::Gradients))?;
        Ok(maxima_from_bits(&self.read(&self.maxes, 2 * self.shape.k)?))
    }

    fn set_gradients(&mut self, grad: &[[f32; 2]]) -> Result<()> {
        shard::check_gradients(grad.len(), self.shape.n * self.shape.k)?;
        let flat: Vec<f32> = grad.iter().flatten().copied().collect();
        self.gpu
            .stream
            .memcpy_htod(&flat, &mut self.grad)
            .map_err(|e| driver_error("upload of host gradients", e))
    }

    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        shard::check_group(s.group, self.shape.k)?;
        let n = self.shape.n;
        let quant = QuantScalars::of(&self.shape, s, self.row_offset);
        self.lowbit = quant.lowbit != 0;
        if self.lowbit && self.exact.len() < 2 * n {
            self.exact = zeroed(&self.gpu, 2 * n, "exact values")?;
        }
        let q = QuantParams::from(quant);
        let blocks = self.gpu.blocks(n, 4);
        let stream = &self.gpu.stream;
        let f = self.gpu.shared.function(Kernel::Quantise);
        let mut b = stream.launch_builder(f);
        b.arg(&q)
            .arg(&self.grad)
            .arg(&mut self.gh)
            .arg(&mut self.exact);
        // SAFETY: matches quantise.cu; gh holds 2n values, exact 2n in low-bit mode (the
        // only mode that writes it), grad 2*n*k.
        unsafe { b.launch(cfg((blocks, 1, 1), 0)) }.map_err(launch_error(Kernel::Quantise))?;
        stream
            .memset_zeros(&mut self.count)
            .map_err(|e| driver_error("memset", e))?;
        let sp = SampleParams::from(SampleScalars::of(&self.shape, s, self.row_offset));
        let f = self.gpu.shared.function(Kernel::SampleRows);
        let mut b = stream.launch_builder(f);
        b.arg(&sp).arg(&mut self.rows).arg(&mut self.count);
        // SAFETY: matches sample_rows.cu; rows holds n entries, count one.
        unsafe { b.launch(cfg((blocks, 1, 1), 0)) }.map_err(launch_error(Kernel::SampleRows))?;
        let count = if sp.keep_all != 0 {
            n as u32
        } else {
            self.read(&self.count, 1)?[0]
        };
        // `moved` mirrors `rows` outside the spans a partition writes, so that one copy of
        // the union of a batch's spans brings the partition back (see apply_splits)
        if count > 0 {
            let c = count as usize;
            stream
                .memcpy_dtod(&self.rows.slice(0..c), &mut self.moved.slice_mut(0..c))
                .map_err(|e| driver_error("copy", e))?;
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
        let per_batch = self.nodes_per_batch(16 * width);
        let spans = self.spans.of(nodes)?;
        for (batch, out) in spans
            .chunks(per_batch)
            .zip(out.chunks_mut(per_batch * width))
        {
            self.queue_histograms(batch)?;
            let len = 2 * batch.len() * width;
            let hist = self.hist.as_ref().expect("allocated by queue_histograms");
            let v = self
                .gpu
                .stream
                .clone_dtoh(&hist.slice(0..len))
                .map_err(|e| driver_error("read-back", e))?;
            for (o, x) in out.iter_mut().zip(v.chunks_exact(2)) {
                *o = [x[0] as i64, x[1] as i64];
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
        let per_batch = self.nodes_per_batch(16 * width);
        let mut words = Vec::new();
        for (batch, widths) in spans.chunks(per_batch).zip(widths.chunks(per_batch)) {
            self.queue_histograms(batch)?;
            let hist = self.hist.as_ref().expect("allocated by queue_histograms");
            words.extend(encode::pack(&self.gpu, hist, 2 * width, widths)?);
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
        // a block's nodes are one message (the group encoding of a concatenation differs
        // from the concatenation of its parts' encodings), whose values and bytes the
        // encoder addresses with 32-bit offsets
        let n = nodes.len();
        let fits =
            |r: &Range<usize>| encode::group_bytes_bound(2 * n * r.len()) <= u32::MAX as usize;
        if blocks.iter().enumerate().any(|(b, r)| b != own && !fits(r)) {
            return Ok(None);
        }
        let per_batch = self.nodes_per_batch(16 * width);
        // every block gathered node after node, the own block too (read back once)
        let mut gathered = blocks
            .iter()
            .map(|r| {
                (!r.is_empty())
                    .then(|| zeroed::<u64>(&self.gpu, 2 * n * r.len(), "gathered block"))
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        for (k, batch) in spans.chunks(per_batch).enumerate() {
            self.queue_histograms(batch)?;
            let hist = self.hist.as_ref().expect("allocated by queue_histograms");
            for (r, dst) in blocks.iter().zip(&mut gathered) {
                let Some(dst) = dst else { continue };
                let runs = encode::Runs::of_block(r, width, k * per_batch, batch.len());
                encode::copy_runs(&self.gpu, hist, dst, runs)?;
            }
        }
        let mine = blocks[own].clone();
        if let Some(src) = &gathered[own] {
            let v = self.read(src, 2 * n * mine.len())?;
            for (i, node) in v.chunks_exact(2 * mine.len()).enumerate() {
                let out = &mut hists[i * width + mine.start..i * width + mine.end];
                for (o, x) in out.iter_mut().zip(node.chunks_exact(2)) {
                    *o = [x[0] as i64, x[1] as i64];
                }
            }
        }
        for (b, (r, src)) in blocks.iter().zip(&gathered).enumerate() {
            match src {
                Some(src) if b != own => {
                    messages[b] = encode::groups(&self.gpu, src, 2 * n * r.len(), 1)?.remove(0);
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
            let split_buf = upload(&self.gpu, &w, "splits")?;
            let cat_buf = upload(&self.gpu, &cats, "bin sets")?;
            let mut counters = zeroed::<u32>(&self.gpu, 2 * batch.len(), "split counts")?;
            let max_len = spans.iter().map(|s| s.len as usize).max().unwrap_or(0);
            let x = self.gpu.blocks(max_len, 4);
            let stream = &self.gpu.stream;
            let f = self.gpu.shared.function(Kernel::Partition);
            let mut b = stream.launch_builder(f);
            b.arg(&self.bp)
                .arg(&self.bins)
                .arg(&self.rows)
                .arg(&mut self.moved)
                .arg(&split_buf)
                .arg(&cat_buf)
                .arg(&mut counters);
            // SAFETY: matches partition.cu; the spans are disjoint ranges of rows (checked
            // above), each split's rule words index cats within its own set.
            unsafe { b.launch(cfg((x, batch.len() as u32, 1), 0)) }
                .map_err(launch_error(Kernel::Partition))?;
            // one copy for the batch: outside the split spans `moved` equals `rows` (set at
            // start_tree, kept by copying back every span a partition writes)
            if let Some(r) = union_of(spans) {
                stream
                    .memcpy_dtod(&self.moved.slice(r.clone()), &mut self.rows.slice_mut(r))
                    .map_err(|e| driver_error("copy", e))?;
            }
            let c = stream
                .clone_dtoh(&counters)
                .map_err(|e| driver_error("read-back", e))?;
            moved.extend(c.chunks_exact(2).map(|c| [c[0], c[1]]));
        }
        self.spans.record(splits, &spans, &moved)
    }

    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        let spans = self.spans.of(nodes)?;
        let mut out = Vec::with_capacity(nodes.len());
        for batch in spans.chunks(MAX_BATCH) {
            let nodes_buf = upload(&self.gpu, &span_words(batch), "nodes")?;
            let mut sums = zeroed::<u64>(&self.gpu, 2 * batch.len(), "sums")?;
            let max_len = batch.iter().map(|s| s.len as usize).max().unwrap_or(0);
            let x = self.gpu.blocks(max_len, 8);
            let values = if self.lowbit { &self.exact } else { &self.gh };
            let stream = &self.gpu.stream;
            let f = self.gpu.shared.function(Kernel::LeafSums);
            let mut b = stream.launch_builder(f);
            b.arg(values).arg(&self.rows).arg(&nodes_buf).arg(&mut sums);
            // SAFETY: matches leaf_sums.cu; values holds 2 entries per row (exact is sized
            // 2n whenever lowbit is set), node ranges lie in rows, sums 2 per node.
            unsafe { b.launch(cfg((x, batch.len() as u32, 1), 0)) }
                .map_err(launch_error(Kernel::LeafSums))?;
            let v = stream
                .clone_dtoh(&sums)
                .map_err(|e| driver_error("read-back", e))?;
            out.extend(v.chunks_exact(2).map(|p| [p[0] as i64, p[1] as i64]));
        }
        Ok(out)
    }

    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()> {
        shard::check_group(group, self.shape.k)?;
        let bp = BinParams {
            group: group as u32,
            ..self.bp
        };
        add_tree(&self.gpu, &bp, &self.bins, tree, &mut self.margins)
    }

    fn margins(&self) -> Result<Vec<f32>> {
        self.read(&self.margins, self.shape.n * self.shape.k)
    }
}

/// Queues the addition of one tree's leaf values to the margins of `bp.group` (no wait).
pub(crate) fn add_tree(
    gpu: &Gpu,
    bp: &BinParams,
    bins: &CudaSlice<u32>,
    tree: &Tree,
    margins: &mut CudaSlice<f32>,
) -> Result<()> {
    if bp.n_rows == 0 {
        return Ok(());
    }
    let (words, values, cats) = encode_tree(tree);
    let tree_buf = upload(gpu, &words, "tree")?;
    let value_buf = upload(gpu, &values, "leaf values")?;
    let cat_buf = upload(gpu, &cats, "bin sets")?;
    let n_nodes = tree.nodes.len() as u32;
    let f = gpu.shared.function(Kernel::Predict);
    let mut b = gpu.stream.launch_builder(f);
    b.arg(bp)
        .arg(bins)
        .arg(&tree_buf)
        .arg(&value_buf)
        .arg(&cat_buf)
        .arg(&n_nodes)
        .arg(margins);
    // SAFETY: matches predict.cu; the tree's child indices and features were produced by
    // the grower for this shard's features, margins hold n_rows * k values.
    unsafe { b.launch(cfg((gpu.blocks(bp.n_rows as usize, 4), 1, 1), 0)) }
        .map_err(launch_error(Kernel::Predict))?;
    Ok(())
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
