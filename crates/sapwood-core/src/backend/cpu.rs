//! The CPU backend (rayon): the reference every other backend is tested against.

use std::sync::Arc;

use rayon::prelude::*;

use super::kernel::{self, BinValue, HistValue};
use super::shard::{self, NodeSpans, ShardLimits};
use super::{HistBackend, NodeSplit, ShardData, TreeSetup};
use crate::data::binned::{BinnedMatrix, Bins};
use crate::error::Result;
use crate::hash::{HashKey, Stream};
use crate::hist::HistBin;
use crate::objective::{ftz, Objective};
use crate::quantise::quantise_exact;
use crate::tree::{NodeId, Tree};

/// Rows per parallel task when building one node's histogram.
const HIST_ROWS_PER_TASK: usize = 32_768;
/// Rows per parallel task for per-row work.
const ROWS_PER_TASK: usize = 16_384;

/// The CPU backend: a shard of binned rows with labels, weights, margins and gradients.
pub struct CpuBackend {
    binned: Arc<BinnedMatrix>,
    /// the same bins column-major, for routing rows by one feature
    columns: Bins,
    offsets: Vec<u32>,
    total_bins: usize,
    labels: Vec<f32>,
    weights: Option<Vec<f32>>,
    objective: Objective,
    row_offset: u64,
    margins: Vec<f32>,
    grad: Vec<[f32; 2]>,
    /// the values added to histograms for the current tree
    gh: Vec<[i64; 2]>,
    /// exact values, kept apart only in low-bit mode
    exact: Option<Vec<[i64; 2]>>,
    /// low-bit (g, h) packed in one i64 when the shard's sums fit 32 bits each
    packed: Option<Vec<i64>>,
    /// in-bag rows grouped by node (see [`NodeSpans`])
    rows: Vec<u32>,
    spans: NodeSpans,
    all_in_bag: bool,
}

impl CpuBackend {
    /// A backend over `s.binned` (global rows `s.row_offset..`), margins starting at the
    /// rows' own base margins when given, else at the base margin of each group.
    pub fn new(s: ShardData) -> Result<Self> {
        let shape = shard::validate(&s, ShardLimits::default())?;
        let (n, k) = (shape.n, shape.k);
        let columns = transpose(s.binned.bins(), n, shape.nf);
        let margins = s.starting_margins()?;
        Ok(CpuBackend {
            binned: s.binned,
            columns,
            offsets: s.offsets,
            total_bins: shape.total_bins,
            labels: s.labels,
            weights: s.weights,
            objective: s.objective,
            row_offset: s.row_offset,
            margins,
            grad: vec![[0.0; 2]; n * k],
            gh: vec![[0; 2]; n],
            exact: None,
            packed: None,
            rows: Vec::new(),
            spans: NodeSpans::new(),
            all_in_bag: true,
        })
    }

    fn node_rows(&self, node: NodeId) -> Result<&[u32]> {
        Ok(&self.rows[self.spans.get(node)?.range()])
    }
}

/// One node's histogram: its rows, or (for a root holding every row) the range `0..n`.
fn build_one<B: BinValue, V: HistValue>(
    rows: &[u32],
    dense: bool,
    bins: &[B],
    offsets: &[u32],
    gh: &[V],
    hist: &mut [V],
) {
    hist.fill(V::default());
    let run = |lo: usize, hi: usize, h: &mut [V]| {
        if dense {
            kernel::accumulate_all(lo, hi, bins, offsets, gh, h);
        } else {
            kernel::accumulate(&rows[lo..hi], bins, offsets, gh, h);
        }
    };
    if rows.len() <= HIST_ROWS_PER_TASK {
        run(0, rows.len(), hist);
        return;
    }
    let total = hist.len();
    let tasks = rows.len().div_ceil(HIST_ROWS_PER_TASK);
    let partial = (0..tasks)
        .into_par_iter()
        .map(|t| {
            let mut h = vec![V::default(); total];
            run(
                t * HIST_ROWS_PER_TASK,
                ((t + 1) * HIST_ROWS_PER_TASK).min(rows.len()),
                &mut h,
            );
            h
        })
        .reduce_with(|mut a, b| {
            for (x, &y) in a.iter_mut().zip(&b) {
                x.add(y);
            }
            a
        });
    if let Some(p) = partial {
        hist.copy_from_slice(&p);
    }
}

/// Compacts the rows going left to the front of `rows` (stable) and copies the others to the
/// front of `right`; returns how many went left. Branch-free: the direction of a row is
/// unpredictable, so both writes happen and only the cursors move by the predicate.
fn split_into(rows: &mut [u32], right: &mut [u32], left: &impl Fn(u32) -> bool) -> usize {
    let (mut nl, mut nr) = (0usize, 0usize);
    for i in 0..rows.len() {
        let r = rows[i];
        let go = left(r) as usize;
        rows[nl] = r;
        right[nr] = r;
        nl += go;
        nr += 1 - go;
    }
    nl
}

/// Stable partition of `rows` by `left`, using parallel chunks for large nodes.
fn partition(rows: &mut [u32], left: impl Fn(u32) -> bool + Sync) -> usize {
    if rows.len() <= ROWS_PER_TASK {
        let mut right = vec![0u32; rows.len()];
        let n_left = split_into(rows, &mut right, &left);
        let n_right = rows.len() - n_left;
        rows[n_left..].copy_from_slice(&right[..n_right]);
        return n_left;
    }
    let parts: Vec<(Vec<u32>, Vec<u32>)> = rows
        .par_chunks_mut(ROWS_PER_TASK)
        .map(|c| {
            let mut right = vec![0u32; c.len()];
            let n_left = split_into(c, &mut right, &left);
            right.truncate(c.len() - n_left);
            (c[..n_left].to_vec(), right)
        })
        .collect();
    let mut pos = 0;
    for (l, _) in &parts {
        rows[pos..pos + l.len()].copy_from_slice(l);
        pos += l.len();
    }
    let n_left = pos;
    for (_, r) in &parts {
        rows[pos..pos + r.len()].copy_from_slice(r);
        pos += r.len();
    }
    n_left
}

fn transpose(bins: &Bins, n: usize, nf: usize) -> Bins {
    fn t<B: Copy + Default + Send + Sync>(b: &[B], n: usize, nf: usize) -> Vec<B> {
        let mut out = vec![B::default(); n * nf];
        out.par_chunks_mut(n.max(1))
            .enumerate()
            .for_each(|(f, col)| {
                for (r, v) in col.iter_mut().enumerate() {
                    *v = b[r * nf + f];
                }
            });
        out
    }
    match bins {
        Bins::U8(b) => Bins::U8(t(b, n, nf)),
        Bins::U16(b) => Bins::U16(t(b, n, nf)),
    }
}

impl HistBackend for CpuBackend {
    fn num_rows(&self) -> usize {
        self.binned.n_rows()
    }

    fn name(&self) -> String {
        "cpu".into()
    }

    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        Ok(shard::gradients_into(
            &self.objective,
            &self.labels,
            self.weights.as_deref(),
            &self.margins,
            &mut self.grad,
        ))
    }

    fn set_gradients(&mut self, grad: &[[f32; 2]]) -> Result<()> {
        shard::check_gradients(grad.len(), self.grad.len())?;
        self.grad.copy_from_slice(grad);
        Ok(())
    }

    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        let k = self.objective.groups();
        shard::check_group(s.group, k)?;
        let (grad, offset) = (&self.grad, self.row_offset);
        let lowbit = s.scales.grad.drop.is_some();
        let grad_key = HashKey::new(s.seed, Stream::GradNoise, s.tree_index);
        let hess_key = HashKey::new(s.seed, Stream::HessNoise, s.tree_index);
        if lowbit {
            let exact = self.exact.get_or_insert_with(Vec::new);
            exact.resize(self.gh.len(), [0; 2]);
            self.gh
                .par_iter_mut()
                .zip(exact.par_iter_mut())
                .enumerate()
                .for_each(|(i, (gh, ex))| {
                    let [g, h] = grad[i * k + s.group];
                    let x = [
                        quantise_exact(g, s.scales.grad.shift),
                        quantise_exact(h, s.scales.hess.shift),
                    ];
                    let row = offset + i as u64;
                    *ex = x;
                    *gh = [
                        s.scales.grad.hist_value(x[0], grad_key, row),
                        s.scales.hess.hist_value(x[1], hess_key, row),
                    ];
                });
        } else {
            self.exact = None;
            self.gh.par_iter_mut().enumerate().for_each(|(i, gh)| {
                let [g, h] = grad[i * k + s.group];
                *gh = [
                    quantise_exact(g, s.scales.grad.shift),
                    quantise_exact(h, s.scales.hess.shift),
                ];
            });
        }
        let n = self.num_rows();
        // packing needs every sum over this shard below 2^31 (g) and 2^32 (h)
        let fits = |max: u64, limit: u64| max.checked_mul(n as u64).is_some_and(|m| m < limit);
        self.packed = (lowbit
            && fits(s.scales.grad.max_value, 1 << 31)
            && fits(s.scales.hess.max_value, 1 << 32))
        .then(|| {
            self.gh
                .par_iter()
                .map(|&[g, h]| kernel::pack(g, h))
                .collect()
        });
        self.all_in_bag = s.row_sample.keeps_all();
        let row_key = HashKey::new(s.seed, Stream::RowSample, s.tree_index);
        self.rows = if self.all_in_bag {
            (0..n as u32).collect()
        } else {
            (0..n as u32)
                .into_par_iter()
                .filter(|&i| s.row_sample.keeps(row_key.hash32(offset + i as u64)))
                .collect()
        };
        self.spans.reset(self.rows.len() as u32);
        Ok(self.rows.len() as u64)
    }

    fn build_histograms(&mut self, nodes: &[NodeId], out: &mut [HistBin]) -> Result<()> {
        let width = self.total_bins;
        shard::check_hist_len(out.len(), nodes.len(), width)?;
        let row_sets = nodes
            .iter()
            .map(|&n| self.node_rows(n))
            .collect::<Result<Vec<_>>>()?;
        let (offsets, gh, packed) = (&self.offsets, &self.gh, self.packed.as_deref());
        let n = self.num_rows();
        let bins = self.binned.bins();
        out.par_chunks_mut(width.max(1))
            .zip(row_sets)
            .for_each(|(o, rows)| {
                // rows are kept in ascending order, so n of them are exactly 0..n
                let dense = rows.len() == n;
                match packed {
                    Some(p) => {
                        let mut h = vec![0i64; width];
                        match bins {
                            Bins::U8(b) => build_one(rows, dense, b, offsets, p, &mut h),
                            Bins::U16(b) => build_one(rows, dense, b, offsets, p, &mut h),
                        }
                        for (bin, &v) in o.iter_mut().zip(&h) {
                            *bin = kernel::unpack(v);
                        }
                    }
                    None => match bins {
                        Bins::U8(b) => build_one(rows, dense, b, offsets, gh, o),
                        Bins::U16(b) => build_one(rows, dense, b, offsets, gh, o),
                    },
                }
            });
        Ok(())
    }

    fn apply_splits(&mut self, splits: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        let spans = self.spans.for_splits(splits, self.binned.n_features())?;
        // node spans are disjoint (checked): carve the row array into one slice per split
        let mut order: Vec<usize> = (0..splits.len()).collect();
        order.sort_unstable_by_key(|&i| spans[i]);
        let mut slices = Vec::with_capacity(splits.len());
        let mut rest: &mut [u32] = &mut self.rows;
        let mut consumed = 0;
        for &i in &order {
            let r = spans[i].range();
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(r.start - consumed);
            let (mine, tail) = tail.split_at_mut(r.len());
            slices.push((mine, i));
            rest = tail;
            consumed = r.end;
        }
        let n = self.binned.n_rows();
        let columns = &self.columns;
        let mut moved = vec![[0u32; 2]; splits.len()];
        let lefts: Vec<(usize, usize)> = slices
            .into_par_iter()
            .map(|(rows, i)| {
                let s = &splits[i];
                let n_left = match columns {
                    Bins::U8(c) => {
                        let col = &c[s.feature * n..(s.feature + 1) * n];
                        partition(rows, |r| {
                            s.rule.goes_left(col[r as usize] as u16, s.default_left)
                        })
                    }
                    Bins::U16(c) => {
                        let col = &c[s.feature * n..(s.feature + 1) * n];
                        partition(rows, |r| s.rule.goes_left(col[r as usize], s.default_left))
                    }
                };
                (i, n_left)
            })
            .collect();
        for (i, n_left) in lefts {
            moved[i] = [n_left as u32, spans[i].len - n_left as u32];
        }
        self.spans.record(splits, &spans, &moved)
    }

    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        let values = self.exact.as_ref().unwrap_or(&self.gh);
        nodes
            .iter()
            .map(|&n| {
                let rows = self.node_rows(n)?;
                Ok(rows.iter().fold([0i64; 2], |a, &r| {
                    let v = values[r as usize];
                    [a[0] + v[0], a[1] + v[1]]
                }))
            })
            .collect()
    }

    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()> {
        let k = self.objective.groups();
        let n = self.num_rows();
        let mut leaf_of = vec![u32::MAX; n];
        let entries = self.spans.leaf_of_entries(self.rows.len(), |id| {
            tree.nodes.get(id).is_some_and(|n| n.split.is_none())
        });
        for (&r, &leaf) in self.rows.iter().zip(&entries) {
            leaf_of[r as usize] = leaf;
        }
        let binned = &self.binned;
        self.margins
            .par_chunks_mut(k)
            .zip(leaf_of.par_iter())
            .enumerate()
            .for_each(|(i, (m, &leaf))| {
                let leaf = if leaf == u32::MAX {
                    // out of bag this tree: route by bins
                    tree.leaf_of_binned(binned, i)
                } else {
                    NodeId(leaf)
                };
                m[group] = ftz(m[group] + tree.value(leaf));
            });
        Ok(())
    }

    fn margins(&self) -> Result<Vec<f32>> {
        Ok(self.margins.clone())
    }
}
