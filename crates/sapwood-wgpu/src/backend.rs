//! `WgpuBackend`: the binned shard, labels, weights, margins, gradients, histogram values and
//! row partition live on the device for the whole training; only scalars, split decisions and
//! histograms cross to the host.

use std::sync::Arc;

use sapwood_core::backend::{HistBackend, NodeSplit, TreeSetup};
use sapwood_core::error::{Error, Result};
use sapwood_core::hash::{HashKey, Stream};
use sapwood_core::objective::{exp_table, sigmoid_table, Objective};
use sapwood_core::params::ObjectiveKind;
use sapwood_core::train::ShardData;
use sapwood_core::tree::{NodeId, Tree};

use crate::chunks::{Chunk, DeviceBins};
use crate::encode::rule_words;
use crate::gpu::{device_error, Gpu, ROWS_PER_GROUP, WG};
use crate::layout::{BinParams, GradParams, QuantParams, SampleParams};
use crate::predict::add_tree;
use crate::shaders::Kernel;
use crate::tiles::plan_tiles;

/// Classes the softmax kernel sums in one u32 (Σ of k values below 2^24 each).
const MAX_CLASSES: usize = 255;
/// Nodes or splits per dispatch along y or z (the portable workgroup-count limit).
const MAX_BATCH: usize = 65_535;

/// The wgpu backend of one worker.
pub struct WgpuBackend {
    gpu: Arc<Gpu>,
    n: usize,
    nf: usize,
    k: usize,
    total_bins: usize,
    objective: Objective,
    row_offset: u64,
    bins: DeviceBins,
    offsets: wgpu::Buffer,
    labels: wgpu::Buffer,
    weights: wgpu::Buffer,
    has_weights: bool,
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
    /// node n owns rows[ranges[n].0 .. + ranges[n].1]
    ranges: Vec<(u32, u32)>,
}

fn words(v: &[u32]) -> &[u8] {
    bytemuck::cast_slice(v)
}

fn i64_pairs(bytes: &[u8]) -> impl Iterator<Item = i64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
}

impl WgpuBackend {
    /// Uploads `s` to `gpu`.
    pub fn new(gpu: Arc<Gpu>, s: ShardData) -> Result<Self> {
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
        if k > MAX_CLASSES {
            return Err(Error::Backend(format!(
                "the wgpu backend handles up to {MAX_CLASSES} classes, not {k}"
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
        let nk = (n * k) as u64;
        for (bytes, what) in [
            (16 * n as u64, "the histogram values of a shard"),
            (8 * nk, "the gradients of a shard"),
            (4 * nk, "the margins of a shard"),
            (4 * n as u64, "the row partition of a shard"),
        ] {
            gpu.check_binding(bytes, what)?;
        }
        if n as u64 * 4 >= u32::MAX as u64 {
            return Err(device_error(format!(
                "a shard of {n} rows is too large for 32-bit row indices"
            )));
        }
        let bins = DeviceBins::upload(&gpu, binned);
        let plan = plan_tiles(&s.offsets, gpu.tile_bins);
        let (shared, global) = (plan.shared, plan.global);
        let tiles = |t: &[crate::tiles::Tile]| -> (wgpu::Buffer, u32) {
            let w: Vec<u32> = t.iter().flat_map(|t| t.words()).collect();
            (gpu.storage("tiles", words(&w)), t.len() as u32)
        };
        let margins: Vec<f32> = (0..n).flat_map(|_| s.base_margin.iter().copied()).collect();
        let backend = WgpuBackend {
            n,
            nf,
            k,
            total_bins,
            objective: s.objective,
            row_offset: s.row_offset,
            bins,
            offsets: gpu.storage("offsets", words(&s.offsets)),
            labels: gpu.storage("labels", bytemuck::cast_slice(&s.labels)),
            weights: match &s.weights {
                Some(w) => gpu.storage("weights", bytemuck::cast_slice(w)),
                None => gpu.zeroed("weights", 16),
            },
            has_weights: s.weights.is_some(),
            margins: gpu.storage("margins", bytemuck::cast_slice(&margins)),
            grad: gpu.zeroed("gradients", 8 * nk),
            gh: gpu.zeroed("histogram values", 16 * n as u64),
            exact: gpu.zeroed("exact values", 16),
            lowbit: false,
            rows: gpu.zeroed("rows", 4 * n as u64),
            moved: gpu.zeroed("moved rows", 4 * n as u64),
            sigmoid: gpu.storage("sigmoid table", words(sigmoid_table())),
            exp: gpu.storage("exp table", words(exp_table())),
            maxes: gpu.zeroed("maxima", 8 * k as u64),
            count: gpu.zeroed("count", 16),
            shared_tiles: tiles(&shared),
            global_tiles: tiles(&global),
            hist: None,
            ranges: Vec::new(),
            gpu,
        };
        backend.gpu.check()?;
        Ok(backend)
    }

    /// The adapter this backend runs on.
    pub fn device_name(&self) -> &str {
        self.gpu.name()
    }

    fn range(&self, node: NodeId) -> Result<(u32, u32)> {
        self.ranges
            .get(node.index())
            .copied()
            .ok_or_else(|| Error::Backend(format!("unknown node {}", node.0)))
    }

    fn bin_params(&self, c: &Chunk, group: usize) -> BinParams {
        self.bins.params(c, self.total_bins, self.k, group)
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

    /// Diagnostics: the last computed (g, h) of every row and group, `2 * groups` per row.
    pub fn read_gradients(&self) -> Result<Vec<f32>> {
        let b = self.read_all(&self.grad, 8 * self.n * self.k)?;
        Ok(bytemuck::pod_collect_to_vec(&b))
    }

    /// Diagnostics: the (g, h) each row adds to the current tree's histograms.
    pub fn read_hist_values(&self) -> Result<Vec<[i64; 2]>> {
        let b = self.read_all(&self.gh, 16 * self.n)?;
        let v: Vec<i64> = i64_pairs(&b).collect();
        Ok(v.chunks_exact(2).map(|p| [p[0], p[1]]).collect())
    }

    /// Diagnostics: the exact (g, h) of every row kept for leaf refits in low-bit mode.
    pub fn read_exact_values(&self) -> Result<Vec<[i64; 2]>> {
        if !self.lowbit {
            return self.read_hist_values();
        }
        let b = self.read_all(&self.exact, 16 * self.n)?;
        let v: Vec<i64> = i64_pairs(&b).collect();
        Ok(v.chunks_exact(2).map(|p| [p[0], p[1]]).collect())
    }

    /// Diagnostics: the rows of `node`, ascending.
    pub fn read_node_rows(&self, node: NodeId) -> Result<Vec<u32>> {
        let (start, len) = self.range(node)?;
        let g = &self.gpu;
        let b = g.read(
            g.encoder(),
            &[(&self.rows, 4 * start as u64, 4 * len as u64)],
        )?;
        let mut v: Vec<u32> = bytemuck::pod_collect_to_vec(&b[0]);
        v.sort_unstable();
        Ok(v)
    }

    fn row_offset_words(&self) -> (u32, u32) {
        (self.row_offset as u32, (self.row_offset >> 32) as u32)
    }
}

impl HistBackend for WgpuBackend {
    fn num_rows(&self) -> usize {
        self.n
    }

    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        let g = &self.gpu;
        let mut enc = g.encoder();
        enc.clear_buffer(&self.maxes, 0, None);
        let kind = match self.objective.kind() {
            ObjectiveKind::SquaredError => 0,
            ObjectiveKind::Logistic => 1,
            ObjectiveKind::Softprob => 2,
        };
        let p = g.uniform(&GradParams {
            n: self.n as u32,
            k: self.k as u32,
            kind,
            has_weights: self.has_weights as u32,
            sigmoid_len: sigmoid_table().len() as u32,
            exp_len: exp_table().len() as u32,
            ..Default::default()
        });
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
            [g.row_groups(self.n, WG * 16), 1, 1],
        );
        let bytes = g.read(enc, &[(&self.maxes, 0, 8 * self.k as u64)])?;
        let v: &[u32] = bytemuck::cast_slice(&bytes[0]);
        Ok(v.chunks_exact(2)
            .map(|m| [f32::from_bits(m[0]), f32::from_bits(m[1])])
            .collect())
    }

    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        if s.group >= self.k {
            return Err(Error::Backend(format!("group {} of {}", s.group, self.k)));
        }
        let lowbit = s.scales.grad.drop.is_some();
        if lowbit && self.exact.size() < 16 * self.n as u64 {
            self.exact = self.gpu.zeroed("exact values", 16 * self.n as u64);
        }
        self.lowbit = lowbit;
        let (row_lo, row_hi) = self.row_offset_words();
        let g = &self.gpu;
        let mut enc = g.encoder();
        let q = g.uniform(&QuantParams {
            n: self.n as u32,
            k: self.k as u32,
            group: s.group as u32,
            lowbit: lowbit as u32,
            g_shift: s.scales.grad.shift,
            h_shift: s.scales.hess.shift,
            g_drop: s.scales.grad.drop.unwrap_or(0),
            h_drop: s.scales.hess.drop.unwrap_or(0),
            g_key: HashKey::new(s.seed, Stream::GradNoise, s.tree_index).0,
            h_key: HashKey::new(s.seed, Stream::HessNoise, s.tree_index).0,
            row_lo,
            row_hi,
        });
        let groups = g.row_groups(self.n, WG * 16);
        g.dispatch(
            &mut enc,
            Kernel::Quantise,
            &[&q, &self.grad, &self.gh, &self.exact],
            [groups, 1, 1],
        );
        let keep_all = s.row_sample.keeps_all();
        enc.clear_buffer(&self.count, 0, None);
        let sp = g.uniform(&SampleParams {
            n: self.n as u32,
            key: HashKey::new(s.seed, Stream::RowSample, s.tree_index).0,
            threshold: s.row_sample.threshold().min(u32::MAX as u64) as u32,
            keep_all: keep_all as u32,
            row_lo,
            row_hi,
            ..Default::default()
        });
        g.dispatch(
            &mut enc,
            Kernel::SampleRows,
            &[&sp, &self.rows, &self.count],
            [groups, 1, 1],
        );
        let count = if keep_all {
            g.submit(enc)?;
            self.n as u32
        } else {
            let b = g.read(enc, &[(&self.count, 0, 4)])?;
            u32::from_le_bytes([b[0][0], b[0][1], b[0][2], b[0][3]])
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
        let node_bytes = 8 * width as u64;
        self.gpu.check_binding(node_bytes, "one node's histogram")?;
        let per_batch = ((self.gpu.max_binding() / node_bytes) as usize).clamp(1, MAX_BATCH);
        let ranges = nodes
            .iter()
            .map(|&n| self.range(n))
            .collect::<Result<Vec<_>>>()?;
        for (batch, out) in ranges
            .chunks(per_batch)
            .zip(out.chunks_mut(per_batch * width))
        {
            let bytes = batch.len() as u64 * node_bytes;
            self.hist_buffer(bytes);
            let g = &self.gpu;
            let hist = self.hist.as_ref().expect("made above");
            let node_words: Vec<u32> = batch.iter().flat_map(|&(s, l)| [s, l]).collect();
            let nodes_buf = g.storage("nodes", words(&node_words));
            let max_len = batch.iter().map(|r| r.1 as usize).max().unwrap_or(0);
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
            let b = g.read(enc, &[(hist, 0, bytes)])?;
            for (o, v) in out.iter_mut().zip(i64_pairs(&b[0])) {
                *o = v;
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
            let g = &self.gpu;
            let split_buf = g.storage("splits", words(&w));
            let cat_buf = g.storage("bin sets", words(&cats));
            let counters = g.zeroed("split counts", 8 * batch.len() as u64);
            let max_len = spans.iter().map(|r| r.1 as usize).max().unwrap_or(0);
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
            for &(start, len) in spans {
                if len > 0 {
                    let at = 4 * start as u64;
                    enc.copy_buffer_to_buffer(&self.moved, at, &self.rows, at, 4 * len as u64);
                }
            }
            let b = g.read(enc, &[(&counters, 0, 8 * batch.len() as u64)])?;
            let c: &[u32] = bytemuck::cast_slice(&b[0]);
            counts.extend(c.chunks_exact(2).map(|c| [c[0], c[1]]));
        }
        let mut out = Vec::with_capacity(splits.len());
        for ((s, &(start, len)), c) in splits.iter().zip(&spans).zip(counts) {
            if c[0] + c[1] != len {
                return Err(device_error(format!(
                    "the partition of node {} moved {} of its {len} rows",
                    s.node.0,
                    c[0] + c[1]
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
        let values = if self.lowbit { &self.exact } else { &self.gh };
        let g = &self.gpu;
        let mut out = Vec::with_capacity(nodes.len());
        for batch in ranges.chunks(MAX_BATCH) {
            let node_words: Vec<u32> = batch.iter().flat_map(|&(s, l)| [s, l]).collect();
            let nodes_buf = g.storage("nodes", words(&node_words));
            let sums = g.zeroed("sums", 16 * batch.len() as u64);
            let max_len = batch.iter().map(|r| r.1 as usize).max().unwrap_or(0);
            let mut enc = g.encoder();
            g.dispatch(
                &mut enc,
                Kernel::LeafSums,
                &[values, &self.rows, &nodes_buf, &sums],
                [g.row_groups(max_len, ROWS_PER_GROUP), batch.len() as u32, 1],
            );
            let b = g.read(enc, &[(&sums, 0, 16 * batch.len() as u64)])?;
            let v: Vec<i64> = i64_pairs(&b[0]).collect();
            out.extend(v.chunks_exact(2).map(|p| [p[0], p[1]]));
        }
        Ok(out)
    }

    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()> {
        if group >= self.k {
            return Err(Error::Backend(format!("group {group} of {}", self.k)));
        }
        add_tree(&self.gpu, &self.bins, tree, self.k, group, &self.margins)
    }

    fn margins(&self) -> Result<Vec<f32>> {
        let g = &self.gpu;
        let b = g.read(
            g.encoder(),
            &[(&self.margins, 0, 4 * (self.n * self.k) as u64)],
        )?;
        Ok(bytemuck::pod_collect_to_vec(&b[0]))
    }
}
