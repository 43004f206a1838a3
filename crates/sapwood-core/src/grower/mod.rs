//! The grower: one tree over any backend and any number of workers, in three parts:
//! - [`policy`]: which nodes expand next (depth-wise or loss-guided);
//! - [`store`]: node histograms and the parent − child subtraction, in pooled buffers;
//! - [`sync`]: how histograms become global and workers agree on splits.
//!
//! What is left here is the serial learner: build the smaller child's histogram, evaluate
//! splits with the shared pure functions, set leaf values, tell the backend to partition.
//! Every worker runs it on identical reduced histograms, so every worker takes the same
//! decisions.

pub mod policy;
pub mod store;
pub mod sync;

use rayon::prelude::*;

use crate::backend::{HistBackend, NodeSplit, TreeSetup};
use crate::collective::Collective;
use crate::data::cuts::Cuts;
use crate::error::Result;
use crate::hist::{node_sums, HistBin};
use crate::params::GrowPolicy;
use crate::split::{best_split, leaf_weight, NodeView, SplitCandidate, SplitParams, Units};
use crate::tree::{Node, NodeId, Split, Tree};

use policy::{Driver, Expandable};
use store::HistStore;
use sync::HistSync;

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
}

/// A node just created, before its best split is known.
struct Fresh {
    id: NodeId,
    depth: usize,
    count: u64,
    sums: HistBin,
}

/// One tree's serial learner on one worker.
struct Learner<'t> {
    cfg: &'t GrowerConfig<'t>,
    backend: &'t mut dyn HistBackend,
    sync: HistSync<'t>,
    store: &'t mut HistStore,
    units: Units,
    /// bound on every global histogram value
    bound: u64,
    /// largest histogram value one row adds
    row_max: u64,
    nodes: Vec<Node>,
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

    fn set_node(&mut self, id: NodeId, sums: HistBin) {
        let (g, h) = (
            sums[0] as f64 * self.units.grad,
            sums[1] as f64 * self.units.hess,
        );
        let w = leaf_weight(g, h, &self.cfg.split, self.cfg.split.lambda);
        let node = &mut self.nodes[id.index()];
        node.value = (self.cfg.learning_rate * w) as f32;
        node.cover = h;
    }

    /// Finds the best split of each new node (over the features whose sums are global,
    /// agreed over workers); returns those that can split and releases the others'
    /// histograms.
    fn evaluate(&mut self, fresh: Vec<Fresh>) -> Result<Vec<Expandable>> {
        let (cuts, units, p) = (self.cfg.cuts, self.units, &self.cfg.split);
        let features = self.sync.features();
        let store = &*self.store;
        let mut best: Vec<Option<SplitCandidate>> = fresh
            .par_iter()
            .map(|n| {
                let can = (self.cfg.max_depth == 0 || n.depth < self.cfg.max_depth) && n.count >= 2;
                can.then(|| {
                    let view = NodeView {
                        hist: store.get(n.id),
                        sums: n.sums,
                        count: n.count,
                    };
                    best_split(view, cuts, features, units, p)
                })
                .flatten()
            })
            .collect();
        self.sync.agree(&mut best)?;
        let mut out = Vec::with_capacity(fresh.len());
        for (n, b) in fresh.into_iter().zip(best) {
            match b {
                Some(best) => out.push(Expandable {
                    id: n.id,
                    depth: n.depth,
                    best,
                }),
                None => self.store.release(n.id),
            }
        }
        Ok(out)
    }

    fn root(&mut self, root_local: u64) -> Result<Vec<Expandable>> {
        let mut hist = self.store.take_batch(1);
        self.backend.build_histograms(&[NodeId::ROOT], &mut hist)?;
        self.sync.sum_whole(&mut hist, self.bound)?;
        let sums = node_sums(&hist, self.cfg.cuts.offsets());
        let mut count = [root_local as i64];
        self.sync.sum(&mut count, self.cfg.n_total)?;
        let id = self.new_node();
        self.set_node(id, sums);
        self.store.insert_copy(id, &hist);
        self.store.return_batch(hist);
        self.evaluate(vec![Fresh {
            id,
            depth: 0,
            count: count[0] as u64,
            sums,
        }])
    }

    /// Splits every node of `batch`; returns the children that can split in turn.
    fn split(&mut self, batch: Vec<Expandable>) -> Result<Vec<Expandable>> {
        let mut splits = Vec::with_capacity(batch.len());
        for e in &batch {
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
        }
        let local = self.backend.apply_splits(&splits)?;
        let mut counts: Vec<i64> = local
            .iter()
            .flat_map(|c| [c[0] as i64, c[1] as i64])
            .collect();
        self.sync.sum(&mut counts, self.cfg.n_total)?;
        // build the smaller child (by global rows); its sibling is parent minus child
        let small_left: Vec<bool> = counts.chunks_exact(2).map(|c| c[0] <= c[1]).collect();
        let small: Vec<NodeId> = splits
            .iter()
            .zip(&small_left)
            .map(|(s, &l)| if l { s.left } else { s.right })
            .collect();
        let width = self.store.width();
        let mut hists = self.store.take_batch(small.len());
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
        self.sync.sum_batch(&mut hists, width, &bounds)?;
        let mut fresh = Vec::with_capacity(2 * batch.len());
        for (i, (parent, built)) in batch
            .into_iter()
            .zip(hists.chunks_exact(width.max(1)))
            .enumerate()
        {
            let s = &splits[i];
            let (built_id, other_id) = if small_left[i] {
                (s.left, s.right)
            } else {
                (s.right, s.left)
            };
            self.store.split(parent.id, built_id, other_id, built);
            for (id, sums, count) in [
                (s.left, parent.best.left, counts[2 * i]),
                (s.right, parent.best.right, counts[2 * i + 1]),
            ] {
                self.set_node(id, sums);
                fresh.push(Fresh {
                    id,
                    depth: parent.depth + 1,
                    count: count as u64,
                    sums,
                });
            }
        }
        self.store.return_batch(hists);
        self.evaluate(fresh)
    }
}

/// Grows one tree for `setup.group` over the features in `features`; `store` lends its
/// histogram buffers (keep one per worker across trees).
pub fn grow_tree(
    cfg: &GrowerConfig<'_>,
    backend: &mut dyn HistBackend,
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
    }
    if setup.scales.grad.drop.is_some() {
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
            l.set_node(*id, [s[0], s[1]]);
        }
    }
    Ok(Tree { nodes: l.nodes })
}
