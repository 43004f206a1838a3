//! `CudaBackend`: the binned shard, labels, weights, margins, gradients, histogram values and
//! row partition live on the GPU for the whole training; only scalars, split decisions and
//! histograms cross to the host. Every call queues its kernels on the logical device's
//! stream and waits once, when it reads its result back; a level's nodes (or splits) go in
//! one launch.
#![allow(unsafe_code)]

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};
use sapwood_core::backend::{HistBackend, NodeSplit, TreeSetup};
use sapwood_core::detmath::pow2;
use sapwood_core::error::{Error, Result};
use sapwood_core::hash::{HashKey, Stream};
use sapwood_core::objective::{exp_table, sigmoid_table, Objective};
use sapwood_core::params::ObjectiveKind;
use sapwood_core::train::ShardData;
use sapwood_core::tree::{NodeId, Tree};

use crate::device::{driver_error, Gpu};
use crate::encode::{encode_tree, rule_words, BinLayout};
use crate::kernels::Kernel;
use crate::layout::{BinParams, GradParams, QuantParams, SampleParams};
use crate::tiles::{capacity_for, plan_tiles, TilePlan, DEFAULT_SHARED_BYTES};

/// Nodes or splits per launch along y or z (the grid limit).
const MAX_BATCH: usize = 65_535;
/// Threads per block of every kernel.
const BLOCK: u32 = 256;
/// Largest histogram buffer of one launch (bigger batches are split).
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
    n: usize,
    nf: usize,
    k: usize,
    total_bins: usize,
    objective: Objective,
    row_offset: u64,
    bp: BinParams,
    bins: CudaSlice<u32>,
    offsets: CudaSlice<u32>,
    labels: CudaSlice<f32>,
    weights: CudaSlice<f32>,
    has_weights: bool,
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
    /// node n owns rows[ranges[n].0 .. + ranges[n].1]
    ranges: Vec<(u32, u32)>,
}

impl CudaBackend {
    /// Uploads `s` to the logical device `gpu`; `tile_bins` caps the bins of a
    /// shared-memory histogram tile (default: what 48 KiB of shared memory holds).
    pub fn new(gpu: Gpu, s: ShardData, tile_bins: Option<u32>) -> Result<Self> {
        let binned = &s.binned;
        let (n, nf) = (binned.n_rows(), binned.n_features());
        let k = s.objective.groups();
        if s.labels.len() != n {
            return Err(Error::LengthMismatch {
                column: "label".into(),
                got: s.labels.len(),
                expected: n,
            });
        }
        if let Some(w) = &s.weights {
            if w.len() != n {
                return Err(Error::LengthMismatch {
                    column: "weight".into(),
                    got: w.len(),
                    expected: n,
                });
            }
        }
        if s.base_margin.len() != k {
            return Err(Error::Backend(format!(
                "{} base margins for {k} groups",
                s.base_margin.len()
            )));
        }
        if s.offsets.len() != nf + 1 {
            return Err(Error::Backend(format!(
                "{} offsets for {nf} features",
                s.offsets.len()
            )));
        }
        if n >= u32::MAX as usize / 2 {
            return Err(Error::Backend(format!(
                "a shard of {n} rows is too large for 32-bit row indices (use more workers)"
            )));
        }
        // the kernels index without checks: every bin must be inside its feature
        for r in 0..n {
            for f in 0..nf {
                if s.offsets[f] as u64 + binned.bin(r, f) as u64 >= s.offsets[f + 1] as u64 {
                    return Err(Error::Backend(
                        "a bin lies outside its feature's histogram".into(),
                    ));
                }
            }
        }
        let total_bins = *s.offsets.last().unwrap_or(&0) as usize;
        let layout = BinLayout::of(binned);
        let shared_bytes = match tile_bins {
            Some(b) => b.max(1).saturating_mul(crate::tiles::BYTES_PER_BIN),
            None => DEFAULT_SHARED_BYTES,
        };
        let plan = plan_tiles(&s.offsets, capacity_for(shared_bytes));
        gpu.shared.allow_shared(plan.shared_bytes)?;
        let tiles = |t: &[crate::tiles::Tile], what: &str| -> Result<CudaSlice<u32>> {
            let w: Vec<u32> = t.iter().flat_map(|t| t.words()).collect();
            upload(&gpu, &w, what)
        };
        let margins: Vec<f32> = (0..n).flat_map(|_| s.base_margin.iter().copied()).collect();
        let bp = BinParams {
            n_rows: n as u32,
            row_words: layout.row_words as u32,
            bin_bits: layout.bits,
            total_bins: total_bins as u32,
            k: k as u32,
            group: 0,
        };
        let backend = CudaBackend {
            n,
            nf,
            k,
            total_bins,
            objective: s.objective,
            row_offset: s.row_offset,
            bp,
            bins: upload(&gpu, &layout.pack(binned, 0, binned.n_rows()), "bins")?,
            offsets: upload(&gpu, &s.offsets, "offsets")?,
            labels: upload(&gpu, &s.labels, "labels")?,
            weights: match &s.weights {
                Some(w) => upload(&gpu, w, "weights")?,
                None => zeroed(&gpu, 1, "weights")?,
            },
            has_weights: s.weights.is_some(),
            margins: upload(&gpu, &margins, "margins")?,
            grad: zeroed(&gpu, 2 * n * k, "gradients")?,
            gh: zeroed(&gpu, 2 * n, "histogram values")?,
            exact: zeroed(&gpu, 2, "exact values")?,
            lowbit: false,
            rows: zeroed(&gpu, n, "rows")?,
            moved: zeroed(&gpu, n, "moved rows")?,
            sigmoid: upload(&gpu, sigmoid_table(), "sigmoid table")?,
            exp: upload(&gpu, exp_table(), "exp table")?,
            maxes: zeroed(&gpu, 2 * k, "maxima")?,
            count: zeroed(&gpu, 1, "count")?,
            shared_tiles: tiles(&plan.shared, "tiles")?,
            global_tiles: tiles(&plan.global, "tiles")?,
            plan,
            hist: None,
            ranges: Vec::new(),
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

    fn range(&self, node: NodeId) -> Result<(u32, u32)> {
        self.ranges
            .get(node.index())
            .copied()
            .ok_or_else(|| Error::Backend(format!("unknown node {}", node.0)))
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

    /// Diagnostics: the last computed (g, h) of every row and group, `2 * groups` per row.
    pub fn read_gradients(&self) -> Result<Vec<f32>> {
        self.read(&self.grad, 2 * self.n * self.k)
    }

    /// Diagnostics: the (g, h) each row adds to the current tree's histograms.
    pub fn read_hist_values(&self) -> Result<Vec<[i64; 2]>> {
        let v = self.read(&self.gh, 2 * self.n)?;
        Ok(v.chunks_exact(2).map(|p| [p[0], p[1]]).collect())
    }

    /// Diagnostics: the rows of `node`, ascending.
    pub fn read_node_rows(&self, node: NodeId) -> Result<Vec<u32>> {
        let (start, len) = self.range(node)?;
        let mut v = if len == 0 {
            Vec::new()
        } else {
            self.gpu
                .stream
                .clone_dtoh(&self.rows.slice(start as usize..(start + len) as usize))
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
        self.n
    }

    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        let stream = &self.gpu.stream;
        stream
            .memset_zeros(&mut self.maxes)
            .map_err(|e| driver_error("memset", e))?;
        let p = GradParams {
            n: self.n as u32,
            k: self.k as u32,
            kind: match self.objective.kind() {
                ObjectiveKind::SquaredError => 0,
                ObjectiveKind::Logistic => 1,
                ObjectiveKind::Softprob => 2,
            },
            has_weights: self.has_weights as u32,
            sigmoid_len: sigmoid_table().len() as u32,
            exp_len: exp_table().len() as u32,
        };
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
        unsafe { b.launch(cfg((self.gpu.blocks(self.n, 4), 1, 1), 0)) }
            .map_err(launch_error(Kernel::Gradients))?;
        let v = self.read(&self.maxes, 2 * self.k)?;
        Ok(v.chunks_exact(2)
            .map(|m| [f32::from_bits(m[0]), f32::from_bits(m[1])])
            .collect())
    }

    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        if s.group >= self.k {
            return Err(Error::Backend(format!("group {} of {}", s.group, self.k)));
        }
        let lowbit = s.scales.grad.drop.is_some();
        if lowbit && self.exact.len() < 2 * self.n {
            self.exact = zeroed(&self.gpu, 2 * self.n, "exact values")?;
        }
        self.lowbit = lowbit;
        let q = QuantParams {
            n: self.n as u32,
            k: self.k as u32,
            group: s.group as u32,
            lowbit: lowbit as u32,
            g_scale: pow2(s.scales.grad.shift),
            h_scale: pow2(s.scales.hess.shift),
            g_drop: s.scales.grad.drop.unwrap_or(0),
            h_drop: s.scales.hess.drop.unwrap_or(0),
            g_key: HashKey::new(s.seed, Stream::GradNoise, s.tree_index).0,
            h_key: HashKey::new(s.seed, Stream::HessNoise, s.tree_index).0,
            row_offset: self.row_offset,
        };
        let blocks = self.gpu.blocks(self.n, 4);
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
        let keep_all = s.row_sample.keeps_all();
        stream
            .memset_zeros(&mut self.count)
            .map_err(|e| driver_error("memset", e))?;
        let sp = SampleParams {
            n: self.n as u32,
            key: HashKey::new(s.seed, Stream::RowSample, s.tree_index).0,
            threshold: s.row_sample.threshold().min(u32::MAX as u64) as u32,
            keep_all: keep_all as u32,
            row_offset: self.row_offset,
        };
        let f = self.gpu.shared.function(Kernel::SampleRows);
        let mut b = stream.launch_builder(f);
        b.arg(&sp).arg(&mut self.rows).arg(&mut self.count);
        // SAFETY: matches sample_rows.cu; rows holds n entries, count one.
        unsafe { b.launch(cfg((blocks, 1, 1), 0)) }.map_err(launch_error(Kernel::SampleRows))?;
        let count = if keep_all {
            self.n as u32
        } else {
            self.read(&self.count, 1)?[0]
        };
        self.ranges.clear();
        self.ranges.push((0, count));
        Ok(count as u64)
    }

    fn build_histograms(&mut self, nodes: &[NodeId], out: &mut [i64]) -> Result<()> {
        let width = 2 * self.total_bins;
        if out.len() != nodes.len() * width {
            return Err(Error::Backend(format!(
                "histogram buffer of {} for {} nodes of {width}",
                out.len(),
                nodes.len()
            )));
        }
        if width == 0 || nodes.is_empty() {
            return Ok(());
        }
        let per_batch = (MAX_HIST_BYTES / (8 * width)).clamp(1, MAX_BATCH);
        let ranges = nodes
            .iter()
            .map(|&n| self.range(n))
            .collect::<Result<Vec<_>>>()?;
        for (batch, out) in ranges
            .chunks(per_batch)
            .zip(out.chunks_mut(per_batch * width))
        {
            let len = batch.len() * width;
            if self.hist.as_ref().is_none_or(|h| h.len() < len) {
                self.hist = Some(zeroed(&self.gpu, len, "histograms")?);
            }
            let node_words: Vec<u32> = batch.iter().flat_map(|&(s, l)| [s, l]).collect();
            let nodes_buf = upload(&self.gpu, &node_words, "nodes")?;
            let max_len = batch.iter().map(|r| r.1 as usize).max().unwrap_or(0);
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
                let mut b = stream.launch_builder(f);
                b.arg(&self.bp)
                    .arg(&self.bins)
                    .arg(&self.offsets)
                    .arg(&self.gh)
                    .arg(&self.rows)
                    .arg(&nodes_buf)
                    .arg(tiles)
                    .arg(&mut *hist);
                // SAFETY: matches hist_shared.cu / hist_global.cu; every node range lies in
                // rows, every bin inside its feature (checked at upload), hist holds
                // batch.len() * width entries, and the shared tile `shared` bytes.
                unsafe { b.launch(cfg((x, count as u32, batch.len() as u32), shared)) }
                    .map_err(launch_error(kernel))?;
            }
            let v = stream
                .clone_dtoh(&hist.slice(0..len))
                .map_err(|e| driver_error("read-back", e))?;
            for (o, x) in out.iter_mut().zip(v) {
                *o = x as i64;
            }
        }
        Ok(())
    }

    fn apply_splits(&mut self, splits: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        let mut spans = Vec::with_capacity(splits.len());
        for s in splits {
            let (start, len) = self.range(s.node)?;
            if s.feature >= self.nf {
                return Err(Error::Backend(format!("split on feature {}", s.feature)));
            }
            spans.push((start, len));
        }
        let mut sorted = spans.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
            return Err(Error::Backend("two splits share rows".into()));
        }
        let mut counts = Vec::with_capacity(splits.len());
        for (batch, spans) in splits.chunks(MAX_BATCH).zip(spans.chunks(MAX_BATCH)) {
            let mut cats = Vec::new();
            let mut w = Vec::with_capacity(batch.len() * 8);
            for (s, &(start, len)) in batch.iter().zip(spans) {
                let [kind, bin, off, clen] = rule_words(&s.rule, &mut cats);
                w.extend_from_slice(&[
                    start,
                    len,
                    s.feature as u32,
                    kind,
                    s.default_left as u32,
                    bin,
                    off,
                    clen,
                ]);
            }
            let split_buf = upload(&self.gpu, &w, "splits")?;
            let cat_buf = upload(&self.gpu, &cats, "bin sets")?;
            let mut counters = zeroed::<u32>(&self.gpu, 2 * batch.len(), "split counts")?;
            let max_len = spans.iter().map(|r| r.1 as usize).max().unwrap_or(0);
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
            for &(start, len) in spans {
                if len > 0 {
                    let r = start as usize..(start + len) as usize;
                    stream
                        .memcpy_dtod(&self.moved.slice(r.clone()), &mut self.rows.slice_mut(r))
                        .map_err(|e| driver_error("copy", e))?;
                }
            }
            let c = stream
                .clone_dtoh(&counters)
                .map_err(|e| driver_error("read-back", e))?;
            counts.extend(c.chunks_exact(2).map(|c| [c[0], c[1]]));
        }
        let mut out = Vec::with_capacity(splits.len());
        for ((s, &(start, len)), c) in splits.iter().zip(&spans).zip(counts) {
            if c[0] as u64 + c[1] as u64 != len as u64 {
                return Err(Error::Backend(format!(
                    "the partition of node {} moved {} of its {len} rows",
                    s.node.0,
                    c[0] as u64 + c[1] as u64
                )));
            }
            let need = s.left.index().max(s.right.index()) + 1;
            if self.ranges.len() < need {
                self.ranges.resize(need, (0, 0));
            }
            self.ranges[s.left.index()] = (start, c[0]);
            self.ranges[s.right.index()] = (start + c[0], c[1]);
            out.push([c[0] as u64, c[1] as u64]);
        }
        Ok(out)
    }

    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<[i64; 2]>> {
        let ranges = nodes
            .iter()
            .map(|&n| self.range(n))
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(nodes.len());
        for batch in ranges.chunks(MAX_BATCH) {
            let node_words: Vec<u32> = batch.iter().flat_map(|&(s, l)| [s, l]).collect();
            let nodes_buf = upload(&self.gpu, &node_words, "nodes")?;
            let mut sums = zeroed::<u64>(&self.gpu, 2 * batch.len(), "sums")?;
            let max_len = batch.iter().map(|r| r.1 as usize).max().unwrap_or(0);
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
        if group >= self.k {
            return Err(Error::Backend(format!("group {group} of {}", self.k)));
        }
        let bp = BinParams {
            group: group as u32,
            ..self.bp
        };
        add_tree(&self.gpu, &bp, &self.bins, tree, &mut self.margins)
    }

    fn margins(&self) -> Result<Vec<f32>> {
        self.read(&self.margins, self.n * self.k)
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
