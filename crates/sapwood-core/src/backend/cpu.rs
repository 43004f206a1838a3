//! The CPU backend (rayon): the reference every other backend is tested against.

use std::sync::Arc;

use rayon::prelude::*;

use super::{HistBackend, NodeSplit, TreeSetup};
use crate::data::binned::{BinnedMatrix, Bins};
use crate::error::{Error, Result};
use crate::hash::{hash32, Stream};
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
    /// in-bag rows grouped by node: node n owns rows[ranges[n].0 .. +ranges[n].1]
    rows: Vec<u32>,
    ranges: Vec<(usize, usize)>,
    all_in_bag: bool,
}

impl CpuBackend {
    /// A backend over `binned` (global rows `row_offset..`), with histogram `offsets` from
    /// the cuts and margins starting at `base_margin` (one per group).
    pub fn new(
        binned: Arc<BinnedMatrix>,
        offsets: Vec<u32>,
        labels: Vec<f32>,
        weights: Option<Vec<f32>>,
        objective: Objective,
        base_margin: &[f32],
        row_offset: u64,
    ) -> Result<Self> {
        let n = binned.n_rows();
        if labels.len() != n {
            return Err(Error::LengthMismatch {
                column: "label".into(),
                got: labels.len(),
                expected: n,
            });
        }
        if let Some(w) = &weights {
            if w.len() != n {
                return Err(Error::LengthMismatch {
                    column: "weight".into(),
                    got: w.len(),
                    expected: n,
                });
            }
        }
        let k = objective.groups();
        if base_margin.len() != k {
            return Err(Error::Backend(format!(
                "{} base margins for {k} groups",
                base_margin.len()
            )));
        }
        let total_bins = *offsets.last().unwrap_or(&0) as usize;
        let margins = (0..n).flat_map(|_| base_margin.iter().copied()).collect();
        Ok(CpuBackend {
            binned,
            offsets,
            total_bins,
            labels,
            weights,
            objective,
            row_offset,
            margins,
            grad: vec![[0.0; 2]; n * k],
            gh: vec![[0; 2]; n],
            exact: None,
            rows: Vec::new(),
            ranges: Vec::new(),
            all_in_bag: true,
        })
    }

    fn node_rows(&self, node: NodeId) -> Result<&[u32]> {
        let &(start, len) = self
            .ranges
            .get(node.index())
            .ok_or_else(|| Error::Backend(format!("unknown node {}", node.0)))?;
        Ok(&self.rows[start..start + len])
    }
}

/// Adds each row's (g, h) to the bins of its features.
fn accumulate<B: Copy + Into<usize>>(
    rows: &[u32],
    bins: &[B],
    offsets: &[u32],
    gh: &[[i64; 2]],
    hist: &mut [[i64; 2]],
) {
    let nf = offsets.len() - 1;
    for &r in rows {
        let r = r as usize;
        let [g, h] = gh[r];
        let row = &bins[r * nf..(r + 1) * nf];
        for (&b, &off) in row.iter().zip(offsets) {
            let e = &mut hist[off as usize + b.into()];
            e[0] += g;
            e[1] += h;
        }
    }
}

fn build_one<B: Copy + Into<usize> + Sync>(
    rows: &[u32],
    bins: &[B],
    offsets: &[u32],
    gh: &[[i64; 2]],
    out: &mut [i64],
) {
    let (hist, _) = out.as_chunks_mut::<2>();
    hist.fill([0; 2]);
    if rows.len() <= HIST_ROWS_PER_TASK {
        accumulate(rows, bins, offsets, gh, hist);
        return;
    }
    let total = hist.len();
    let partial = rows
        .par_chunks(HIST_ROWS_PER_TASK)
        .map(|chunk| {
            let mut h = vec![[0i64; 2]; total];
            accumulate(chunk, bins, offsets, gh, &mut h);
            h
        })
        .reduce_with(|mut a, b| {
            for (x, y) in a.iter_mut().zip(&b) {
                x[0] += y[0];
                x[1] += y[1];
            }
            a
        });
    if let Some(p) = partial {
        hist.copy_from_slice(&p);
    }
}

/// Stable partition of `rows` by `left`, using parallel chunks for large nodes.
fn partition(rows: &mut [u32], left: impl Fn(u32) -> bool + Sync) -> usize {
    let parts: Vec<(Vec<u32>, Vec<u32>)> = rows
        .par_chunks(ROWS_PER_TASK)
        .map(|c| c.iter().partition(|&&r| left(r)))
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

impl HistBackend for CpuBackend {
    fn num_rows(&self) -> usize {
        self.binned.n_rows()
    }

    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        let k = self.objective.groups();
        let obj = self.objective;
        let (labels, weights, margins) = (&self.labels, self.weights.as_deref(), &self.margins);
        let maxes = self
            .grad
            .par_chunks_mut(ROWS_PER_TASK * k)
            .enumerate()
            .map(|(task, chunk)| {
                let mut max = vec![[0.0f32; 2]; k];
                let mut g = vec![0.0f32; k];
                let mut h = vec![0.0f32; k];
                for (j, out) in chunk.chunks_exact_mut(k).enumerate() {
                    let i = task * ROWS_PER_TASK + j;
                    let w = weights.map_or(1.0, |w| w[i]);
                    obj.gradient(&margins[i * k..(i + 1) * k], labels[i], w, &mut g, &mut h);
                    for c in 0..k {
                        out[c] = [g[c], h[c]];
                        max[c][0] = max[c][0].max(g[c].abs());
                        max[c][1] = max[c][1].max(h[c]);
                    }
                }
                max
            })
            .reduce(
                || vec![[0.0f32; 2]; k],
                |a, b| {
                    a.iter()
                        .zip(&b)
                        .map(|(x, y)| [x[0].max(y[0]), x[1].max(y[1])])
                        .collect()
                },
            );
        Ok(maxes)
    }

    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        let k = self.objective.groups();
        if s.group >= k {
            return Err(Error::Backend(format!("group {} of {k}", s.group)));
        }
        let (grad, offset) = (&self.grad, self.row_offset);
        let lowbit = s.scales.grad.drop.is_some();
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
                        s.scales.grad.hist_value(
                            x[0],
                            s.seed,
                            Stream::GradNoise,
                            s.tree_index,
                            row,
                        ),
                        s.scales.hess.hist_value(
                            x[1],
                            s.seed,
                            Stream::HessNoise,
                            s.tree_index,
                            row,
                        ),
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
        self.all_in_bag = s.row_sample.keeps_all();
        self.rows = if self.all_in_bag {
            (0..n as u32).collect()
        } else {
            (0..n as u32)
                .into_par_iter()
                .filter(|&i| {
                    s.row_sample.keeps(hash32(
                        s.seed,
                        Stream::RowSample,
                        s.tree_index,
                        offset + i as u64,
                    ))
                })
                .collect()
        };
        self.ranges.clear();
        self.ranges.push((0, self.rows.len()));
        Ok(self.rows.len() as u64)
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
        let row_sets = nodes
            .iter()
            .map(|&n| self.node_rows(n))
            .collect::<Result<Vec<_>>>()?;
        let (offsets, gh) = (&self.offsets, &self.gh);
        out.par_chunks_mut(width.max(1))
            .zip(row_sets)
            .for_each(|(o, rows)| match self.binned.bins() {
                Bins::U8(b) => build_one(rows, b, offsets, gh, o),
                Bins::U16(b) => build_one(rows, b, offsets, gh, o),
            });
        Ok(())
    }

    fn apply_splits(&mut self, splits: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        let mut counts = Vec::with_capacity(splits.len());
        for s in splits {
            let &(start, len) = self
                .ranges
                .get(s.node.index())
                .ok_or_else(|| Error::Backend(format!("unknown node {}", s.node.0)))?;
            let binned = &self.binned;
            let n_left = partition(&mut self.rows[start..start + len], |r| {
                s.rule
                    .goes_left(binned.bin(r as usize, s.feature), s.default_left)
            });
            let need = s.left.index().max(s.right.index()) + 1;
            if self.ranges.len() < need {
                self.ranges.resize(need, (0, 0));
            }
            self.ranges[s.left.index()] = (start, n_left);
            self.ranges[s.right.index()] = (start + n_left, len - n_left);
            counts.push([n_left as u64, (len - n_left) as u64]);
        }
        Ok(counts)
    }

    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<[i64; 2]>> {
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
        for (id, node) in tree.nodes.iter().enumerate() {
            if node.split.is_none() {
                if let Some(&(start, len)) = self.ranges.get(id) {
                    for &r in &self.rows[start..start + len] {
                        leaf_of[r as usize] = id as u32;
                    }
                }
            }
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
