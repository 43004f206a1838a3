//! The grower: depth-wise and loss-guided tree growth over any backend and collective.
//!
//! Every worker runs the grower on identical reduced histograms, so every worker takes the
//! same decisions; the backend only builds histograms and moves rows.

use rayon::prelude::*;

use crate::backend::{HistBackend, NodeSplit, TreeSetup};
use crate::collective::Collective;
use crate::data::cuts::Cuts;
use crate::error::Result;
use crate::params::GrowPolicy;
use crate::split::{best_split, leaf_weight, pick, NodeView, SplitCandidate, SplitParams, Units};
use crate::tree::{Node, NodeId, Split, Tree};

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
}

/// A node on the growing edge of the tree.
struct Open {
    id: NodeId,
    depth: usize,
    sums: [i64; 2],
    count: u64,
    hist: Vec<i64>,
    best: Option<SplitCandidate>,
    /// only this worker's feature block of `hist` holds global sums
    owned_only: bool,
}

struct Grower<'a, 'b> {
    cfg: &'b GrowerConfig<'a>,
    backend: &'b mut dyn HistBackend,
    collective: &'b mut dyn Collective,
    features: &'b [usize],
    units: Units,
    bound: u64,
    width: usize,
    /// largest histogram value one row adds
    row_max: u64,
    /// each worker's block of histogram entries (i64 indices within a node)
    blocks: Vec<std::ops::Range<usize>>,
    /// this tree's features inside this worker's block
    own_features: Vec<usize>,
    nodes: Vec<Node>,
    root_local: u64,
}

fn node_sums(hist: &[i64], cuts: &Cuts) -> [i64; 2] {
    let end = cuts.offsets()[1] as usize;
    hist[..2 * end]
        .chunks_exact(2)
        .fold([0, 0], |a, e| [a[0] + e[0], a[1] + e[1]])
}

impl Grower<'_, '_> {
    fn can_split_at(&self, depth: usize) -> bool {
        self.cfg.max_depth == 0 || depth < self.cfg.max_depth
    }

    /// Finds each node's best split. Nodes whose histograms are reduced only on this
    /// worker's feature block are evaluated on that block, and the workers' best records
    /// are gathered and compared (LightGBM's data-parallel scheme).
    fn evaluate(&mut self, open: &mut [Open]) -> Result<()> {
        let blocked = open.iter().any(|o| o.owned_only);
        let features: &[usize] = if blocked {
            &self.own_features
        } else {
            self.features
        };
        let (cuts, units, p) = (self.cfg.cuts, self.units, &self.cfg.split);
        let depth_ok: Vec<bool> = open.iter().map(|o| self.can_split_at(o.depth)).collect();
        open.par_iter_mut().zip(depth_ok).for_each(|(o, ok)| {
            o.best = if ok && o.count >= 2 {
                let view = NodeView {
                    hist: &o.hist,
                    sums: o.sums,
                    count: o.count,
                };
                best_split(view, cuts, features, units, p)
            } else {
                None
            };
        });
        if blocked {
            let mut mine = Vec::new();
            for o in open.iter() {
                SplitCandidate::write_option(&o.best, &mut mine);
            }
            let all = self.collective.allgather(&mine)?;
            let mut readers: Vec<&[u8]> = all.iter().map(|b| b.as_slice()).collect();
            for o in open.iter_mut() {
                let mut best = None;
                for r in readers.iter_mut() {
                    best = pick(best, SplitCandidate::read_option(r)?);
                }
                o.best = best;
            }
        }
        Ok(())
    }

    /// Reduce-scatter of a batch's histograms by feature block: afterwards only this
    /// worker's block of each node is the global sum.
    fn reduce_blocks(&mut self, hists: &mut [i64], nodes: usize, bound: u64) -> Result<()> {
        let w = self.width;
        let mut permuted = Vec::with_capacity(hists.len());
        let mut ranges = Vec::with_capacity(self.blocks.len());
        for b in &self.blocks {
            let start = permuted.len();
            for n in 0..nodes {
                permuted.extend_from_slice(&hists[n * w + b.start..n * w + b.end]);
            }
            ranges.push(start..permuted.len());
        }
        self.collective
            .reduce_scatter(&mut permuted, &ranges, bound)?;
        let own = &self.blocks[self.collective.rank()];
        let mine = &permuted[ranges[self.collective.rank()].clone()];
        for (n, part) in mine.chunks_exact(own.len().max(1)).enumerate().take(nodes) {
            hists[n * w + own.start..n * w + own.end].copy_from_slice(part);
        }
        Ok(())
    }

    fn set_node(&mut self, id: NodeId, sums: [i64; 2]) {
        let (g, h) = (
            sums[0] as f64 * self.units.grad,
            sums[1] as f64 * self.units.hess,
        );
        let w = leaf_weight(g, h, &self.cfg.split, self.cfg.split.lambda);
        let node = &mut self.nodes[id.index()];
        node.value = (self.cfg.learning_rate * w) as f32;
        node.cover = h;
    }

    fn root(&mut self) -> Result<Open> {
        let mut count = [0i64];
        let mut hist = vec![0i64; self.width];
        self.backend.build_histograms(&[NodeId::ROOT], &mut hist)?;
        self.collective.allreduce_sum(&mut hist, self.bound)?;
        let sums = node_sums(&hist, self.cfg.cuts);
        count[0] = self.root_local as i64;
        self.collective
            .allreduce_sum(&mut count, self.cfg.n_total)?;
        self.nodes.push(Node {
            split: None,
            value: 0.0,
            cover: 0.0,
        });
        self.set_node(NodeId::ROOT, sums);
        let mut open = [Open {
            id: NodeId::ROOT,
            depth: 0,
            sums,
            count: count[0] as u64,
            hist,
            best: None,
            owned_only: false,
        }];
        self.evaluate(&mut open)?;
        let [o] = open;
        Ok(o)
    }

    /// Splits every node of `batch` (each has a candidate); returns the evaluated children.
    fn split(&mut self, batch: Vec<Open>) -> Result<Vec<Open>> {
        let mut splits = Vec::with_capacity(batch.len());
        for o in &batch {
            let c = o
                .best
                .as_ref()
                .expect("only nodes with a candidate are split");
            let left = NodeId(self.nodes.len() as u32);
            let right = NodeId(left.0 + 1);
            for _ in 0..2 {
                self.nodes.push(Node {
                    split: None,
                    value: 0.0,
                    cover: 0.0,
                });
            }
            self.nodes[o.id.index()].split = Some(Split {
                feature: c.feature,
                rule: c.rule.clone(),
                default_left: c.default_left,
                left,
                right,
                gain: c.gain,
            });
            splits.push(NodeSplit {
                node: o.id,
                left,
                right,
                feature: c.feature,
                rule: c.rule.clone(),
                default_left: c.default_left,
            });
        }
        let local = self.backend.apply_splits(&splits)?;
        let mut counts: Vec<i64> = local
            .iter()
            .flat_map(|c| [c[0] as i64, c[1] as i64])
            .collect();
        self.collective
            .allreduce_sum(&mut counts, self.cfg.n_total)?;
        // build the smaller child (by global rows); its sibling is parent minus child
        let small_left: Vec<bool> = counts.chunks_exact(2).map(|c| c[0] <= c[1]).collect();
        let small: Vec<NodeId> = splits
            .iter()
            .zip(&small_left)
            .map(|(s, &l)| if l { s.left } else { s.right })
            .collect();
        let mut hists = vec![0i64; small.len() * self.width];
        self.backend.build_histograms(&small, &mut hists)?;
        // a node's bins sum at most its rows' values: a bound per node narrows the lanes
        let bounds: Vec<u64> = counts
            .chunks_exact(2)
            .zip(&small_left)
            .map(|(c, &l)| {
                (if l { c[0] } else { c[1] } as u64)
                    .saturating_mul(self.row_max)
                    .min(self.bound)
            })
            .collect();
        let blocked = self.collective.world_size() > 1
            && (batch.iter().any(|o| o.owned_only) || 8 * hists.len() >= BLOCK_THRESHOLD_BYTES);
        if blocked {
            let bound = bounds.iter().copied().max().unwrap_or(0);
            self.reduce_blocks(&mut hists, small.len(), bound)?;
        } else {
            self.collective
                .allreduce_segments(&mut hists, self.width, &bounds)?;
        }
        let mut children = Vec::with_capacity(2 * batch.len());
        for (i, (parent, small_hist)) in batch
            .into_iter()
            .zip(hists.chunks_exact(self.width))
            .enumerate()
        {
            let c = parent.best.expect("checked above");
            let mut sibling = parent.hist;
            for (s, &x) in sibling.iter_mut().zip(small_hist) {
                *s -= x;
            }
            let (lh, rh) = if small_left[i] {
                (small_hist.to_vec(), sibling)
            } else {
                (sibling, small_hist.to_vec())
            };
            let s = &splits[i];
            for (id, sums, count, hist) in [
                (s.left, c.left, counts[2 * i], lh),
                (s.right, c.right, counts[2 * i + 1], rh),
            ] {
                self.set_node(id, sums);
                children.push(Open {
                    id,
                    depth: parent.depth + 1,
                    sums,
                    count: count as u64,
                    hist,
                    best: None,
                    owned_only: blocked,
                });
            }
        }
        self.evaluate(&mut children)?;
        Ok(children)
    }

    fn depthwise(&mut self, root: Open) -> Result<Vec<Open>> {
        let mut frontier = vec![root];
        let mut leaves = Vec::new();
        let mut n_leaves = 1usize;
        loop {
            let (mut go, stay): (Vec<Open>, Vec<Open>) =
                frontier.into_iter().partition(|o| o.best.is_some());
            leaves.extend(stay);
            if self.cfg.max_leaves > 0 {
                let room = self.cfg.max_leaves - n_leaves;
                if go.len() > room {
                    go.sort_by(|a, b| {
                        let (ga, gb) =
                            (a.best.as_ref().unwrap().gain, b.best.as_ref().unwrap().gain);
                        gb.total_cmp(&ga).then(a.id.cmp(&b.id))
                    });
                    leaves.extend(go.drain(room..));
                    go.sort_by_key(|o| o.id);
                }
            }
            if go.is_empty() {
                return Ok(leaves);
            }
            n_leaves += go.len();
            frontier = self.split(go)?;
        }
    }

    fn lossguide(&mut self, root: Open) -> Result<Vec<Open>> {
        let mut open = vec![root];
        let mut n_leaves = 1usize;
        while self.cfg.max_leaves == 0 || n_leaves < self.cfg.max_leaves {
            let best = open
                .iter()
                .enumerate()
                .filter_map(|(i, o)| o.best.as_ref().map(|c| (i, c.gain, o.id)))
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.2.cmp(&a.2)));
            let Some((i, _, _)) = best else { break };
            let node = open.swap_remove(i);
            open.extend(self.split(vec![node])?);
            n_leaves += 1;
        }
        Ok(open)
    }
}

/// Histograms of a batch at least this large (bytes of i64) are reduce-scattered by feature
/// block instead of all-reduced: each worker then sends half as much, and only best-split
/// records travel back.
pub const BLOCK_THRESHOLD_BYTES: usize = 256 * 1024;

/// Contiguous feature blocks balanced by bins, one per worker: the histogram entry ranges
/// (i64 indices within a node) and this worker's features.
fn feature_blocks(
    cuts: &Cuts,
    workers: usize,
    rank: usize,
) -> (Vec<std::ops::Range<usize>>, std::ops::Range<usize>) {
    let offsets = cuts.offsets();
    let nf = cuts.n_features();
    let total = cuts.total_bins();
    let mut bounds = vec![0usize; workers + 1];
    let mut f = 0;
    for (b, slot) in bounds.iter_mut().enumerate().skip(1) {
        let target = total * b / workers;
        while f < nf && (offsets[f] as usize) < target {
            f += 1;
        }
        *slot = if b == workers { nf } else { f };
    }
    let entries = (0..workers)
        .map(|b| 2 * offsets[bounds[b]] as usize..2 * offsets[bounds[b + 1]] as usize)
        .collect();
    (entries, bounds[rank]..bounds[rank + 1])
}

/// Grows one tree for `setup.group`, over the features in `features`.
pub fn grow_tree(
    cfg: &GrowerConfig<'_>,
    backend: &mut dyn HistBackend,
    collective: &mut dyn Collective,
    setup: &TreeSetup,
    features: &[usize],
) -> Result<Tree> {
    let root_local = backend.start_tree(setup)?;
    let mut g = Grower {
        cfg,
        backend,
        collective,
        features,
        units: Units {
            grad: setup.scales.grad.hist_unit(),
            hess: setup.scales.hess.hist_unit(),
        },
        bound: setup.scales.hist_bound(cfg.n_total),
        width: 2 * cfg.cuts.total_bins(),
        row_max: setup.scales.grad.max_value.max(setup.scales.hess.max_value),
        blocks: Vec::new(),
        own_features: Vec::new(),
        nodes: Vec::new(),
        root_local,
    };
    let (blocks, own) = feature_blocks(cfg.cuts, g.collective.world_size(), g.collective.rank());
    g.blocks = blocks;
    g.own_features = features
        .iter()
        .copied()
        .filter(|f| own.contains(f))
        .collect();
    let root = g.root()?;
    let leaves = match cfg.policy {
        GrowPolicy::Depthwise => g.depthwise(root)?,
        GrowPolicy::Lossguide => g.lossguide(root)?,
    };
    if setup.scales.grad.drop.is_some() {
        // low-bit histograms chose the structure; leaf values come from exact sums
        let ids: Vec<NodeId> = leaves.iter().map(|o| o.id).collect();
        let local = g.backend.exact_sums(&ids)?;
        let mut sums: Vec<i64> = local.iter().flat_map(|s| [s[0], s[1]]).collect();
        g.collective
            .allreduce_sum(&mut sums, 1u64 << crate::quantise::EXACT_SUM_BITS)?;
        g.units = Units {
            grad: setup.scales.grad.exact_unit(),
            hess: setup.scales.hess.exact_unit(),
        };
        for (id, s) in ids.iter().zip(sums.chunks_exact(2)) {
            g.set_node(*id, [s[0], s[1]]);
        }
    }
    Ok(Tree { nodes: g.nodes })
}
