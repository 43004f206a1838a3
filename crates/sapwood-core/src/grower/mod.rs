//! The grower: one tree over any backend and any number of workers, in three parts:
//! - [`policy`]: which nodes expand next (depth-wise or loss-guided);
//! - [`store`]: node histograms and the parent − child subtraction, in pooled buffers;
//! - [`sync`]: how histograms become global and workers agree on splits.
//!
//! What is left here is the serial learner: build the smaller child's histogram, evaluate
//! splits with the shared pure functions, set leaf values, tell the backend to partition.
//! Every worker runs it on identical reduced histograms, so every worker takes the same
//! decisions.

pub mod constraints;
pub mod policy;
pub mod store;
pub mod sync;

use rayon::prelude::*;

use crate::backend::{NodeSplit, TreeBackend, TreeSetup};
use crate::collective::Collective;
use crate::data::cuts::{Cuts, FeatureCuts};
use crate::error::Result;
use crate::hist::{node_sums, HistBin};
use crate::occupancy;
use crate::params::GrowPolicy;
use crate::split::{
    best_split_with, bounded, leaf_weight, unshrunk_levels, within_variance, CatNoise, LevelNoise,
    NodeRules, NodeView, SplitCandidate, SplitParams, Units,
};
use crate::tree::{Node, NodeId, Split, Tree};

use constraints::{enforce_monotone, NodeInfo, TreeRules, TreeState};
use policy::{Driver, Expandable};
use store::HistStore;
use sync::{DevicePlan, Encoded, HistSync};

pub use sync::BLOCK_THRESHOLD_BYTES;

/// What the grower needs besides the backend and the collective.
#[derive(Debug, Clone)]
pub struct GrowerConfig<'a> {
    /// The cuts (histogram layout and feature kinds).
    pub cuts: &'a Cuts,
    /// Split-finding parameters.
    pub split: SplitParams,
    /// Depth-wise or loss-guided.
    pub policy: GrowPolicy,
    /// Maximum depth; 0 for none.
    pub max_depth: usize,
    /// Maximum leaves; 0 for none.
    pub max_leaves: usize,
    /// Shrinkage of leaf values.
    pub learning_rate: f64,
    /// Rows over all workers.
    pub n_total: u64,
    /// Constraints and column sampling of every tree.
    pub rules: TreeRules,
}

/// One tree's serial learner on one worker.
struct Learner<'t> {
    cfg: &'t GrowerConfig<'t>,
    backend: &'t mut dyn TreeBackend,
    sync: HistSync<'t>,
    store: &'t mut HistStore,
    units: Units,
    /// bound on every global histogram value
    bound: u64,
    /// largest histogram value one row adds
    row_max: u64,
    nodes: Vec<Node>,
    /// what the rules track of each node, by id
    state: TreeState<'t>,
    /// the shift of the rows' squared gradients, where categorical nodes measure their
    /// noise ([`measures_noise`])
    square_shift: Option<i32>,
    /// each feature's noise measured at the root (NaN where not measured)
    root_noise: Vec<f64>,
    /// this worker's part of each node's sum of squares, by id (0 where not measured): a
    /// child's is its parent's less its sibling's, so only the smaller is summed
    local_squares: Vec<i64>,
}

impl Learner<'_> {
    fn new_node(&mut self) -> NodeId {
        self.nodes.push(Node {
            split: None,
            value: 0.0,
            cover: 0.0,
        });
        NodeId(self.nodes.len() as u32 - 1)
    }

    /// The optimal weight of sums (before bounds) and their real hessian.
    fn weight(&self, sums: HistBin) -> (f64, f64) {
        let (g, h) = (
            sums[0] as f64 * self.units.grad,
            sums[1] as f64 * self.units.hess,
        );
        (leaf_weight(g, h, &self.cfg.split, self.cfg.split.lambda), h)
    }

    fn set_value(&mut self, id: NodeId, w: f64, h: f64) {
        let node = &mut self.nodes[id.index()];
        node.value = (self.cfg.learning_rate * w) as f32;
        node.cover = h;
    }

    /// This worker's sums of squares of the children of `splits` that are `measured`,
    /// (left, right) of each, recorded in `local_squares`: the child with fewer of this
    /// worker's rows (`local` counts) is summed, its sibling is the parent's less it. Each
    /// worker may sum another side; the sums over workers are the same integers.
    fn local_child_squares(
        &mut self,
        splits: &[NodeSplit],
        local: &[[u64; 2]],
        measured: &[bool],
        shift: i32,
    ) -> Result<Vec<i64>> {
        let chosen: Vec<(&NodeSplit, bool)> = splits
            .iter()
            .zip(local)
            .zip(measured)
            .filter(|(_, &m)| m)
            .map(|((s, c), _)| (s, c[0] <= c[1]))
            .collect();
        let small: Vec<NodeId> = chosen
            .iter()
            .map(|&(s, left)| if left { s.left } else { s.right })
            .collect();
        let sums = self.backend.square_sums(&small, shift)?;
        self.local_squares.resize(self.nodes.len(), 0);
        let mut out = Vec::with_capacity(2 * sums.len());
        for (&(s, left), small) in chosen.iter().zip(sums) {
            let other = self.local_squares[s.node.index()] - small;
            let (l, r) = if left { (small, other) } else { (other, small) };
            self.local_squares[s.left.index()] = l;
            self.local_squares[s.right.index()] = r;
            out.extend([l, r]);
        }
        Ok(out)
    }

    /// Bound on a reduced row count, or a sum of squares where they travel beside them.
    fn count_bound(&self) -> u64 {
        match self.square_shift {
            Some(_) => self.cfg.n_total.saturating_mul(1 << 30),
            None => self.cfg.n_total,
        }
    }

    fn is_leaf(&self, q: usize) -> bool {
        self.nodes[q].split.is_none()
    }

    /// The best split of each node (over the features whose sums are global, agreed over
    /// workers), under the rules the nodes have now.
    fn best_of(&mut self, ids: &[NodeId]) -> Result<Vec<Option<SplitCandidate>>> {
        let (cuts, units, p) = (self.cfg.cuts, self.units, &self.cfg.split);
        let evaluable = self.sync.features();
        let (store, state) = (&*self.store, &self.state);
        let monotone = state.rules().has_monotone();
        let mut best: Vec<Option<SplitCandidate>> = ids
            .par_iter()
            .map(|&id| {
                let n = &state.info[id.index()];
                let can = (self.cfg.max_depth == 0 || n.depth < self.cfg.max_depth) && n.count >= 2;
                can.then(|| {
                    let view = NodeView {
                        hist: store.get(id),
                        sums: n.sums,
                        count: n.count,
                        occupied: store.occupied(id),
                        noise: self.square_shift.map(|shift| LevelNoise {
                            square_sum: square_sum_real(n.square_sum, shift),
                            root: &self.root_noise,
                        }),
                    };
                    let rules = NodeRules {
                        bounds: monotone.then_some(n.bounds),
                        monotone: &state.rules().monotone,
                        extra: state.extra_key.map(|k| (k, id.0)),
                    };
                    let features = state.node_features(id, evaluable);
                    best_split_with(view, cuts, &features, units, p, &rules)
                })
                .flatten()
            })
            .collect();
        self.sync.agree(&mut best)?;
        Ok(best)
    }

    /// Finds the best split of each new node; returns those that can split and releases
    /// the others' histograms.
    fn evaluate(&mut self, ids: Vec<NodeId>) -> Result<Vec<Expandable>> {
        if self.state.rules().intermediate() {
            for &id in &ids {
                let b = self.state.adjacent_bounds(id, |q| self.is_leaf(q));
                self.state.info[id.index()].bounds = b;
            }
        }
        let best = self.best_of(&ids)?;
        let mut out = Vec::with_capacity(ids.len());
        for (id, b) in ids.into_iter().zip(best) {
            match b {
                Some(best) => out.push(Expandable {
                    id,
                    depth: self.state.info[id.index()].depth,
                    best,
                }),
                None => self.store.release(id),
            }
        }
        Ok(out)
    }

    /// Intermediate method: queued nodes whose neighbours changed get their bounds and best
    /// split anew; those left without a split become leaves.
    fn refresh(&mut self, queued: Vec<Expandable>) -> Result<Vec<Expandable>> {
        let mut changed = Vec::new();
        for (i, e) in queued.iter().enumerate() {
            let b = self.state.adjacent_bounds(e.id, |q| self.is_leaf(q));
            if b != self.state.info[e.id.index()].bounds {
                self.state.info[e.id.index()].bounds = b;
                changed.push(i);
            }
        }
        if changed.is_empty() {
            return Ok(queued);
        }
        let ids: Vec<NodeId> = changed.iter().map(|&i| queued[i].id).collect();
        let mut fresh = self.best_of(&ids)?.into_iter();
        let mut out = Vec::with_capacity(queued.len());
        let mut next = changed.into_iter().peekable();
        for (i, mut e) in queued.into_iter().enumerate() {
            if next.peek() == Some(&i) {
                next.next();
                match fresh.next().flatten() {
                    Some(best) => e.best = best,
                    None => {
                        self.store.release(e.id);
                        continue;
                    }
                }
            }
            out.push(e);
        }
        Ok(out)
    }

    fn root(&mut self, root_local: u64) -> Result<Vec<Expandable>> {
        let mut batch = self.store.take_batch(1);
        let hist = &mut batch[..self.store.width()];
        self.backend.build_histograms(&[NodeId::ROOT], hist)?;
        self.sync.sum_whole(hist, self.bound)?;
        let sums = node_sums(hist, self.cfg.cuts.offsets());
        let mut count = vec![root_local as i64];
        if let Some(shift) = self.square_shift {
            self.local_squares = self.backend.square_sums(&[NodeId::ROOT], shift)?;
            count.extend(&self.local_squares);
        }
        self.sync.sum(&mut count, self.count_bound())?;
        let id = self.new_node();
        let (w, h) = self.weight(sums);
        let mut info = NodeInfo::root(count[0] as u64, sums, w);
        if let Some(shift) = self.square_shift {
            info.square_sum = count[1];
            let offsets = self.cfg.cuts.offsets();
            let square_sum = square_sum_real(info.square_sum, shift);
            self.root_noise = (0..self.cfg.cuts.n_features())
                .map(|f| {
                    let h = &hist[offsets[f] as usize..offsets[f + 1] as usize];
                    let categorical =
                        matches!(self.cfg.cuts.feature(f), FeatureCuts::Categorical { .. });
                    categorical
                        .then(|| within_variance(h, sums, info.count, square_sum, self.units))
                        .flatten()
                        .unwrap_or(f64::NAN)
                })
                .collect();
        }
        self.state.info.push(info);
        self.set_value(id, w, h);
        self.store.insert_copy(id, hist);
        self.store.return_batch(batch);
        self.evaluate(vec![id])
    }

    /// Builds the histograms of `nodes` into `hists` and sums them over workers, node i
    /// bounded by `bounds[i]`. With overlap the level goes in chunks, and each chunk is
    /// exchanged on a second thread while the next one builds: the sums are integers, so
    /// chunking changes no bit, and every worker chunks alike (the plan depends only on
    /// the level's shape). A GPU backend may hand over a reduce-scattered level encoded
    /// (see [`build_chunk`]). A lone worker on a backend that tracks them also gets the
    /// bits of the bins the nodes' rows occupy ([`crate::occupancy`]); that build wants
    /// its buffer zeroed, and `batch` (the histograms, then maybe more) is zeroed whole
    /// for it unless it is `zeroed` already.
    fn build_and_sum(
        &mut self,
        nodes: &[NodeId],
        bounds: &[u64],
        batch: &mut [HistBin],
        zeroed: bool,
    ) -> Result<Option<Vec<u64>>> {
        let width = self.store.width();
        let occupancy = self.sync.alone() && self.backend.tracks_occupancy();
        if occupancy && !zeroed {
            batch.fill([0, 0]);
        }
        let hists = &mut batch[..nodes.len() * width];
        self.sync.plan_level(hists.len());
        let device = self.sync.device_plan(bounds);
        let chunks = overlap_chunks(nodes.len(), width, self.sync.overlap());
        if chunks.len() <= 1 {
            if device.is_none() && occupancy {
                // nothing to exchange: the built histograms are the global ones
                let mut bits = vec![0u64; nodes.len() * occupancy::words_for(width)];
                self.backend
                    .build_histograms_occupied(nodes, hists, &mut bits)?;
                self.sync.sum_built(hists, width, bounds, None)?;
                return Ok(Some(bits));
            }
            let all = 0..nodes.len();
            let encoded = build_chunk(self.backend, device.as_ref(), all, nodes, hists)?;
            self.sync.sum_built(hists, width, bounds, encoded)?;
            return Ok(None);
        }
        let (backend, sync) = (&mut *self.backend, &mut self.sync);
        std::thread::scope(|s| {
            type Chunk<'h> = (&'h mut [HistBin], &'h [u64], Option<Encoded>);
            let (tx, rx) = std::sync::mpsc::channel::<Chunk<'_>>();
            let exchange = s.spawn(move || -> Result<()> {
                for (h, b, encoded) in rx {
                    sync.sum_built(h, width, b, encoded)?;
                }
                Ok(())
            });
            let mut built = Ok(());
            let mut rest = hists;
            for r in chunks {
                let (h, tail) = std::mem::take(&mut rest).split_at_mut(r.len() * width);
                rest = tail;
                let chunk = &nodes[r.clone()];
                let encoded = match build_chunk(backend, device.as_ref(), r.clone(), chunk, h) {
                    Ok(e) => e,
                    Err(e) => {
                        built = Err(e);
                        break;
                    }
                };
                if tx.send((h, &bounds[r], encoded)).is_err() {
                    // the exchange has failed: its error is the one to report
                    break;
                }
            }
            drop(tx);
            let exchanged = exchange
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            built.and(exchanged)
        })?;
        Ok(None)
    }

    /// Splits every node of `batch`; returns the children that can split in turn.
    fn split(&mut self, batch: Vec<Expandable>) -> Result<Vec<Expandable>> {
        let (splits, batch) = self.record_splits(batch)?;
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let local = self.backend.apply_splits(&splits)?;
        let mut counts: Vec<i64> = local
            .iter()
            .flat_map(|c| [c[0] as i64, c[1] as i64])
            .collect();
        // the squares of children that may split travel with the counts (one exchange);
        // children at max_depth are never evaluated
        let max_depth = self.cfg.max_depth;
        let measured: Vec<bool> = batch
            .iter()
            .map(|e| self.square_shift.is_some() && (max_depth == 0 || e.depth + 1 < max_depth))
            .collect();
        if let Some(shift) = self.square_shift {
            counts.extend(self.local_child_squares(&splits, &local, &measured, shift)?);
        }
        self.sync.sum(&mut counts, self.count_bound())?;
        let mut measured_squares = counts.split_off(2 * splits.len()).into_iter();
        let squares: Vec<i64> = measured
            .iter()
            .flat_map(|&m| match m {
                true => [measured_squares.next(), measured_squares.next()].map(|s| s.unwrap_or(0)),
                false => [0, 0],
            })
            .collect();
        // children that can never split (at max_depth, or with fewer than two rows) need no
        // histogram: the depth and the global counts are the same on every worker, so all
        // skip alike, and the model does not change
        let needed: Vec<bool> = batch
            .iter()
            .zip(counts.chunks_exact(2))
            .map(|(e, c)| (max_depth == 0 || e.depth + 1 < max_depth) && (c[0] >= 2 || c[1] >= 2))
            .collect();
        // build the smaller child (by global rows); its sibling is parent minus child
        let small_left: Vec<bool> = counts.chunks_exact(2).map(|c| c[0] <= c[1]).collect();
        let small: Vec<NodeId> = splits
            .iter()
            .zip(&small_left)
            .zip(&needed)
            .filter(|(_, &n)| n)
            .map(|((s, &l), _)| if l { s.left } else { s.right })
            .collect();
        // a node's bins sum at most its rows' values: a bound per node narrows the lanes
        let bounds: Vec<u64> = counts
            .chunks_exact(2)
            .zip(&small_left)
            .zip(&needed)
            .filter(|(_, &n)| n)
            .map(|((c, &l), _)| {
                (if l { c[0] } else { c[1] } as u64)
                    .saturating_mul(self.row_max)
                    .min(self.bound)
            })
            .collect();
        let mut fresh = Vec::with_capacity(2 * batch.len());
        let mut stored = Vec::with_capacity(small.len());
        let depth = batch.first().map_or(0, |e| e.depth);
        for (i, parent) in batch.into_iter().enumerate() {
            let s = &splits[i];
            for (j, id) in [(2 * i, s.left), (2 * i + 1, s.right)] {
                let info = &mut self.state.info[id.index()];
                info.count = counts[j] as u64;
                info.square_sum = squares.get(j).copied().unwrap_or(0);
            }
            if !needed[i] {
                // both children stay leaves
                self.store.release(parent.id);
                continue;
            }
            let (built_id, other_id) = if small_left[i] {
                (s.left, s.right)
            } else {
                (s.right, s.left)
            };
            stored.push((parent.id, built_id, other_id));
            fresh.extend([s.left, s.right]);
        }
        // Where the children's own children will get no histogram (a level-wise tree's
        // last level to split), each child's histogram serves its evaluation alone: a wide
        // level is then built, evaluated and let go a few children at a time, so that its
        // histograms are never all held at once. Each child's histogram and best split are
        // the same either way.
        // Only where a sparse shard's histograms are wide and mostly empty: elsewhere (a
        // GPU, a wide dense table on many threads) fewer nodes at once would cost more
        // than the memory saves. At least a node a thread goes at once, as the search
        // takes a level's nodes in parallel.
        let last = self.cfg.policy == GrowPolicy::Depthwise
            && max_depth > 0
            && depth + 2 >= max_depth
            && !self.state.rules().intermediate()
            && self.sync.alone()
            && self.backend.tracks_occupancy();
        let width = self.store.width().max(1);
        let per_chunk = if last {
            (LAST_LEVEL_CHUNK_BYTES / (16 * width)).max(rayon::current_num_threads())
        } else {
            small.len().max(1)
        };
        let mut out = Vec::with_capacity(fresh.len());
        for start in (0..small.len()).step_by(per_chunk) {
            let r = start..small.len().min(start + per_chunk);
            let (mut hists, zeroed) = self.store.take_batch_zeroed(r.len());
            let occupied =
                self.build_and_sum(&small[r.clone()], &bounds[r.clone()], &mut hists, zeroed)?;
            self.store
                .split_batch(&stored[r.clone()], hists, occupied.as_deref());
            let children = self.evaluate(fresh[2 * r.start..2 * r.end].to_vec())?;
            if last {
                for c in &children {
                    self.store.release(c.id);
                }
            }
            out.extend(children);
        }
        Ok(out)
    }

    /// Records the split of every node of `batch` in the tree (children with their
    /// weights); returns the splits for the backend and the nodes split. With intermediate
    /// monotone bounds a node whose bounds moved is evaluated again and may stay a leaf.
    fn record_splits(
        &mut self,
        batch: Vec<Expandable>,
    ) -> Result<(Vec<NodeSplit>, Vec<Expandable>)> {
        let monotone = self.state.rules().has_monotone();
        let intermediate = self.state.rules().intermediate();
        let mut splits = Vec::with_capacity(batch.len());
        let mut kept = Vec::with_capacity(batch.len());
        for mut e in batch {
            if intermediate {
                // the nodes of a batch split one after another: each sees the leaves its
                // predecessors made, as if they had been split one at a time
                let b = self.state.adjacent_bounds(e.id, |q| self.is_leaf(q));
                if b != self.state.info[e.id.index()].bounds {
                    self.state.info[e.id.index()].bounds = b;
                    match self.best_of(&[e.id])?.pop().flatten() {
                        Some(best) => e.best = best,
                        None => {
                            self.store.release(e.id);
                            continue;
                        }
                    }
                }
            }
            let (left, right) = (self.new_node(), self.new_node());
            let c = &e.best;
            self.nodes[e.id.index()].split = Some(Split {
                feature: c.feature,
                rule: c.rule.clone(),
                default_left: c.default_left,
                left,
                right,
                gain: c.gain,
            });
            splits.push(NodeSplit {
                node: e.id,
                left,
                right,
                feature: c.feature,
                rule: c.rule.clone(),
                default_left: c.default_left,
            });
            // the children's weights within the parent's bounds: what the split was
            // chosen with
            let b = self.state.info[e.id.index()].bounds;
            let ((mut wl, hl), (mut wr, hr)) = (self.weight(c.left), self.weight(c.right));
            if monotone {
                (wl, wr) = (bounded(wl, b), bounded(wr, b));
            }
            self.set_value(left, wl, hl);
            self.set_value(right, wr, hr);
            self.state.add_children(
                self.cfg.cuts,
                e.id,
                (c.feature, &c.rule, c.default_left),
                (c.left, c.right),
                (0, 0),
                (wl, wr),
            );
            debug_assert_eq!(self.state.info.len(), self.nodes.len());
            kept.push(e);
        }
        Ok((splits, kept))
    }
}

/// Builds the histograms of `nodes` (nodes `range` of the level) into `hists`. Where the
/// `device` plan allows, the backend encodes them on its device instead (see
/// [`HistSync::device_plan`]) and the encoding is returned; `hists` then holds only what
/// the host still needs (its own block of a reduce-scatter, nothing of a packed sum).
fn build_chunk(
    backend: &mut dyn TreeBackend,
    device: Option<&DevicePlan>,
    range: std::ops::Range<usize>,
    nodes: &[NodeId],
    hists: &mut [HistBin],
) -> Result<Option<Encoded>> {
    match device {
        Some(DevicePlan::Blocks { blocks, own }) => {
            if let Some(m) = backend.build_encoded_blocks(nodes, blocks, *own, hists)? {
                return Ok(Some(Encoded::Blocks(m)));
            }
        }
        Some(DevicePlan::Packed(widths)) => {
            let widths = widths[range].to_vec();
            if let Some(words) = backend.build_packed_histograms(nodes, &widths)? {
                return Ok(Some(Encoded::Packed { words, widths }));
            }
        }
        None => {}
    }
    backend.build_histograms(nodes, hists)?;
    Ok(None)
}

/// Most chunks a level's exchange is cut into: each costs the transport's latency once
/// more, and four already hide all but a quarter of the shorter of building and exchanging.
const OVERLAP_CHUNKS: usize = 4;

/// Smallest chunk worth exchanging on its own, in bytes of histogram (below it the latency
/// of one more exchange outweighs the build it hides).
const MIN_CHUNK_BYTES: usize = 64 * 1024;

/// Bytes of the histograms a tree's last level to split builds at once (see
/// [`Learner::split`]): a wide sparse level's 16 children of 4 MB each go 4 at a time.
const LAST_LEVEL_CHUNK_BYTES: usize = 16 << 20;

/// The node ranges a level of `nodes` histograms of `width` bins is built and exchanged
/// in: one range without overlap, else up to [`OVERLAP_CHUNKS`] of nearly equal size.
fn overlap_chunks(nodes: usize, width: usize, overlap: bool) -> Vec<std::ops::Range<usize>> {
    let bytes = 16 * width * nodes;
    let k = if overlap {
        (bytes / MIN_CHUNK_BYTES)
            .clamp(1, OVERLAP_CHUNKS)
            .min(nodes)
    } else {
        1
    };
    (0..k).map(|i| nodes * i / k..nodes * (i + 1) / k).collect()
}

/// Whether the tree's categorical nodes measure their noise: [`CatNoise::Measured`], with a
/// prior to shrink by, and a categorical feature with more levels than a node searches
/// unshrunk (the rows' squares cost a pass over a level's rows otherwise spent for
/// nothing).
fn measures_noise(cfg: &GrowerConfig<'_>) -> bool {
    let p = &cfg.split;
    let offsets = cfg.cuts.offsets();
    p.cat_noise == CatNoise::Measured
        && p.cat_smooth > 0.0
        && (0..cfg.cuts.n_features()).any(|f| {
            let levels = (offsets[f + 1] - offsets[f]) as usize - 1;
            matches!(cfg.cuts.feature(f), FeatureCuts::Categorical { .. })
                && levels > unshrunk_levels(p).max(p.max_cat_to_onehot)
        })
}

/// A node's Σr² ([`crate::quantise::square_term`] at `shift`) as Σg² in real units.
fn square_sum_real(square_sum: i64, shift: i32) -> f64 {
    square_sum as f64 * crate::detmath::pow2(-2 * shift)
}

/// Grows one tree for `setup.group` over the features in `features`; `store` lends its
/// histogram buffers (keep one per worker across trees).
pub fn grow_tree(
    cfg: &GrowerConfig<'_>,
    backend: &mut dyn TreeBackend,
    collective: &mut dyn Collective,
    setup: &TreeSetup,
    features: &[usize],
    store: &mut HistStore,
) -> Result<Tree> {
    let root_local = backend.start_tree(setup)?;
    store.reset(cfg.cuts.total_bins());
    let mut l = Learner {
        cfg,
        backend,
        sync: HistSync::new(collective, cfg.cuts, features),
        store,
        units: Units {
            grad: setup.scales.grad.hist_unit(),
            hess: setup.scales.hess.hist_unit(),
        },
        bound: setup.scales.hist_bound(cfg.n_total),
        row_max: setup.scales.grad.max_value.max(setup.scales.hess.max_value),
        nodes: Vec::new(),
        state: TreeState::new(&cfg.rules, features, setup.seed, setup.tree_index),
        square_shift: measures_noise(cfg)
            .then(|| crate::quantise::square_shift(&setup.scales.grad, cfg.n_total))
            .flatten(),
        root_noise: Vec::new(),
        local_squares: Vec::new(),
    };
    let mut driver = Driver::new(cfg.policy, cfg.max_leaves);
    driver.push(l.root(root_local)?);
    loop {
        let batch = driver.pop_batch();
        if batch.is_empty() {
            break;
        }
        let children = l.split(batch)?;
        driver.push(children);
        if cfg.rules.intermediate() {
            let queued = driver.take_queued();
            driver.push(l.refresh(queued)?);
        }
    }
    let refit = setup.scales.grad.drop.is_some();
    if refit {
        // low-bit histograms chose the structure; leaf values come from exact sums
        let leaves: Vec<NodeId> = (0..l.nodes.len() as u32)
            .map(NodeId)
            .filter(|id| l.nodes[id.index()].split.is_none())
            .collect();
        let local = l.backend.exact_sums(&leaves)?;
        let mut sums: Vec<i64> = local.iter().flat_map(|s| [s[0], s[1]]).collect();
        l.sync
            .sum(&mut sums, 1u64 << crate::quantise::EXACT_SUM_BITS)?;
        l.units = Units {
            grad: setup.scales.grad.exact_unit(),
            hess: setup.scales.hess.exact_unit(),
        };
        for (id, s) in leaves.iter().zip(sums.chunks_exact(2)) {
            let (w, h) = l.weight([s[0], s[1]]);
            l.set_value(*id, w, h);
        }
    }
    let mut tree = Tree { nodes: l.nodes };
    if refit {
        enforce_monotone(&mut tree, cfg.cuts, &cfg.rules);
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_chunks_cover_the_level_in_order_and_only_when_worth_it() {
        // one node of 1k bins is 16 KiB: nothing to cut
        assert_eq!(overlap_chunks(1, 1_000, true), vec![0..1]);
        assert_eq!(overlap_chunks(64, 10_000, false), vec![0..64]);
        // 2 nodes of 10k bins (312 KiB): one chunk each
        assert_eq!(overlap_chunks(2, 10_000, true), vec![0..1, 1..2]);
        // 8 nodes of 1,100 bins (137 KiB): two chunks of at least 64 KiB
        assert_eq!(overlap_chunks(8, 1_100, true), vec![0..4, 4..8]);
        for nodes in 1..70 {
            for width in [10, 700, 5_000] {
                let c = overlap_chunks(nodes, width, true);
                assert!(c.len() <= OVERLAP_CHUNKS && !c.is_empty());
                assert_eq!(c[0].start, 0);
                assert_eq!(c.last().unwrap().end, nodes);
                assert!(c.windows(2).all(|w| w[0].end == w[1].start));
                assert!(c.iter().all(|r| !r.is_empty()), "{nodes} x {width}: {c:?}");
            }
        }
    }
}
