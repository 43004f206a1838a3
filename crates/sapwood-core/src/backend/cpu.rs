//! The CPU backend (rayon): the reference every other backend is tested against.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::kernel::{self, BinValue, HistValue, PartRows};
use super::roots;
use super::shard::{self, NodeSpans, ShardLimits};
use super::sparse_rows::SparseRows;
use super::teams::{self, Teams};
use super::{BackendFactory, GrowTree, HistBackend, NodeSplit, ShardData, TreeBackend, TreeSetup};
use crate::data::binned::{BinnedMatrix, Bins, BinsRef, HeldRows, RowMajor};
use crate::data::sparse_bins::SparseBinsRef;
use crate::detmath::pow2;
use crate::error::{Error, Result};
use crate::hash::{HashKey, Stream};
use crate::hist::{add, HistBin};
use crate::objective::{ftz, Objective};
use crate::occupancy;
use crate::quantise::{quantise_by, quantise_pairs, Scale};
use crate::split::SplitRule;
use crate::tree::{NodeId, Tree};

/// Rows each task of a pass over `n` rows' margins takes: a few tasks a thread, none
/// smaller than [`ROWS_PER_TASK`].
fn rows_a_task(n: usize) -> usize {
    n.div_ceil(TASKS_PER_THREAD * rayon::current_num_threads())
        .max(ROWS_PER_TASK)
}

/// The entries of ascending `rows` that lie in `range`, found by two binary searches.
fn rows_within(rows: &[u32], range: Range<usize>) -> &[u32] {
    let a = rows.partition_point(|&r| (r as usize) < range.start);
    let b = a + rows[a..].partition_point(|&r| (r as usize) < range.end);
    &rows[a..b]
}

/// The sums of `value(j)` over the entries j of `owner` by the node they name (`nodes` of
/// them; other entries name none).
#[inline(always)]
fn sum_owned(owner: &[u32], nodes: usize, value: impl Fn(usize) -> HistBin) -> Vec<HistBin> {
    let mut sums = vec![[0i64; 2]; nodes];
    for (j, &i) in owner.iter().enumerate() {
        if let Some(s) = sums.get_mut(i as usize) {
            *s = add(*s, value(j));
        }
    }
    sums
}

/// [`sum_owned`] of the exact quantisation of `grad` (one group a row), quantised a run of
/// rows at a time ([`quantise_pairs`]).
fn sum_owned_exact(
    owner: &[u32],
    nodes: usize,
    grad: &[[f32; 2]],
    factors: [f64; 2],
) -> Vec<HistBin> {
    let mut sums = vec![[0i64; 2]; nodes];
    let mut exact = [[0i64; 2]; NOISE_RUN];
    for (owner, grad) in owner.chunks(NOISE_RUN).zip(grad.chunks(NOISE_RUN)) {
        let exact = &mut exact[..grad.len()];
        quantise_pairs(grad, factors, exact);
        for (&i, &v) in owner.iter().zip(&*exact) {
            if let Some(s) = sums.get_mut(i as usize) {
                *s = add(*s, v);
            }
        }
    }
    sums
}

/// The gradients of `group`, one a row, from a shard's gradients `grad` (`k` a row) or,
/// with several groups, their copy group by group (current: see
/// [`Inputs::group_gradients`]).
fn gradients_of<'a>(
    grad: &'a [[f32; 2]],
    by_group: &'a [[f32; 2]],
    k: usize,
    group: usize,
) -> &'a [[f32; 2]] {
    if k == 1 {
        return grad;
    }
    let n = by_group.len() / k;
    &by_group[group * n..(group + 1) * n]
}

/// Rows whose noise is drawn in one run of hashes (two runs on the stack).
const NOISE_RUN: usize = 256;

/// What a tree's stochastic rounding of low-bit (g, h) needs: the gradients of the tree's
/// group, one a row (the shard's first row is global row `offset`), the two noise streams
/// and the scales.
struct LowBitDraw<'a> {
    grad: &'a [[f32; 2]],
    offset: u64,
    grad_key: HashKey,
    hess_key: HashKey,
    grad_scale: Scale,
    hess_scale: Scale,
    grad_factor: f64,
    hess_factor: f64,
}

impl LowBitDraw<'_> {
    /// `out[j] = put(low-bit (g, h) of shard row lo + j)`; the noise of a run of rows is
    /// drawn at once.
    fn rows<T>(&self, lo: usize, out: &mut [T], put: impl Fn([i64; 2]) -> T) {
        let (mut gn, mut hn) = ([0u64; NOISE_RUN], [0u64; NOISE_RUN]);
        let mut exact = [[0i64; 2]; NOISE_RUN];
        let factors = [self.grad_factor, self.hess_factor];
        for (run, out) in out.chunks_mut(NOISE_RUN).enumerate() {
            let first = lo + run * NOISE_RUN;
            let m = out.len();
            let global = self.offset + first as u64;
            self.grad_key.hash64_run(global, &mut gn[..m]);
            self.hess_key.hash64_run(global, &mut hn[..m]);
            let exact = &mut exact[..m];
            quantise_pairs(&self.grad[first..first + m], factors, exact);
            for (((o, &[g, h]), &gn), &hn) in out.iter_mut().zip(&*exact).zip(&gn).zip(&hn) {
                *o = put([
                    self.grad_scale.hist_value_drawn(g, gn),
                    self.hess_scale.hist_value_drawn(h, hn),
                ]);
            }
        }
    }
}

/// Parallel tasks a job is cut into per thread, so that a thread that finishes early can
/// take work from one that did not.
const TASKS_PER_THREAD: usize = 4;
/// Fewest rows of a histogram part (see [`parts_of`]).
const MIN_PART_ROWS: usize = 4_096;
/// Rows per parallel task for per-row work.
const ROWS_PER_TASK: usize = 16_384;
/// A feature group's share of a histogram that stays in a thread's L1 data cache (32 KiB
/// on most x86 cores, 48 KiB on recent ones): see [`cuts_of`].
const L1_GROUP_BYTES: usize = 32 * 1024;
/// Most threads a lone large node is cut among by features to keep its adds in L1: each
/// thread reads every row, which was measured to pay on two threads only (1M rows, 8-byte
/// packed histogram entries: the root's build 329 -> 244 ms over 40 trees, the mean of five
/// alternating pairs).
const MAX_L1_GROUP_THREADS: usize = 2;
/// Fewest rows of a node cut by features (see [`cuts_of`]).
const MIN_GROUP_ROWS: usize = 512;
/// Most memory the roots of a round's trees built before teams grow them may take
/// ([`CpuBackend::grow_round`]).
const ROUND_ROOTS_BYTES: usize = 64 << 20;
/// Fewest rows of a partition's parallel chunk.
const MIN_PARTITION_CHUNK: usize = 4_096;

/// What every tree of a shard reads and none changes: the bins (with their column-major
/// copy or sparse rows) and the round's gradients. Trees grown at once by teams
/// ([`super::teams`]) share it.
struct Inputs {
    binned: Arc<BinnedMatrix>,
    /// the same bins column-major, for routing rows by one feature; none for a sparse shard,
    /// which routes from the row-major bins: a copy of every bin would cost more memory than
    /// its rows' lists of uncommon bins many times over
    columns: Option<Bins>,
    /// the rows by their uncommon bins, where most of every row is its features' common
    /// bins: histograms are then built from these
    sparse: Option<SparseRows>,
    offsets: Vec<u32>,
    total_bins: usize,
    objective: Objective,
    row_offset: u64,
    /// the gradients, `groups` a row: the backend's own with one group, the host's
    /// (`set_gradients`) with several
    grad: Vec<[f32; 2]>,
    /// with several groups, the gradients group by group (each group's rows in order): a tree
    /// reads one group's, which row by row are a cache line apart
    by_group: Vec<[f32; 2]>,
    /// whether `by_group` holds the current gradients (computed, or `grad` transposed)
    by_group_current: bool,
}

impl Inputs {
    /// Rows in the shard.
    fn num_rows(&self) -> usize {
        self.binned.n_rows()
    }

    /// Makes `by_group` the current gradients group by group, where there are several
    /// groups and it is not yet: once a round, for every tree of the round.
    fn group_gradients(&mut self) {
        let k = self.objective.groups();
        if k == 1 || self.by_group_current {
            return;
        }
        let n = self.num_rows();
        crate::huge_pages::resize(&mut self.by_group, n * k, [0.0; 2]);
        if self.grad.len() == n * k {
            // rows of k groups to groups of n rows: the column copy's transpose
            transpose_into(&self.grad, n, k, &mut self.by_group);
        } else {
            // no gradients yet, computed or set: zero, as a fresh backend's were
            self.by_group.fill([0.0; 2]);
        }
        self.by_group_current = true;
    }

    /// Whether the root of a tree of `s` may be built in a pass shared with other trees'
    /// ([`roots`]): exact quantisation of every row (none sampled out) of a dense shard of
    /// u8 bins, with few enough features.
    fn root_in_pass(&self, s: &TreeSetup) -> bool {
        s.scales.grad.drop.is_none()
            && s.row_sample.keeps_all()
            && self.sparse.is_none()
            && roots::fits(self.binned.n_features())
            && matches!(self.binned.bins(), BinsRef::U8(_))
    }

    /// The roots of the trees of `pass` (at most [`roots::GROUPS_A_PASS`], each
    /// [`Inputs::root_in_pass`]) in one pass over the bins; `None` where the bins are not
    /// u8. The gradients by group must be current.
    fn roots_in_pass(&self, pass: &[TreeSetup]) -> Option<Vec<Vec<HistBin>>> {
        let BinsRef::U8(bins) = self.binned.bins() else {
            return None;
        };
        let grads: Vec<&[[f32; 2]]> = pass.iter().map(|t| self.gradients(t.group)).collect();
        let factors: Vec<[f64; 2]> = pass
            .iter()
            .map(|t| [pow2(t.scales.grad.shift), pow2(t.scales.hess.shift)])
            .collect();
        let mut hists = vec![vec![[0i64; 2]; self.total_bins]; pass.len()];
        roots::build_roots(bins, &self.offsets, &grads, &factors, &mut hists);
        Some(hists)
    }

    /// The gradients of `group`, one a row; with several groups, the copy group by group
    /// must be current ([`Inputs::group_gradients`]).
    fn gradients(&self, group: usize) -> &[[f32; 2]] {
        let k = self.objective.groups();
        debug_assert!(
            k == 1 || self.by_group_current,
            "gradients by group are current"
        );
        gradients_of(&self.grad, &self.by_group, k, group)
    }
}

/// One tree's state on a shard: its quantised gradients, its row partition and the buffers
/// its histograms are built in. A backend keeps one; teams growing a round's trees at once
/// keep one each.
struct TreeState {
    /// the values added to histograms for the current tree, unless they are packed
    gh: Vec<[i64; 2]>,
    /// low-bit (g, h) packed in one i64 when the shard's sums fit 32 bits each
    packed: Option<Vec<i64>>,
    /// the exact quantisation of the current tree: low-bit mode refits leaves from it,
    /// quantising the gradients again rather than keeping 16 more bytes a row
    exact: Option<(usize, i32, i32)>,
    /// in-bag rows grouped by node (see [`NodeSpans`])
    rows: Vec<u32>,
    /// where a partition puts the rows going right before they return to `rows`
    scratch: Vec<u32>,
    spans: NodeSpans,
    /// whether `spans` are those of the tree grown since the last `start_tree` and not yet
    /// added to the margins
    spans_current: bool,
    all_in_bag: bool,
    /// the node (an index into `owned`) of each row, from the last `exact_sums` of disjoint
    /// nodes since `start_tree`
    owners: Vec<u32>,
    /// the nodes `owners` names, while they are those of the current tree's last
    /// `exact_sums` (taken by the next `update_margins`)
    owned: Option<Vec<NodeId>>,
    /// histograms of the parts of large nodes, kept from level to level and tree to tree
    part_hists: Vec<Vec<HistBin>>,
    /// the same for packed low-bit histograms
    part_packed: Vec<Vec<i64>>,
    /// the setups of the round's trees (from `start_round`, or the trees a team took at
    /// once) while the gradients they were given with are current: the roots of trees
    /// still to start may be built ahead
    round: Vec<TreeSetup>,
    /// root histograms built ahead, with the setup of the tree each is for
    roots_ahead: Vec<(TreeSetup, Vec<HistBin>)>,
    /// the setup of the tree started last
    started: Option<TreeSetup>,
    /// every row's term of a node's sum of squares in the current tree, with its shift
    /// (made at the tree's first `square_sums`)
    squares: Option<(i32, Vec<u32>)>,
}

/// The CPU backend: a shard of binned rows with labels, weights, margins and gradients.
pub struct CpuBackend {
    inputs: Inputs,
    tree: TreeState,
    labels: Vec<f32>,
    weights: Option<Vec<f32>>,
    margins: Vec<f32>,
    /// with several groups, the leaf values a tree of group g adds to each row, at
    /// `g * n + row`, not yet added to `margins`: a row's margins are a cache line or
    /// more apart from the next row's, so adding one group's tree to them touched a line
    /// a row for every tree; the values of a round's trees are added together, row by row
    pending: Vec<f32>,
    /// per group, whether `pending` holds a tree's values for it
    pending_groups: Vec<bool>,
    /// the thread pools and tree states of teams growing a round's trees at once, kept
    /// from round to round
    teams: Teams<TreeState>,
}

impl CpuBackend {
    /// Adds the pending trees' values to the margins, each as its own rounded addition
    /// (as the trees were added one by one: a row's groups are distinct margins).
    fn add_pending(&mut self) {
        if !self.pending_groups.contains(&true) {
            return;
        }
        let k = self.inputs.objective.groups();
        let n = self.inputs.num_rows();
        let groups: Vec<usize> = (0..k).filter(|&g| self.pending_groups[g]).collect();
        let pending = &self.pending;
        let chunk = rows_a_task(n);
        self.margins
            .par_chunks_mut(chunk * k)
            .enumerate()
            .for_each(|(c, m)| {
                let lo = c * chunk;
                for (i, row) in m.chunks_exact_mut(k).enumerate() {
                    for &g in &groups {
                        row[g] = ftz(row[g] + pending[g * n + lo + i]);
                    }
                }
            });
        self.pending_groups.fill(false);
    }

    /// Grows the trees of `setups` (one a group) with `grow` on `count` teams, writing each
    /// tree's leaf values to its group's pending values, as `update_margins` of the trees
    /// one after another would. Every root is built first where they take at most
    /// `roots_budget` bytes; otherwise teams take up to four trees at once and build their
    /// roots in one pass.
    fn grow_round_in_teams(
        &mut self,
        setups: &[TreeSetup],
        grow: &GrowTree<'_>,
        count: usize,
        roots_budget: usize,
    ) -> Result<Vec<Tree>> {
        let (n, k) = (self.inputs.num_rows(), self.inputs.objective.groups());
        // values pending from an earlier round (host gradients do not add them) go first
        self.add_pending();
        self.tree.end_round();
        self.inputs.group_gradients();
        crate::huge_pages::resize(&mut self.pending, n * k, 0.0);
        let slots: Vec<Mutex<&mut [f32]>> = self.pending.chunks_mut(n).map(Mutex::new).collect();
        let trees: Vec<Mutex<Option<Tree>>> = setups.iter().map(|_| Mutex::new(None)).collect();
        // every root that can be is built first, four trees' in a pass over the bins on all
        // the threads: a team then takes one tree at a time, and the teams end together
        // (teams taking four trees at once to share the pass ended a tree apart)
        let ahead =
            setups.len() * self.inputs.total_bins * std::mem::size_of::<HistBin>() <= roots_budget;
        let mut roots: Vec<Option<Vec<HistBin>>> = vec![None; setups.len()];
        if ahead {
            let eligible: Vec<usize> = (0..setups.len())
                .filter(|&i| self.inputs.root_in_pass(&setups[i]))
                .collect();
            for pass in eligible.chunks(roots::GROUPS_A_PASS) {
                let these: Vec<TreeSetup> = pass.iter().map(|&i| setups[i]).collect();
                let built = self.inputs.roots_in_pass(&these).unwrap_or_default();
                for (&i, h) in pass.iter().zip(built) {
                    roots[i] = Some(h);
                }
            }
        }
        let roots: Vec<Mutex<Option<Vec<HistBin>>>> = roots.into_iter().map(Mutex::new).collect();
        let inputs = &self.inputs;
        let threads = rayon::current_num_threads();
        // every state holds no round here: the backend's ended above, a team's ends below
        let grow_some = |state: &mut TreeState, team: usize, range: Range<usize>| {
            // trees a team takes at once share a pass over the bins for their roots
            if range.len() >= 2 {
                state.round.extend_from_slice(&setups[range.clone()]);
            }
            let grown = range.into_iter().try_for_each(|i| {
                let s = &setups[i];
                if let Some(root) = roots[i].lock().unwrap_or_else(|p| p.into_inner()).take() {
                    state.roots_ahead.push((*s, root));
                }
                let tree = grow(
                    team,
                    s,
                    &mut TeamTree {
                        inputs,
                        tree: state,
                    },
                )?;
                let mut slot = slots[s.group].lock().unwrap_or_else(|p| p.into_inner());
                state.leaf_values(inputs, &tree, &mut slot);
                *trees[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(tree);
                Ok(())
            });
            state.end_round();
            grown
        };
        self.teams.run(
            count,
            threads,
            &mut self.tree,
            setups.len(),
            if ahead { 1 } else { roots::GROUPS_A_PASS },
            grow_some,
        )?;
        for s in setups {
            self.pending_groups[s.group] = true;
        }
        trees
            .into_iter()
            .map(|t| {
                t.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .ok_or_else(|| Error::Backend("a team left a tree of the round ungrown".into()))
            })
            .collect()
    }

    /// A backend over `s.binned` (global rows `s.row_offset..`), margins starting at the
    /// rows' own base margins when given, else at the base margin of each group.
    pub fn new(s: ShardData) -> Result<Self> {
        let shape = shard::validate(&s, ShardLimits::default())?;
        let (n, k) = (shape.n, shape.k);
        let sparse = SparseRows::of(s.binned.bins(), n, &s.offsets);
        if sparse.is_none() && s.binned.is_sparse() {
            return Err(Error::Backend(
                "bins held by column need their rows' entries in u32 indices".into(),
            ));
        }
        let columns = sparse
            .is_none()
            .then(|| transpose(s.binned.bins(), n, shape.nf));
        let margins = s.starting_margins()?;
        Ok(CpuBackend {
            inputs: Inputs {
                binned: s.binned,
                columns,
                sparse,
                offsets: s.offsets,
                total_bins: shape.total_bins,
                objective: s.objective,
                row_offset: s.row_offset,
                // with several groups, made by `set_gradients` only (the backend's own are
                // made group by group)
                grad: if k == 1 {
                    vec![[0.0; 2]; n]
                } else {
                    Vec::new()
                },
                by_group: Vec::new(),
                by_group_current: false,
            },
            tree: TreeState::new(),
            labels: s.labels,
            weights: s.weights,
            margins,
            pending: Vec::new(),
            pending_groups: vec![false; k],
            teams: Teams::default(),
        })
    }
}

impl Default for TreeState {
    fn default() -> Self {
        TreeState::new()
    }
}

impl TreeState {
    /// A state holding no tree.
    fn new() -> Self {
        TreeState {
            gh: Vec::new(),
            exact: None,
            packed: None,
            rows: Vec::new(),
            scratch: Vec::new(),
            spans: NodeSpans::new(),
            spans_current: false,
            all_in_bag: true,
            owners: Vec::new(),
            owned: None,
            part_hists: Vec::new(),
            part_packed: Vec::new(),
            round: Vec::new(),
            roots_ahead: Vec::new(),
            started: None,
            squares: None,
        }
    }

    /// Forgets the round's setups and the roots built ahead for them: the gradients they
    /// were built from are about to change.
    fn end_round(&mut self) {
        self.round.clear();
        self.roots_ahead.clear();
    }

    /// The started tree's root histogram from a pass shared with the round's next trees
    /// (built now, for this tree and up to three after it, unless an earlier tree's pass
    /// built it), or `None` where that pass does not apply (see
    /// [`Inputs::root_in_pass`]) or the tree is not one of the round's.
    fn root_ahead(&mut self, inp: &Inputs) -> Option<Vec<HistBin>> {
        let s = self.started?;
        if let Some(i) = self.roots_ahead.iter().position(|(t, _)| *t == s) {
            return Some(self.roots_ahead.swap_remove(i).1);
        }
        let at = self.round.iter().position(|t| *t == s)?;
        if !inp.root_in_pass(&s) {
            return None;
        }
        let pass: Vec<TreeSetup> = self.round[at..]
            .iter()
            .filter(|t| inp.root_in_pass(t))
            .take(roots::GROUPS_A_PASS)
            .copied()
            .collect();
        let hists = inp.roots_in_pass(&pass)?;
        let mut built = pass.into_iter().zip(hists);
        let first = built.next().map(|(_, h)| h);
        self.roots_ahead.extend(built);
        first
    }

    /// Writes to `out` (one a row of the shard) the value of the leaf of `tree` each row
    /// falls in, where `tree` is the one just grown with this state: a row in the bag by
    /// the leaf whose span holds it, any other routed by its bins (as `update_margins`
    /// finds them).
    fn leaf_values(&mut self, inp: &Inputs, tree: &Tree, out: &mut [f32]) {
        let n = inp.num_rows();
        assert_eq!(out.len(), n, "a value a row");
        let current = std::mem::replace(&mut self.spans_current, false);
        self.owned = None;
        let is_leaf = |id: usize| current && tree.nodes.get(id).is_some_and(|n| n.split.is_none());
        let leaves: Vec<(Range<usize>, f32)> = (0..tree.nodes.len())
            .filter(|&id| is_leaf(id))
            .filter_map(|id| {
                let span = self.spans.get(NodeId(id as u32)).ok()?;
                Some((span.range(), tree.nodes[id].value))
            })
            .collect();
        let covered: usize = leaves.iter().map(|(r, _)| r.len()).sum();
        if self.all_in_bag && self.rows.len() == n && covered == n {
            // every row lies in the span of exactly one leaf
            for (span, v) in leaves {
                for &r in &self.rows[span] {
                    out[r as usize] = v;
                }
            }
            return;
        }
        let mut leaf_of = vec![u32::MAX; n];
        let entries = self.spans.leaf_of_entries(self.rows.len(), is_leaf);
        for (&r, &leaf) in self.rows.iter().zip(&entries) {
            leaf_of[r as usize] = leaf;
        }
        let by_columns = if leaf_of.contains(&u32::MAX) {
            tree.leaves_of_columns(&inp.binned)
        } else {
            None
        };
        for (row, (o, &leaf)) in out.iter_mut().zip(&leaf_of).enumerate() {
            let leaf = match (leaf, &by_columns) {
                // out of bag this tree: route by bins
                (u32::MAX, Some(leaves)) => leaves[row],
                (u32::MAX, None) => tree.leaf_of_binned(&inp.binned, row),
                _ => NodeId(leaf),
            };
            *o = tree.value(leaf);
        }
    }

    fn start_tree(&mut self, inp: &Inputs, s: &TreeSetup) -> Result<u64> {
        shard::check_group(s.group, inp.objective.groups())?;
        let n = inp.num_rows();
        let grad = inp.gradients(s.group);
        let offset = inp.row_offset;
        let lowbit = s.scales.grad.drop.is_some();
        // packing needs every sum over this shard below 2^31 (g) and 2^32 (h)
        let fits = |max: u64, limit: u64| max.checked_mul(n as u64).is_some_and(|m| m < limit);
        let pack = lowbit
            && fits(s.scales.grad.max_value, 1 << 31)
            && fits(s.scales.hess.max_value, 1 << 32);
        let (gs, hs) = (s.scales.grad.shift, s.scales.hess.shift);
        if lowbit {
            let draw = LowBitDraw {
                grad,
                offset,
                grad_key: HashKey::new(s.seed, Stream::GradNoise, s.tree_index),
                hess_key: HashKey::new(s.seed, Stream::HessNoise, s.tree_index),
                grad_scale: s.scales.grad,
                hess_scale: s.scales.hess,
                grad_factor: pow2(gs),
                hess_factor: pow2(hs),
            };
            self.exact = Some((s.group, gs, hs));
            if pack {
                let mut packed = self.packed.take().unwrap_or_default();
                crate::huge_pages::resize(&mut packed, n, 0);
                packed
                    .par_chunks_mut(ROWS_PER_TASK)
                    .enumerate()
                    .for_each(|(t, p)| {
                        let lo = t * ROWS_PER_TASK;
                        draw.rows(lo, p, |[g, h]| kernel::pack(g, h));
                    });
                self.packed = Some(packed);
                self.gh = Vec::new();
            } else {
                self.packed = None;
                crate::huge_pages::resize(&mut self.gh, n, [0; 2]);
                self.gh
                    .par_chunks_mut(ROWS_PER_TASK)
                    .enumerate()
                    .for_each(|(t, gh)| {
                        let lo = t * ROWS_PER_TASK;
                        draw.rows(lo, gh, |v| v);
                    });
            }
        } else {
            self.exact = None;
            self.packed = None;
            crate::huge_pages::resize(&mut self.gh, n, [0; 2]);
            let factors = [pow2(gs), pow2(hs)];
            debug_assert_eq!(grad.len(), n);
            self.gh
                .par_chunks_mut(ROWS_PER_TASK)
                .zip(grad.par_chunks(ROWS_PER_TASK))
                .for_each(|(gh, grad)| quantise_pairs(grad, factors, gh));
        }
        self.all_in_bag = s.row_sample.keeps_all();
        let row_key = HashKey::new(s.seed, Stream::RowSample, s.tree_index);
        if self.all_in_bag {
            self.rows.clear();
            self.rows.extend(0..n as u32);
        } else {
            self.rows = (0..n as u32)
                .into_par_iter()
                .filter(|&i| s.row_sample.keeps(row_key.hash32(offset + i as u64)))
                .collect();
        }
        self.scratch.resize(self.rows.len(), 0);
        self.spans.reset(self.rows.len() as u32);
        self.spans_current = true;
        self.owned = None;
        self.started = Some(*s);
        self.squares = None;
        Ok(self.rows.len() as u64)
    }

    /// Builds the histograms of `nodes` into `out`; with `occupied`, also the bits of
    /// the bins their rows fall in where the shard is stored as sparse rows (returns
    /// whether it set them: [`TreeBackend::build_histograms_occupied`]).
    fn build_histograms(
        &mut self,
        inp: &Inputs,
        nodes: &[NodeId],
        out: &mut [HistBin],
        occupied: Option<&mut [u64]>,
    ) -> Result<bool> {
        let width = inp.total_bins;
        shard::check_hist_len(out.len(), nodes.len(), width)?;
        if nodes == [NodeId::ROOT] && self.spans.get(NodeId::ROOT)?.len as usize == inp.num_rows() {
            if let Some(root) = self.root_ahead(inp) {
                out.copy_from_slice(&root);
                return Ok(false);
            }
        }
        let n = inp.num_rows();
        let mut node_rows = Vec::with_capacity(nodes.len());
        for &node in nodes {
            let span = self.spans.get(node)?.range();
            // rows are kept in ascending order, so n of them are exactly 0..n
            node_rows.push(if span.len() == n {
                PartRows::All(0..n)
            } else {
                PartRows::Listed(&self.rows[span])
            });
        }
        if let Some(sparse) = &inp.sparse {
            let offsets = &inp.offsets;
            if let Some(bits) = &occupied {
                if bits.len() < nodes.len() * occupancy::words_for(width) {
                    return Err(Error::Backend(format!(
                        "{} words of occupied bits for {} nodes of {width} bins",
                        bits.len(),
                        nodes.len()
                    )));
                }
            }
            let marked = occupied.is_some();
            match self.packed.as_deref() {
                None => build_level_sparse(
                    &node_rows,
                    sparse,
                    offsets,
                    &self.gh,
                    width,
                    &mut self.part_hists,
                    out,
                    occupied,
                ),
                Some(p) => build_level_sparse(
                    &node_rows,
                    sparse,
                    offsets,
                    p,
                    width,
                    &mut self.part_packed,
                    out,
                    occupied,
                ),
            }
            return Ok(marked);
        }
        let lens: Vec<usize> = nodes
            .iter()
            .map(|&node| self.spans.get(node).map(|s| s.len as usize))
            .collect::<Result<_>>()?;
        let threads = rayon::current_num_threads();
        let all_rows = matches!(node_rows[..], [PartRows::All(_)]).then(|| {
            if self.packed.is_some() {
                std::mem::size_of::<i64>()
            } else {
                std::mem::size_of::<HistBin>()
            }
        });
        let u8_bins = matches!(inp.binned.bins(), BinsRef::U8(_));
        let cuts = cuts_of(&lens, threads, &inp.offsets, all_rows, u8_bins);
        let offsets = &inp.offsets;
        let (pool, packed_pool) = (&mut self.part_hists, &mut self.part_packed);
        let (gh, packed) = (&self.gh, self.packed.as_deref());
        match (inp.binned.bins(), packed) {
            (BinsRef::U8(b), None) => {
                build_level(&node_rows, &cuts, b, offsets, gh, width, pool, out)
            }
            (BinsRef::U16(b), None) => {
                build_level(&node_rows, &cuts, b, offsets, gh, width, pool, out)
            }
            (BinsRef::U8(b), Some(p)) => {
                build_level(&node_rows, &cuts, b, offsets, p, width, packed_pool, out)
            }
            (BinsRef::U16(b), Some(p)) => {
                build_level(&node_rows, &cuts, b, offsets, p, width, packed_pool, out)
            }
            // `new` refuses bins by column without sparse rows
            (BinsRef::Sparse(_), _) => {
                return Err(Error::Backend(
                    "bins held by column are built from their sparse rows".into(),
                ))
            }
        }
        Ok(false)
    }

    /// [`TreeBackend::build_histograms_occupied`] for the shard's team or whole backend:
    /// every bit set where the build did not set them.
    fn build_histograms_occupied(
        &mut self,
        inp: &Inputs,
        nodes: &[NodeId],
        out: &mut [HistBin],
        occupied: &mut [u64],
    ) -> Result<()> {
        if !self.build_histograms(inp, nodes, out, Some(&mut *occupied))? {
            occupied.fill(u64::MAX);
        }
        Ok(())
    }

    fn apply_splits(&mut self, inp: &Inputs, splits: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        let spans = self.spans.for_splits(splits, inp.binned.n_features())?;
        // node spans are disjoint (checked): carve the row array and its scratch into one
        // slice per split
        let mut order: Vec<usize> = (0..splits.len()).collect();
        order.sort_unstable_by_key(|&i| spans[i]);
        let mut slices = Vec::with_capacity(splits.len());
        let (mut rest, mut rest_scratch): (&mut [u32], &mut [u32]) =
            (&mut self.rows, &mut self.scratch);
        let mut consumed = 0;
        for &i in &order {
            let r = spans[i].range();
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(r.start - consumed);
            let (mine, tail) = tail.split_at_mut(r.len());
            let (_, stail) = std::mem::take(&mut rest_scratch).split_at_mut(r.start - consumed);
            let (smine, stail) = stail.split_at_mut(r.len());
            slices.push((mine, smine, i));
            rest = tail;
            rest_scratch = stail;
            consumed = r.end;
        }
        let n = inp.binned.n_rows();
        let (columns, bins, nf) = (&inp.columns, inp.binned.bins(), inp.binned.n_features());
        // lefts[k] is the count of slice k, which is split order[k] (the slices are in span
        // order, the splits in any)
        let mut lefts = vec![0usize; splits.len()];
        let work: Vec<_> = slices
            .into_iter()
            .zip(lefts.iter_mut())
            .map(|((rows, scratch, i), n_left)| (rows, scratch, i, n_left))
            .collect();
        let size = |(rows, ..): &(&mut [u32], &mut [u32], usize, &mut usize)| rows.len();
        largest_first(work, size, |_: &mut (), (rows, scratch, i, n_left)| {
            let s = &splits[i];
            // the split feature's column and the padding after it (the next column's
            // first bins, or the padding past the last column)
            let column = s.feature * n..(s.feature + 1) * n + kernel::COLUMN_PAD;
            *n_left = match (columns, bins) {
                (_, BinsRef::Sparse(b)) => partition_by_entries(rows, scratch, b, s),
                (Some(Bins::U8(c)), _) => partition_by(rows, scratch, &c[column], n, s),
                (Some(Bins::U16(c)), _) => partition_by(rows, scratch, &c[column], n, s),
                (None | Some(Bins::Sparse(_)), BinsRef::U8(b)) => {
                    partition_by_rows(rows, scratch, b, nf, s)
                }
                (None | Some(Bins::Sparse(_)), BinsRef::U16(b)) => {
                    partition_by_rows(rows, scratch, b, nf, s)
                }
            };
        });
        let mut moved = vec![[0u32; 2]; splits.len()];
        for (&i, &l) in order.iter().zip(&lefts) {
            moved[i] = [l as u32, spans[i].len - l as u32];
        }
        self.spans.record(splits, &spans, &moved)
    }

    fn square_sums(&mut self, inp: &Inputs, nodes: &[NodeId], shift: i32) -> Result<Vec<i64>> {
        if self.squares.as_ref().is_none_or(|(s, _)| *s != shift) {
            let group = self.started.map_or(0, |s| s.group);
            // the groups' copy is current: the gradients have not changed since the tree
            // started
            let grad = inp.gradients(group);
            let terms = shard::square_terms(grad, pow2(shift));
            self.squares = Some((shift, terms));
        }
        let terms = self.squares.as_ref().map_or(&[][..], |(_, t)| t);
        let rows = nodes
            .iter()
            .map(|&n| Ok(&self.rows[self.spans.get(n)?.range()]))
            .collect::<Result<Vec<_>>>()?;
        Ok(rows
            .into_par_iter()
            .map(|rows| shard::square_sum(rows, terms))
            .collect())
    }

    fn exact_sums(&mut self, inp: &Inputs, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        // the tree's group's gradients, as they are now
        // set again below for disjoint nodes
        self.owned = None;
        // the fields, not `self`: `owners` is taken below while these are borrowed
        let (all, node_spans) = (&self.rows, &self.spans);
        let rows = nodes
            .iter()
            .map(|&n| Ok(&all[node_spans.get(n)?.range()]))
            .collect::<Result<Vec<_>>>()?;
        // the groups' copy is current: the gradients have not changed since the tree started
        let grad = self
            .exact
            .map_or(&[][..], |(group, ..)| inp.gradients(group));
        let gh = &self.gh;
        let exact = self.exact;
        let mut spans = self.spans.of(nodes)?;
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[0].start + w[0].len > w[1].start) {
            // a node and one of its ancestors: each node on its own
            return Ok(rows
                .into_par_iter()
                .map(|rows| match exact {
                    Some((_, gs, hs)) => {
                        let (gf, hf) = (pow2(gs), pow2(hs));
                        rows.iter().fold([0i64; 2], |s, &r| {
                            let [g, h] = grad[r as usize];
                            [s[0] + quantise_by(g, gf), s[1] + quantise_by(h, hf)]
                        })
                    }
                    None => rows.iter().fold([0i64; 2], |s, &r| add(s, gh[r as usize])),
                })
                .collect());
        }
        // disjoint nodes (the leaves of a tree), by ranges of rows rather than node by node:
        // a node's rows are spread over the shard, so a range first marks which node each of
        // its rows is in (each node's rows in the range are ascending, found by two binary
        // searches), then reads its gradients in order; integer sums add up in any order.
        // Ranges are few and long, as in `update_margins`: each costs two searches a leaf,
        // and those miss the cache
        let n = inp.num_rows();
        let chunk = rows_a_task(n);
        // kept for `update_margins`, which adds these leaves' values to the same rows
        let mut owners = std::mem::take(&mut self.owners);
        owners.resize(n, u32::MAX);
        let sums = owners
            .par_chunks_mut(chunk)
            .enumerate()
            .map(|(c, owner)| {
                let (lo, hi) = (c * chunk, c * chunk + owner.len());
                owner.fill(u32::MAX);
                for (i, rows) in rows.iter().enumerate() {
                    for &r in rows_within(rows, lo..hi) {
                        owner[r as usize - lo] = i as u32;
                    }
                }
                match exact {
                    Some((_, gs, hs)) => {
                        sum_owned_exact(owner, rows.len(), &grad[lo..hi], [pow2(gs), pow2(hs)])
                    }
                    None => sum_owned(owner, rows.len(), |j| gh[lo + j]),
                }
            })
            .reduce(
                || vec![[0; 2]; rows.len()],
                |mut a, b| {
                    for (x, y) in a.iter_mut().zip(b) {
                        *x = add(*x, y);
                    }
                    a
                },
            );
        self.owners = owners;
        self.owned = Some(nodes.to_vec());
        Ok(sums)
    }
}

/// How many parts a node of `rows` rows is built in, when the level holds `level_rows` rows
/// and `threads` threads share it. A part has its own histogram (zeroed, then added to the
/// node's), so parts are only made where a thread would otherwise be idle: a level of many
/// nodes keeps its nodes whole, a lone large node is cut in one part per thread. A part
/// has at least [`MIN_PART_ROWS`] rows and at least `min_rows` (enough work to repay its
/// histogram).
fn parts_of(rows: usize, level_rows: usize, threads: usize, min_rows: usize) -> usize {
    if threads <= 1 {
        return 1;
    }
    let target = (level_rows / (TASKS_PER_THREAD * threads))
        .max(MIN_PART_ROWS)
        .max(min_rows);
    rows.div_ceil(target).clamp(1, threads)
}

/// Cuts `rows` into `parts` nearly equal consecutive pieces.
fn cut<'a>(rows: &PartRows<'a>, parts: usize) -> Vec<PartRows<'a>> {
    let len = rows.len();
    (0..parts)
        .map(|i| {
            let (lo, hi) = (len * i / parts, len * (i + 1) / parts);
            match rows {
                PartRows::Listed(r) => PartRows::Listed(&r[lo..hi]),
                PartRows::All(r) => PartRows::All(r.start + lo..r.start + hi),
            }
        })
        .collect()
}

/// How a node's histogram is shared among threads: cut by rows into parts (each its own
/// histogram, summed after) or by features into groups (each a range of the node's
/// histogram, nothing to sum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cuts {
    parts: usize,
    groups: usize,
}

/// How each node of a level (of `lens` rows each) is cut among `threads` threads, for the
/// features whose bins start at `offsets` (one more for the end). Nodes are cut by rows
/// ([`parts_of`]); where that leaves threads idle (a lone node too small to cut by rows, as
/// loss-guided growth builds one at a time) a node of [`MIN_GROUP_ROWS`] rows or more is
/// cut by features instead: each thread then reads every row but only its features' bins,
/// and no part histogram is zeroed or summed. So is a lone large node that holds every
/// row of the shard, read in order (the root; `all_rows` gives the bytes of a histogram
/// entry then), where its whole histogram overflows a thread's L1 data cache but a
/// feature group of one or two a thread fits ([`L1_GROUP_BYTES`]), on 2 to
/// [`MAX_L1_GROUP_THREADS`] threads: the adds then hit L1 (histograms sized in the node's
/// [`Layout`], padded where `u8_bins`). (Rows gathered by index are not worth reading
/// twice: loss-guided 8-bit builds took 1.5x as long cut that way.)
fn cuts_of(
    lens: &[usize],
    threads: usize,
    offsets: &[u32],
    all_rows: Option<usize>,
    u8_bins: bool,
) -> Vec<Cuts> {
    let nf = offsets.len() - 1;
    let width = offsets[nf] as usize;
    let level: usize = lens.iter().sum();
    // a part's histogram costs about a row's adds per feature's bins to zero and to add
    // back: a part of fewer rows than twice the bins per feature does not repay it
    let min_rows = 2 * width / nf.max(1);
    let parts: Vec<usize> = lens
        .iter()
        .map(|&len| parts_of(len, level, threads, min_rows))
        .collect();
    let tasks: usize = parts.iter().sum();
    // the groups `by_features` will cut: one a thread, or two a thread (each thread reads
    // the rows twice, in order) where one does not fit, each within L1 (a feature wider
    // than a share makes them unequal, or fewer); 16-byte entries of 28 features of 256
    // bins on two threads took 3.43 s instead of 3.55 s in four groups (1M rows, 100
    // rounds, depth 8, a Zen 4)
    let l1_groups: Option<usize> = all_rows.and_then(|value_bytes| {
        if lens.len() != 1 || !(2..=MAX_L1_GROUP_THREADS).contains(&threads) {
            return None;
        }
        let layout = Layout::of(lens[0], offsets, u8_bins);
        if layout.len(offsets, 0..nf) * value_bytes <= L1_GROUP_BYTES {
            return None;
        }
        (1..=2).map(|m| m * threads).find(|&count| {
            let groups = feature_groups(offsets, count);
            groups.len() == count
                && groups
                    .iter()
                    .all(|g| layout.len(offsets, g.clone()) * value_bytes <= L1_GROUP_BYTES)
        })
    });
    lens.iter()
        .zip(parts)
        .map(|(&len, parts)| {
            let idle = parts == 1 && tasks < threads && len >= MIN_GROUP_ROWS;
            match l1_groups {
                Some(groups) if parts > 1 => Cuts { parts: 1, groups },
                _ if idle => Cuts {
                    parts: 1,
                    groups: threads.min(nf).max(1),
                },
                _ => Cuts { parts, groups: 1 },
            }
        })
        .collect()
}

/// `groups` consecutive feature ranges covering `0..nf` with nearly equal numbers of bins
/// (by `offsets`); fewer when a feature holds more than a share.
fn feature_groups(offsets: &[u32], groups: usize) -> Vec<Range<usize>> {
    let nf = offsets.len() - 1;
    let total = offsets[nf] as u64;
    let mut out = Vec::with_capacity(groups);
    let mut first = 0;
    for k in 1..groups {
        // the first feature starting at or past the k-th share of the bins
        let goal = (total * k as u64 / groups as u64) as u32;
        let f = offsets[..nf].partition_point(|&o| o < goal).max(first + 1);
        if f >= nf {
            break;
        }
        out.push(first..f);
        first = f;
    }
    out.push(first..nf);
    out
}

/// `hist` (a node's histogram) cut into `groups` feature groups ([`feature_groups`]):
/// each group's features with its range of the bins.
fn by_features<'a, V>(
    mut hist: &'a mut [V],
    offsets: &[u32],
    groups: usize,
) -> Vec<(Range<usize>, &'a mut [V])> {
    feature_groups(offsets, groups)
        .into_iter()
        .map(|g| {
            let len = (offsets[g.end] - offsets[g.start]) as usize;
            let (mine, rest) = std::mem::take(&mut hist).split_at_mut(len);
            hist = rest;
            (g, mine)
        })
        .collect()
}

/// Buffers of `width` entries, at least `count` of them (kept for the next call).
fn part_buffers<V: HistValue>(pool: &mut Vec<Vec<V>>, count: usize, width: usize) {
    if pool.len() < count {
        pool.resize_with(count, Vec::new);
    }
    for b in pool.iter_mut().take(count) {
        b.resize(width, V::default());
    }
}

/// Each node's buffers in a part pool handed out in node order, from how many each took.
fn pool_ranges(taken: impl Iterator<Item = usize>) -> Vec<Range<usize>> {
    let mut first = 0;
    taken
        .map(|n| {
            first += n;
            first - n..first
        })
        .collect()
}

/// Where a build's adds go: to each feature's bins at its offset, or (u8 bins) to padded
/// entries, [`kernel::PADDED_BINS`] a feature, copied to their place after: the padded
/// kernels need no load of a bin or an offset for an add.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Offsets,
    Padded,
}

impl Layout {
    /// The layout of a node of `rows` rows in a shard of `u8_bins` or not, whose features'
    /// bins start at `offsets`: padded where the bins are bytes, no feature is wider than
    /// its padded entries, the padding at most doubles the histogram (its entries are
    /// zeroed for every node, and only the used ones are ever added to or copied) and the
    /// node has rows enough to repay the copy.
    fn of(rows: usize, offsets: &[u32], u8_bins: bool) -> Layout {
        let nf = offsets.len() - 1;
        let padded = nf * kernel::PADDED_BINS;
        // a feature wider than its padded entries would keep bins the copy never writes
        // (byte bins never reach them, but the histogram must be overwritten whole)
        let fits = offsets
            .windows(2)
            .all(|w| (w[1] - w[0]) as usize <= kernel::PADDED_BINS);
        if u8_bins
            && nf > 0
            && fits
            && padded <= MAX_PADDING * offsets[nf] as usize
            && rows >= MIN_PADDED_ROWS
        {
            Layout::Padded
        } else {
            Layout::Offsets
        }
    }

    /// Entries of a histogram of features `feats`.
    fn len(self, offsets: &[u32], feats: Range<usize>) -> usize {
        match self {
            Layout::Offsets => (offsets[feats.end] - offsets[feats.start]) as usize,
            Layout::Padded => feats.len() * kernel::PADDED_BINS,
        }
    }

    /// Zeroes `hist` (a histogram of features `feats` in this layout) and accumulates
    /// `rows` into it.
    fn build<B: BinValue, V: HistValue>(
        self,
        rows: &PartRows<'_>,
        bins: &[B],
        offsets: &[u32],
        feats: Range<usize>,
        values: &[V],
        hist: &mut [V],
    ) {
        hist.fill(V::default());
        let nf = offsets.len() - 1;
        match (self, rows) {
            (Layout::Offsets, PartRows::Listed(r)) => {
                kernel::accumulate(r, bins, offsets, feats, values, hist)
            }
            (Layout::Offsets, PartRows::All(r)) => {
                kernel::accumulate_all(r.clone(), bins, offsets, feats, values, hist)
            }
            (Layout::Padded, rows) => {
                let bytes = B::bytes(bins).expect("padded only where the bins are bytes");
                match rows {
                    PartRows::Listed(r) => {
                        kernel::accumulate_padded(r, bytes, nf, feats, values, hist)
                    }
                    PartRows::All(r) => {
                        kernel::accumulate_all_padded(r.clone(), bytes, nf, feats, values, hist)
                    }
                }
            }
        }
    }

    /// Writes `hist` (features `feats` in this layout) as (Σg, Σh) to `out`, their bins of a
    /// node's histogram.
    fn place<V: HistValue>(
        self,
        hist: &[V],
        offsets: &[u32],
        feats: Range<usize>,
        out: &mut [HistBin],
    ) {
        match self {
            Layout::Offsets => place_bins(hist, out),
            Layout::Padded => {
                let base = offsets[feats.start];
                for (f, padded) in feats.zip(hist.chunks_exact(kernel::PADDED_BINS)) {
                    let bins = (offsets[f] - base) as usize..(offsets[f + 1] - base) as usize;
                    for (o, &v) in out[bins].iter_mut().zip(padded) {
                        *o = v.bin();
                    }
                }
            }
        }
    }
}

/// Fewest rows of a node built padded ([`Layout::of`]): below that, zeroing and copying its
/// histogram costs more than its adds save.
const MIN_PADDED_ROWS: usize = 512;
/// How many times its histogram's bins a padded build may take.
const MAX_PADDING: usize = 2;

/// Where a piece of a level's build goes: a node built whole (or a feature group of one)
/// goes to its place in the output, in place where its entries are (Σg, Σh) laid out by
/// offsets, else through a buffer of its thread; the parts of a node cut by rows wait in
/// the pool to be summed.
enum Target<'a, V> {
    Node(&'a mut [HistBin]),
    Part(&'a mut [V]),
}

/// The histograms of every node of a level, in `out` one after another, from each row's
/// `values` ((Σg, Σh) entries, or low-bit ones packed in one i64). A node cut by features
/// fills its ranges of `out`; a node cut by rows builds its parts in `pool` (so the pool
/// holds what those nodes need, not a buffer per node of the level), then sums them into
/// its place.
#[allow(clippy::too_many_arguments)]
fn build_level<B: BinValue, V: HistValue>(
    node_rows: &[PartRows<'_>],
    cuts: &[Cuts],
    bins: &[B],
    offsets: &[u32],
    values: &[V],
    width: usize,
    pool: &mut Vec<Vec<V>>,
    out: &mut [HistBin],
) {
    let nf = offsets.len() - 1;
    let u8_bins = B::bytes(bins).is_some();
    let layout = |rows: &PartRows<'_>| Layout::of(rows.len(), offsets, u8_bins);
    // only nodes of MIN_PART_ROWS rows or more are cut by rows: the pool's layout is theirs
    let part_layout = Layout::of(MIN_PART_ROWS, offsets, u8_bins);
    let cut_parts: usize = cuts.iter().filter(|c| c.parts > 1).map(|c| c.parts).sum();
    let all_padded = offsets
        .iter()
        .enumerate()
        .all(|(f, &o)| o as usize == f * kernel::PADDED_BINS);
    part_buffers(pool, cut_parts, part_layout.len(offsets, 0..nf));
    {
        let mut bufs = pool.iter_mut();
        let mut work: Vec<(PartRows<'_>, Range<usize>, Target<'_, V>)> = Vec::new();
        for ((o, rows), c) in out.chunks_mut(width.max(1)).zip(node_rows).zip(cuts) {
            if c.parts == 1 {
                for (g, h) in by_features(o, offsets, c.groups) {
                    work.push((rows.clone(), g, Target::Node(h)));
                }
                continue;
            }
            for piece in cut(rows, c.parts) {
                let buf = bufs.next().expect("a buffer per part of a cut node");
                work.push((piece, 0..nf, Target::Part(buf.as_mut_slice())));
            }
        }
        // the level then ends with its smallest pieces, not with whichever large one the
        // split of the list left last
        largest_first(
            work,
            |(rows, feats, _)| rows.len() * feats.len(),
            |buf: &mut Vec<V>, (rows, feats, target)| match target {
                Target::Part(h) => part_layout.build(&rows, bins, offsets, feats, values, h),
                Target::Node(o) => {
                    let layout = layout(&rows);
                    // padded entries are the node's own where every feature has
                    // PADDED_BINS bins
                    if layout == Layout::Offsets || all_padded {
                        if let Some(h) = V::in_place(o) {
                            return layout.build(&rows, bins, offsets, feats, values, h);
                        }
                    }
                    buf.resize(layout.len(offsets, feats.clone()), V::default());
                    layout.build(&rows, bins, offsets, feats.clone(), values, buf);
                    layout.place(buf, offsets, feats, o);
                }
            },
        );
    }
    let taken = cuts.iter().map(|c| if c.parts > 1 { c.parts } else { 0 });
    sum_parts(taken, pool, width, out, |sum, o| {
        part_layout.place(sum, offsets, 0..nf, o)
    });
}

/// Sums the parts of each node cut by rows (`taken` parts of `pool` a node, in node order;
/// 0 for a node built whole) and has `place` write the sum to the node's histogram in `out`.
fn sum_parts<V: HistValue>(
    taken: impl Iterator<Item = usize>,
    pool: &[Vec<V>],
    width: usize,
    out: &mut [HistBin],
    place: impl Fn(&[V], &mut [HistBin]) + Sync,
) {
    out.par_chunks_mut(width.max(1))
        .zip(pool_ranges(taken))
        .filter(|(_, r)| !r.is_empty())
        .for_each_init(Vec::new, |sum: &mut Vec<V>, (o, r)| {
            let (head, rest) = pool[r].split_first().expect("a cut node has parts");
            sum.clear();
            sum.extend_from_slice(head);
            for part in rest {
                for (x, &y) in sum.iter_mut().zip(part) {
                    x.add(y);
                }
            }
            place(sum, o);
        });
}

/// [`build_level`] from sparse rows: each node built whole or cut by rows into parts
/// (never by features: a row's entries span them all), every histogram at full width.
/// With `occupied` (zeroed, [`occupancy::words_for`]`(width)` words a node), `out` arrives
/// zeroed, and the bits of the bins the node's rows fall in are set: all of a node cut
/// into parts (a large node, whose rows fall nearly everywhere).
#[allow(clippy::too_many_arguments)]
fn build_level_sparse<V: HistValue>(
    node_rows: &[PartRows<'_>],
    sparse: &SparseRows,
    offsets: &[u32],
    values: &[V],
    width: usize,
    pool: &mut Vec<Vec<V>>,
    out: &mut [HistBin],
    occupied: Option<&mut [u64]>,
) {
    let threads = rayon::current_num_threads();
    let level: usize = node_rows.iter().map(PartRows::len).sum();
    // a part's histogram is zeroed, filled in and added back whole: it must add more
    let min_rows = 2 * width / sparse.entries_per_row();
    let parts: Vec<usize> = node_rows
        .iter()
        .map(|rows| parts_of(rows.len(), level, threads, min_rows))
        .collect();
    part_buffers(pool, parts.iter().filter(|&&p| p > 1).sum(), width);
    {
        let words = occupancy::words_for(width);
        let mut node_bits: Vec<Option<&mut [u64]>> = match occupied {
            Some(bits) => bits.chunks_mut(words.max(1)).map(Some).collect(),
            None => Vec::new(),
        };
        node_bits.resize_with(node_rows.len(), || None);
        let mut bufs = pool.iter_mut();
        type Work<'w, V> = (PartRows<'w>, Target<'w, V>, Option<&'w mut [u64]>);
        let mut work: Vec<Work<'_, V>> = Vec::new();
        for (((o, rows), &p), bits) in out
            .chunks_mut(width.max(1))
            .zip(node_rows)
            .zip(&parts)
            .zip(node_bits)
        {
            if p == 1 {
                work.push((rows.clone(), Target::Node(o), bits));
                continue;
            }
            if let Some(bits) = bits {
                bits.fill(u64::MAX);
            }
            for piece in cut(rows, p) {
                let buf = bufs.next().expect("a buffer per part of a cut node");
                work.push((piece, Target::Part(buf.as_mut_slice()), None));
            }
        }
        largest_first(
            work,
            |(rows, _, _)| rows.len(),
            |buf: &mut Vec<V>, (rows, target, bits)| match target {
                Target::Part(h) => sparse.build(&rows, offsets, values, h, None, false),
                Target::Node(o) => match V::in_place(o) {
                    Some(h) => {
                        let zeroed = bits.is_some();
                        sparse.build(&rows, offsets, values, h, bits, zeroed)
                    }
                    None => {
                        buf.resize(width, V::default());
                        sparse.build(&rows, offsets, values, buf, bits, false);
                        place_bins(buf, o);
                    }
                },
            },
        );
    }
    let taken = parts.iter().map(|&p| if p > 1 { p } else { 0 });
    sum_parts(taken, pool, width, out, place_bins);
}

/// Writes entries as (Σg, Σh) to the same places of `out`.
fn place_bins<V: HistValue>(hist: &[V], out: &mut [HistBin]) {
    for (o, &v) in out.iter_mut().zip(hist) {
        *o = v.bin();
    }
}

/// Runs `task` on every item of `work`, largest `size` first (items of equal size in their
/// order), each thread of the pool taking the next item as it finishes one (with a scratch
/// buffer of its own): the threads then end nearly together, as rayon's halving of a list
/// does not promise.
fn largest_first<T: Send, B: Default>(
    mut work: Vec<T>,
    size: impl Fn(&T) -> usize,
    task: impl Fn(&mut B, T) + Sync,
) {
    work.sort_by_key(|t| std::cmp::Reverse(size(t)));
    let threads = rayon::current_num_threads().min(work.len());
    if threads <= 1 {
        let mut buf = B::default();
        return work.into_iter().for_each(|t| task(&mut buf, t));
    }
    let items: Vec<std::sync::Mutex<Option<T>>> = work
        .into_iter()
        .map(|t| std::sync::Mutex::new(Some(t)))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    (0..threads).into_par_iter().for_each(|_| {
        let mut buf = B::default();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(item) = items.get(i) else { break };
            // each index is claimed once: the lock is never contended
            let t = item
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .expect("an item is taken once");
            task(&mut buf, t);
        }
    });
}

/// Stable partition of `rows` (rows going left first) by `split`, which moves the rows of
/// a slice going left to its front, in order, copies the others to the front of the
/// scratch slice it is given and returns how many went left ([`kernel::split_rows`]);
/// `scratch` is as long as `rows`. Large nodes go in parallel chunks.
fn partition(
    rows: &mut [u32],
    scratch: &mut [u32],
    split: impl Fn(&mut [u32], &mut [u32]) -> usize + Sync,
) -> usize {
    let len = rows.len();
    let chunk = (len / (TASKS_PER_THREAD * rayon::current_num_threads())).max(MIN_PARTITION_CHUNK);
    if len <= chunk {
        let n_left = split(rows, scratch);
        rows[n_left..].copy_from_slice(&scratch[..len - n_left]);
        return n_left;
    }
    let lefts: Vec<usize> = rows
        .par_chunks_mut(chunk)
        .zip(scratch.par_chunks_mut(chunk))
        .map(|(r, s)| split(r, s))
        .collect();
    // each chunk's left rows move down to follow the previous chunks' (a move never reaches
    // rows of a later chunk); then the right rows come back from the scratch
    let mut pos = 0;
    for (c, &nl) in lefts.iter().enumerate() {
        let start = c * chunk;
        rows.copy_within(start..start + nl, pos);
        pos += nl;
    }
    let n_left = pos;
    for (c, &nl) in lefts.iter().enumerate() {
        let start = c * chunk;
        let nr = (len - start).min(chunk) - nl;
        rows[pos..pos + nr].copy_from_slice(&scratch[start..start + nr]);
        pos += nr;
    }
    n_left
}

/// Partitions `rows` (row indices below `n`) by `split` of `column` (the split feature's
/// bins of every row, followed by at least [`kernel::COLUMN_PAD`] more entries).
#[allow(unsafe_code)]
fn partition_by<B: BinValue>(
    rows: &mut [u32],
    scratch: &mut [u32],
    column: &[B],
    n: usize,
    split: &NodeSplit,
) -> usize {
    assert!(
        column.len() >= n + kernel::COLUMN_PAD,
        "a padded column of every row"
    );
    let missing_left = split.default_left;
    // SAFETY (every split below): the backend's rows are a permutation of some of 0..n,
    // made by `start_tree` and only ever reordered by this partition, and the column holds
    // n bins and the padding (asserted above)
    match &split.rule {
        // the missing bin 0 goes left exactly when `default_left`: bin <= t then holds for
        // it, and bin - 1 < t (wrapping) never does
        SplitRule::Numeric { bin } => {
            let t = *bin as usize;
            partition(rows, scratch, |r, s| unsafe {
                kernel::split_rows_numeric(r, s, column, t, missing_left)
            })
        }
        SplitRule::Categorical { left } => partition(rows, scratch, |r, s| unsafe {
            kernel::split_rows_categorical(r, s, column, left, missing_left)
        }),
    }
}

/// [`partition_by`] reading the split feature's bins from the row-major `bins` (`nf` a
/// row), as a sparse shard does.
#[allow(unsafe_code)]
fn partition_by_rows<B: BinValue>(
    rows: &mut [u32],
    scratch: &mut [u32],
    bins: &[B],
    nf: usize,
    split: &NodeSplit,
) -> usize {
    let (f, missing_left, rule) = (split.feature, split.default_left, &split.rule);
    assert!(f < nf, "the split feature within a row");
    let n = bins.len() / nf;
    assert!(
        rows.iter().all(|&r| (r as usize) < n),
        "rows within the shard"
    );
    partition(rows, scratch, |r, s| {
        // SAFETY: every row r < n, so r * nf + f < bins.len() (asserted above)
        unsafe {
            kernel::split_rows_at(
                r,
                s,
                bins,
                |r| r * nf + f,
                |b| rule.goes_left(b as u16, missing_left),
            )
        }
    })
}

/// [`partition_by`] reading the split feature's bins from its entries in `bins` (held by
/// column): a node's rows come ascending, so each is a step of a cursor along the column.
fn partition_by_entries(
    rows: &mut [u32],
    scratch: &mut [u32],
    bins: SparseBinsRef<'_>,
    split: &NodeSplit,
) -> usize {
    let (missing_left, rule) = (split.default_left, &split.rule);
    let column = bins.column(split.feature);
    partition(rows, scratch, |rows, right| {
        let mut cursor = column.cursor();
        let (mut nl, mut nr) = (0, 0);
        for i in 0..rows.len() {
            let r = rows[i];
            if rule.goes_left(cursor.bin(r as usize), missing_left) {
                rows[nl] = r;
                nl += 1;
            } else {
                right[nr] = r;
                nr += 1;
            }
        }
        nl
    })
}

/// Leaf values of trees not yet added to the margins ([`CpuBackend::add_pending`]).
#[derive(Clone, Copy)]
struct Pending<'a> {
    /// `g * n + row`
    values: &'a [f32],
    /// whether group g has values
    groups: &'a [bool],
}

/// Rows of a tile of the fused gradient pass ([`gradients_by_group`]): their gradients are
/// written to a buffer (256 rows of 50 classes: 100 KiB) and from it to each group's column.
const GRADIENT_TILE: usize = 256;

/// With several groups: adds the pending leaf values to the margins as
/// [`CpuBackend::add_pending`] does, computes every row's gradients as
/// [`shard::gradients_into`] does and writes them group by group to `by_group` (`n` rows
/// a group), in one pass over the rows, a tile at a time, where there were three (adding,
/// computing row-major, transposing). Returns each group's largest |g| and h.
fn gradients_by_group(
    objective: &Objective,
    labels: &[f32],
    weights: Option<&[f32]>,
    margins: &mut [f32],
    pending: Pending<'_>,
    by_group: &mut [[f32; 2]],
) -> Vec<[f32; 2]> {
    let k = objective.groups();
    let n = labels.len();
    let zero = || vec![[0.0f32; 2]; k];
    if n == 0 || k == 0 {
        return zero();
    }
    let groups: Vec<usize> = (0..k).filter(|&g| pending.groups[g]).collect();
    let block = ROWS_PER_TASK;
    let pieces = column_pieces(&mut by_group[..n * k], n, block);
    margins
        .par_chunks_mut(block * k)
        .zip(pieces.into_par_iter())
        .enumerate()
        .map(|(task, (m, mut cols))| {
            let lo = task * block;
            let rows = m.len() / k;
            let mut max = zero();
            let mut buf = vec![[0.0f32; 2]; GRADIENT_TILE * k];
            for first in (0..rows).step_by(GRADIENT_TILE) {
                let t = GRADIENT_TILE.min(rows - first);
                let m = &mut m[first * k..(first + t) * k];
                // a group's values of the tile are consecutive: read group by group
                for &gr in &groups {
                    let values = &pending.values[gr * n + lo + first..][..t];
                    for (row, &v) in m.chunks_exact_mut(k).zip(values) {
                        row[gr] = ftz(row[gr] + v);
                    }
                }
                let y = &labels[lo + first..lo + first + t];
                let w = weights.map(|w| &w[lo + first..lo + first + t]);
                let out = &mut buf[..t * k];
                shard::rows_of_groups(objective, m, y, w, out, &mut max);
                for (c, col) in cols.iter_mut().enumerate() {
                    for (j, v) in col[first..first + t].iter_mut().enumerate() {
                        *v = out[j * k + c];
                    }
                }
            }
            max
        })
        .reduce(zero, shard::larger_of)
}

/// `columns` (columns of `n` entries, one after another) cut into the pieces each task of
/// `block` rows writes: task t's rows of every column, in column order.
fn column_pieces<B>(columns: &mut [B], n: usize, block: usize) -> Vec<Vec<&mut [B]>> {
    let mut pieces: Vec<Vec<&mut [B]>> = (0..n.div_ceil(block)).map(|_| Vec::new()).collect();
    for col in columns.chunks_mut(n) {
        for (piece, p) in col.chunks_mut(block).zip(pieces.iter_mut()) {
            p.push(piece);
        }
    }
    pieces
}

/// Writes the column-major copy of row-major `b` (`n` rows of `nf`) to the first `n * nf`
/// entries of `out`: each task reads a block of rows once, in order, and writes its piece of
/// every column.
fn transpose_into<B: Copy + Send + Sync>(b: &[B], n: usize, nf: usize, out: &mut [B]) {
    if n == 0 || nf == 0 {
        return;
    }
    let block = ROWS_PER_TASK;
    let pieces = column_pieces(&mut out[..n * nf], n, block);
    pieces
        .into_par_iter()
        .enumerate()
        .for_each(|(i, mut cols)| {
            let rows = &b[i * block * nf..];
            let len = cols.first().map_or(0, |c| c.len());
            // a tile of features at a time, row by row: each row's piece is a cache
            // line read once, and the tile's columns are written in order (a whole
            // column at a time reads a line per row, which a wide block evicts before
            // the next feature's turn)
            for (t, tile) in cols.chunks_mut(TRANSPOSE_TILE).enumerate() {
                let first = t * TRANSPOSE_TILE;
                for r in 0..len {
                    let row = &rows[r * nf + first..r * nf + first + tile.len()];
                    for (col, &v) in tile.iter_mut().zip(row) {
                        col[r] = v;
                    }
                }
            }
        });
}

/// Features a transpose copies together ([`transpose_into`]).
const TRANSPOSE_TILE: usize = 64;

/// The column-major copy of row-major `bins` (`n` rows of `nf`). Each task reads a block of
/// rows once, in order, and writes its piece of every column: a column at a time would read
/// the whole matrix once per feature. [`kernel::COLUMN_PAD`] entries follow the last
/// column (a partition may read them, and never uses them).
fn transpose(bins: BinsRef<'_>, n: usize, nf: usize) -> Bins {
    fn t<B: Copy + Default + Send + Sync>(b: &[B], n: usize, nf: usize) -> Vec<B> {
        let mut out = crate::huge_pages::filled(n * nf + kernel::COLUMN_PAD, B::default());
        transpose_into(b, n, nf, &mut out);
        out
    }
    let mut held = HeldRows::default();
    match bins.row_major(&mut held) {
        RowMajor::U8(b) => Bins::U8(t(b, n, nf)),
        RowMajor::U16(b) => Bins::U16(t(b, n, nf)),
    }
}

impl TreeBackend for CpuBackend {
    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        self.inputs.group_gradients();
        self.tree.start_tree(&self.inputs, s)
    }

    fn build_histograms(&mut self, nodes: &[NodeId], out: &mut [HistBin]) -> Result<()> {
        self.inputs.group_gradients();
        self.tree
            .build_histograms(&self.inputs, nodes, out, None)
            .map(drop)
    }

    fn tracks_occupancy(&self) -> bool {
        self.inputs.sparse.is_some()
    }

    fn build_histograms_occupied(
        &mut self,
        nodes: &[NodeId],
        out: &mut [HistBin],
        occupied: &mut [u64],
    ) -> Result<()> {
        self.inputs.group_gradients();
        self.tree
            .build_histograms_occupied(&self.inputs, nodes, out, occupied)
    }

    fn apply_splits(&mut self, splits: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        self.tree.apply_splits(&self.inputs, splits)
    }

    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        // the tree's group's gradients, as they are now
        self.inputs.group_gradients();
        self.tree.exact_sums(&self.inputs, nodes)
    }

    fn square_sums(&mut self, nodes: &[NodeId], shift: i32) -> Result<Vec<i64>> {
        self.inputs.group_gradients();
        self.tree.square_sums(&self.inputs, nodes, shift)
    }
}

/// The tree a team grows: the shard's inputs, shared with the other teams, and the team's
/// own tree state.
struct TeamTree<'a> {
    inputs: &'a Inputs,
    tree: &'a mut TreeState,
}

impl TreeBackend for TeamTree<'_> {
    fn start_tree(&mut self, s: &TreeSetup) -> Result<u64> {
        self.tree.start_tree(self.inputs, s)
    }

    fn build_histograms(&mut self, nodes: &[NodeId], out: &mut [HistBin]) -> Result<()> {
        self.tree
            .build_histograms(self.inputs, nodes, out, None)
            .map(drop)
    }

    fn tracks_occupancy(&self) -> bool {
        self.inputs.sparse.is_some()
    }

    fn build_histograms_occupied(
        &mut self,
        nodes: &[NodeId],
        out: &mut [HistBin],
        occupied: &mut [u64],
    ) -> Result<()> {
        self.tree
            .build_histograms_occupied(self.inputs, nodes, out, occupied)
    }

    fn apply_splits(&mut self, splits: &[NodeSplit]) -> Result<Vec<[u64; 2]>> {
        self.tree.apply_splits(self.inputs, splits)
    }

    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>> {
        self.tree.exact_sums(self.inputs, nodes)
    }

    fn square_sums(&mut self, nodes: &[NodeId], shift: i32) -> Result<Vec<i64>> {
        self.tree.square_sums(self.inputs, nodes, shift)
    }
}

/// Bytes a team's tree state takes on a shard of `n` rows and `total_bins` bins: a row's
/// (g, h), index, scratch index, node (low-bit leaves) and leaf (sampled rows), and the
/// buffers a node's histogram is built in.
fn team_state_bytes(n: usize, total_bins: usize) -> usize {
    n.saturating_mul(16 + 4 + 4 + 4 + 4)
        .saturating_add(4 * total_bins * std::mem::size_of::<HistBin>())
}

impl HistBackend for CpuBackend {
    fn num_rows(&self) -> usize {
        self.inputs.binned.n_rows()
    }

    fn name(&self) -> String {
        "cpu".into()
    }

    fn runs_on_pool(&self) -> bool {
        true
    }

    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>> {
        self.tree.end_round();
        let k = self.inputs.objective.groups();
        let n = self.inputs.num_rows();
        if k > 1 {
            // the trees read each group's gradients group by group: made in the same pass
            // that adds the pending leaf values, with no row-major copy
            crate::huge_pages::resize(&mut self.inputs.by_group, n * k, [0.0; 2]);
            let max = gradients_by_group(
                &self.inputs.objective,
                &self.labels,
                self.weights.as_deref(),
                &mut self.margins,
                Pending {
                    values: &self.pending,
                    groups: &self.pending_groups,
                },
                &mut self.inputs.by_group,
            );
            self.pending_groups.fill(false);
            self.inputs.by_group_current = true;
            return Ok(max);
        }
        self.add_pending();
        self.inputs.by_group_current = false;
        Ok(shard::gradients_into(
            &self.inputs.objective,
            &self.labels,
            self.weights.as_deref(),
            &self.margins,
            &mut self.inputs.grad,
        ))
    }

    fn set_gradients(&mut self, grad: &[[f32; 2]]) -> Result<()> {
        let expected = self.labels.len() * self.inputs.objective.groups();
        shard::check_gradients(grad.len(), expected)?;
        // with several groups the row-major gradients are only ever the host's
        crate::huge_pages::resize(&mut self.inputs.grad, expected, [0.0; 2]);
        self.inputs.grad.copy_from_slice(grad);
        self.inputs.by_group_current = false;
        self.tree.end_round();
        Ok(())
    }

    fn start_round(&mut self, setups: &[TreeSetup]) -> Result<()> {
        self.tree.end_round();
        for s in setups {
            shard::check_group(s.group, self.inputs.objective.groups())?;
        }
        // one tree's root is built best on its own
        if setups.len() >= 2 {
            self.tree.round.extend_from_slice(setups);
        }
        Ok(())
    }

    fn round_teams(&self, trees: usize, grower_bytes: usize) -> usize {
        let (n, width) = (self.inputs.num_rows(), self.inputs.total_bins);
        teams::count(
            trees,
            rayon::current_num_threads(),
            team_state_bytes(n, width).saturating_add(grower_bytes),
        )
    }

    fn grow_round(
        &mut self,
        setups: &[TreeSetup],
        teams: usize,
        grow: &GrowTree<'_>,
    ) -> Option<Result<Vec<Tree>>> {
        let k = self.inputs.objective.groups();
        let n = self.inputs.num_rows();
        // never more teams than threads: a team has one at least
        let count = teams.min(rayon::current_num_threads());
        let mut groups: Vec<usize> = setups.iter().map(|s| s.group).collect();
        groups.sort_unstable();
        groups.dedup();
        // a team writes each tree's leaf values to its group's pending values: one tree a
        // group, and a group a tree
        if count < 2 || n == 0 || groups.len() != setups.len() || groups.iter().any(|&g| g >= k) {
            return None;
        }
        Some(self.grow_round_in_teams(setups, grow, count, ROUND_ROOTS_BYTES))
    }

    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()> {
        let k = self.inputs.objective.groups();
        let n = self.num_rows();
        // a second tree of a group (a forest's, or a round's replayed) adds to the margin
        // the first gave
        if self.pending_groups.get(group) == Some(&true) {
            self.add_pending();
        }
        // the spans are this tree's only the first time after it was grown here; a tree grown
        // elsewhere (replayed from a checkpoint) is routed by bins
        let current = std::mem::replace(&mut self.tree.spans_current, false);
        let owned = self.tree.owned.take();
        // the refit's leaves of this tree, every row in bag: each row's leaf is known
        if let Some(owned) = owned.filter(|o| {
            current
                && self.tree.all_in_bag
                && self.tree.rows.len() == n
                && o.iter().copied().eq(tree
                    .nodes
                    .iter()
                    .enumerate()
                    .filter(|(_, node)| node.split.is_none())
                    .map(|(id, _)| NodeId(id as u32)))
                // so that every row has one (as the leaves of a tree grown here do)
                && o.iter()
                    .map(|&id| self.tree.spans.get(id).map_or(0, |s| s.len as usize))
                    .sum::<usize>()
                    == n
        }) {
            let values: Vec<f32> = owned.iter().map(|&id| tree.value(id)).collect();
            self.margins
                .par_chunks_mut(ROWS_PER_TASK * k)
                .zip(self.tree.owners.par_chunks(ROWS_PER_TASK))
                .for_each(|(m, owners)| {
                    for (m, &o) in m.chunks_exact_mut(k).zip(owners) {
                        let x = &mut m[group];
                        *x = ftz(*x + values[o as usize]);
                    }
                });
            return Ok(());
        }
        // the tree just grown here, every row in bag: every row lies in the span of exactly
        // one leaf, in ascending order, and a task owning the rows lo..hi finds them in each
        // leaf's span by two binary searches
        let leaves: Option<Vec<(&[u32], f32)>> =
            (current && self.tree.all_in_bag && self.tree.rows.len() == n)
                .then(|| {
                    tree.nodes
                        .iter()
                        .enumerate()
                        .filter(|(_, node)| node.split.is_none())
                        .map(|(id, node)| {
                            let span = self.tree.spans.get(NodeId(id as u32)).ok()?.range();
                            Some((&self.tree.rows[span], node.value))
                        })
                        .collect::<Option<Vec<_>>>()
                })
                .flatten()
                .filter(|l| l.iter().map(|(r, _)| r.len()).sum::<usize>() == n);
        if let (Some(leaves), true) = (&leaves, k > 1) {
            // every row of the group's slice is written: each lies in one leaf
            crate::huge_pages::resize(&mut self.pending, n * k, 0.0);
            let chunk = rows_a_task(n);
            self.pending[group * n..(group + 1) * n]
                .par_chunks_mut(chunk)
                .enumerate()
                .for_each(|(c, p)| {
                    let lo = c * chunk;
                    for &(rows, v) in leaves {
                        for &r in rows_within(rows, lo..lo + p.len()) {
                            p[r as usize - lo] = v;
                        }
                    }
                });
            self.pending_groups[group] = true;
            return Ok(());
        }
        // every other way adds to the margins themselves (a group's own margin: the
        // pending values of the others are theirs)
        if let Some(leaves) = leaves {
            let chunk = rows_a_task(n);
            self.margins
                .par_chunks_mut(chunk * k)
                .enumerate()
                .for_each(|(c, m)| {
                    let (lo, hi) = (c * chunk, c * chunk + m.len() / k);
                    for &(rows, v) in &leaves {
                        for &r in rows_within(rows, lo..hi) {
                            let x = &mut m[(r as usize - lo) * k + group];
                            *x = ftz(*x + v);
                        }
                    }
                });
            return Ok(());
        }
        let mut leaf_of = vec![u32::MAX; n];
        let entries = self.tree.spans.leaf_of_entries(self.tree.rows.len(), |id| {
            current && tree.nodes.get(id).is_some_and(|n| n.split.is_none())
        });
        for (&r, &leaf) in self.tree.rows.iter().zip(&entries) {
            leaf_of[r as usize] = leaf;
        }
        let binned = &self.inputs.binned;
        let by_columns = if leaf_of.contains(&u32::MAX) {
            tree.leaves_of_columns(binned)
        } else {
            None
        };
        self.margins
            .par_chunks_mut(k)
            .zip(leaf_of.par_iter())
            .enumerate()
            .for_each(|(i, (m, &leaf))| {
                let leaf = match (leaf, &by_columns) {
                    // out of bag this tree: route by bins
                    (u32::MAX, Some(leaves)) => leaves[i],
                    (u32::MAX, None) => tree.leaf_of_binned(binned, i),
                    _ => NodeId(leaf),
                };
                m[group] = ftz(m[group] + tree.value(leaf));
            });
        Ok(())
    }

    fn margins(&self) -> Result<Vec<f32>> {
        let mut margins = self.margins.clone();
        let k = self.inputs.objective.groups();
        let n = self.num_rows();
        for g in (0..k).filter(|&g| self.pending_groups[g]) {
            for (row, &v) in margins.chunks_exact_mut(k).zip(&self.pending[g * n..]) {
                row[g] = ftz(row[g] + v);
            }
        }
        Ok(margins)
    }
}

/// Builds CPU backends.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuFactory;

impl BackendFactory for CpuFactory {
    fn create(&self, s: ShardData) -> Result<Box<dyn HistBackend>> {
        Ok(Box::new(CpuBackend::new(s)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_first_runs_every_item_once_and_in_order() {
        for threads in [1, 2, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                for n in [0usize, 1, 2, 5, 100] {
                    let mut out = vec![0usize; n];
                    let started = std::sync::Mutex::new(Vec::new());
                    let work: Vec<(usize, &mut usize)> = out.iter_mut().enumerate().collect();
                    // equal sizes: the order given
                    largest_first(
                        work,
                        |_| 0,
                        |_: &mut (), (i, o)| {
                            started.lock().unwrap().push(i);
                            // an item run twice would hold 4i + 2
                            *o += 2 * i + 1;
                        },
                    );
                    let want: Vec<usize> = (0..n).map(|i| 2 * i + 1).collect();
                    assert_eq!(out, want, "{threads} threads, {n} items");
                    // one thread takes the items in the order given
                    let started = started.into_inner().unwrap();
                    if threads == 1 {
                        assert_eq!(started, (0..n).collect::<Vec<_>>());
                    }
                    assert_eq!(started.len(), n);
                }
            });
        }
    }

    /// The histogram of `rows` by brute force: every row's value added to each feature's bin.
    fn brute(rows: &[u32], bins: &[u8], offsets: &[u32], gh: &[HistBin]) -> Vec<HistBin> {
        let nf = offsets.len() - 1;
        let mut h = vec![[0i64; 2]; offsets[nf] as usize];
        for &r in rows {
            for f in 0..nf {
                let b = offsets[f] as usize + bins[r as usize * nf + f] as usize;
                h[b] = add(h[b], gh[r as usize]);
            }
        }
        h
    }

    #[test]
    fn the_column_copy_is_the_transpose() {
        // blocks of rows: none, part of one, one and a bit, several with a short last one
        for (n, nf) in [
            (0, 3),
            (1, 1),
            (5, 3),
            (ROWS_PER_TASK + 7, 2),
            (3 * ROWS_PER_TASK - 1, 5),
            // several tiles of features, the last one short
            (ROWS_PER_TASK + 7, 2 * TRANSPOSE_TILE + 2),
        ] {
            let wide: Vec<u16> = (0..n * nf).map(|i| (i * 7919 % 65_521) as u16).collect();
            let narrow: Vec<u8> = wide.iter().map(|&v| v as u8).collect();
            let Bins::U16(w) = transpose(BinsRef::U16(&wide), n, nf) else {
                panic!("u16 bins stay u16")
            };
            let Bins::U8(c) = transpose(BinsRef::U8(&narrow), n, nf) else {
                panic!("u8 bins stay u8")
            };
            // the padding a partition's lanes may read past the last column
            assert_eq!(w.len(), n * nf + kernel::COLUMN_PAD);
            assert_eq!(c.len(), n * nf + kernel::COLUMN_PAD);
            for r in 0..n {
                for f in 0..nf {
                    assert_eq!(
                        w[f * n + r],
                        wide[r * nf + f],
                        "{n} x {nf}: row {r}, feature {f}"
                    );
                    assert_eq!(c[f * n + r], narrow[r * nf + f]);
                }
            }
        }
    }

    #[test]
    fn feature_groups_cover_the_features_in_order_by_bins() {
        let offsets = [0u32, 10, 20, 30, 40];
        assert_eq!(feature_groups(&offsets, 1), vec![0..4usize]);
        assert_eq!(feature_groups(&offsets, 2), [0..2, 2..4]);
        assert_eq!(feature_groups(&offsets, 4), [0..1, 1..2, 2..3, 3..4]);
        // one feature holds most bins: fewer groups, never an empty one
        let wide = [0u32, 2, 100, 102];
        assert_eq!(feature_groups(&wide, 3), [0..2, 2..3]);
        assert_eq!(feature_groups(&[0u32, 50], 2), vec![0..1usize]);
    }

    #[test]
    fn nodes_are_cut_by_features_only_where_threads_would_idle() {
        // a lone small node: by features; a lone large one: by rows; many nodes: whole
        let one = |len| cuts_of(&[len], 2, &even(28, 256), None, true);
        assert_eq!(
            one(2_000),
            [Cuts {
                parts: 1,
                groups: 2
            }]
        );
        assert_eq!(
            one(100),
            [Cuts {
                parts: 1,
                groups: 1
            }]
        );
        assert_eq!(
            one(100_000),
            [Cuts {
                parts: 2,
                groups: 1
            }]
        );
        assert_eq!(
            cuts_of(&[2_000, 2_000], 2, &even(28, 256), None, true)[0].groups,
            1
        );
        assert_eq!(
            cuts_of(&[2_000], 1, &even(28, 256), Some(16), true)[0].groups,
            1
        );
    }

    #[test]
    fn a_lone_large_node_is_cut_by_features_where_a_group_fits_l1() {
        let lone = |len, threads, value_bytes| {
            cuts_of(&[len], threads, &even(28, 256), Some(value_bytes), true)
        };
        let by_features = Cuts {
            parts: 1,
            groups: 2,
        };
        // 8-byte bins: 57 KiB in all, 28 KiB a group on two threads
        assert_eq!(lone(100_000, 2, 8), [by_features]);
        // 16-byte bins: 57 KiB a group on two threads, 28 KiB in four (each thread reads
        // the rows twice)
        assert_eq!(
            lone(100_000, 2, 16),
            [Cuts {
                parts: 1,
                groups: 4
            }]
        );
        // twice as many features: four groups would not fit either; more threads: not
        // measured to pay
        assert_eq!(
            cuts_of(&[100_000], 2, &even(56, 256), Some(16), true)[0].parts,
            2
        );
        assert_eq!(lone(100_000, 4, 8)[0].parts, 4);
        // a whole histogram that fits L1 already, or a level of several nodes: by rows
        assert_eq!(
            cuts_of(&[100_000], 2, &even(8, 256), Some(8), true)[0].parts,
            2
        );
        assert_eq!(
            cuts_of(&[100_000, 100_000], 2, &even(28, 256), Some(8), true)[0].groups,
            1
        );
        // rows gathered by index (not every row of the shard): by rows
        assert_eq!(
            cuts_of(&[100_000], 2, &even(28, 256), None, true)[0].parts,
            2
        );
        // groups as `by_features` cuts them: one feature of 5000 bins leaves a single group
        // (and one feature no second one); 40 KiB one side: by rows
        assert_eq!(
            cuts_of(&[100_000], 2, &[0, 10, 5_010], Some(8), false)[0].parts,
            2
        );
        assert_eq!(
            cuts_of(&[100_000], 2, &[0, 5_000], Some(8), false)[0].parts,
            2
        );
        assert_eq!(
            cuts_of(&[100_000], 2, &[0, 5_000, 5_500, 6_000], Some(8), false)[0].parts,
            2
        );
        // unequal features whose groups still fit: by features
        assert_eq!(
            cuts_of(&[100_000], 2, &[0, 3_000, 5_500, 6_000], Some(8), false),
            [by_features]
        );
    }

    /// Offsets of `nf` features of `bins` bins each.
    fn even(nf: u32, bins: u32) -> Vec<u32> {
        (0..=nf).map(|f| f * bins).collect()
    }

    #[test]
    fn every_way_of_cutting_a_level_gives_the_brute_force_histograms() {
        // features of unequal widths (as numeric and categorical features are): too narrow
        // on the whole to pad
        every_way_of_cutting_a_level(&[17, 256, 3, 64, 200, 9, 256], Layout::Offsets);
    }

    #[test]
    fn features_wider_than_their_padded_entries_keep_the_offsets() {
        // byte bins never reach past 255, but the histogram's every entry is written
        let offsets = sapwood_testkit::data::offsets_of(&[256, 300, 256, 256]);
        assert_eq!(Layout::of(1_000, &offsets, true), Layout::Offsets);
        let offsets = sapwood_testkit::data::offsets_of(&[256, 256, 256, 256]);
        assert_eq!(Layout::of(1_000, &offsets, true), Layout::Padded);
    }

    #[test]
    fn padded_builds_of_features_of_256_bins_build_in_place() {
        // the padded entries are the node's own: every node built whole writes its place
        every_way_of_cutting_a_level(&[256; 11], Layout::Padded);
    }

    #[test]
    fn padded_builds_give_the_brute_force_histograms() {
        // a word of eight features and three more, wide enough to pad; the levels' nodes of
        // 30 rows (fewer than MIN_PADDED_ROWS) still build by offsets
        every_way_of_cutting_a_level(
            &[256, 200, 17, 256, 255, 64, 256, 128, 256, 3, 256],
            Layout::Padded,
        );
    }

    /// Builds levels of nodes of features `widths` (nodes of 1,000 rows laid out as
    /// `layout`) cut every way, of full and packed values, against brute force.
    fn every_way_of_cutting_a_level(widths: &[u32], layout: Layout) {
        let nf = widths.len();
        let offsets = sapwood_testkit::data::offsets_of(widths);
        assert_eq!(Layout::of(1_000, &offsets, true), layout);
        assert_eq!(Layout::of(1_000, &offsets, false), Layout::Offsets);
        let width = *offsets.last().unwrap() as usize;
        let n = 30_000;
        let mut rng = sapwood_testkit::Rng(0x9e37_79b9_7f4a_7c15);
        let bins: Vec<u8> = (0..n * nf)
            .map(|i| rng.below(widths[i % nf] as u64) as u8)
            .collect();
        let gh: Vec<HistBin> = (0..n)
            .map(|_| [rng.below(255) as i64 - 127, rng.below(256) as i64])
            .collect();
        let packed: Vec<i64> = gh.iter().map(|&[g, h]| kernel::pack(g, h)).collect();
        let all: Vec<u32> = (0..n as u32).collect();
        let every_third: Vec<u32> = (0..n as u32).filter(|r| r % 3 == 0).collect();
        let small: Vec<u32> = (0..n as u32).filter(|r| r % 29 == 5).collect();
        let tiny: Vec<u32> = (0..n as u32).filter(|r| r % 997 == 1).collect();
        let levels: Vec<Vec<&[u32]>> = vec![
            vec![&all],
            vec![&every_third],
            vec![&small],
            vec![&tiny],
            vec![&small, &tiny, &every_third],
        ];
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        pool.install(|| {
            for level in &levels {
                let lens: Vec<usize> = level.iter().map(|r| r.len()).collect();
                // as the level would be cut, and every node by features (the root included)
                let by_features = vec![
                    Cuts {
                        parts: 1,
                        groups: 3
                    };
                    lens.len()
                ];
                for cuts in [cuts_of(&lens, 3, &offsets, None, true), by_features] {
                    let node_rows: Vec<PartRows<'_>> = level
                        .iter()
                        .map(|r| {
                            if r.len() == n {
                                PartRows::All(0..n)
                            } else {
                                PartRows::Listed(r)
                            }
                        })
                        .collect();
                    let expected: Vec<HistBin> = level
                        .iter()
                        .flat_map(|r| brute(r, &bins, &offsets, &gh))
                        .collect();
                    let mut wide = vec![[7i64, 7]; width * level.len()];
                    build_level(
                        &node_rows,
                        &cuts,
                        &bins,
                        &offsets,
                        &gh,
                        width,
                        &mut Vec::new(),
                        &mut wide,
                    );
                    assert_eq!(wide, expected, "wide, cuts {cuts:?}");
                    let mut from_packed = vec![[7i64, 7]; width * level.len()];
                    let mut pool = Vec::new();
                    build_level(
                        &node_rows,
                        &cuts,
                        &bins,
                        &offsets,
                        &packed,
                        width,
                        &mut pool,
                        &mut from_packed,
                    );
                    assert_eq!(from_packed, expected, "packed, cuts {cuts:?}");
                }
            }
        });
        // the levels above cut by rows, by features and not at all
        let kinds: Vec<Cuts> = levels
            .iter()
            .flat_map(|l| {
                cuts_of(
                    &l.iter().map(|r| r.len()).collect::<Vec<_>>(),
                    3,
                    &offsets,
                    None,
                    true,
                )
            })
            .collect();
        assert!(kinds.iter().any(|c| c.parts > 1));
        assert!(kinds.iter().any(|c| c.groups > 1));
        assert!(kinds.iter().any(|c| c.parts == 1 && c.groups == 1));
    }

    #[test]
    fn gradients_copied_group_by_group_are_each_groups_column() {
        let (n, k) = (2 * ROWS_PER_TASK + 5, 3);
        let mut spec = sparse_shard(n, false);
        spec.objective =
            crate::objective::Objective::new(crate::objective::ObjectiveKind::Softprob, k).unwrap();
        spec.labels = (0..n).map(|i| (i % k) as f32).collect();
        spec.base_margin = vec![0.0; k];
        let mut b = CpuBackend::new(spec).unwrap();
        let grad: Vec<[f32; 2]> = (0..n * k).map(|i| [i as f32, -(i as f32)]).collect();
        b.set_gradients(&grad).unwrap();
        b.inputs.group_gradients();
        for group in 0..k {
            let column = gradients_of(&b.inputs.grad, &b.inputs.by_group, k, group);
            assert_eq!(column.len(), n);
            for (r, v) in column.iter().enumerate() {
                assert_eq!(*v, grad[r * k + group], "group {group}, row {r}");
            }
        }
        // new gradients make the copy stale, and the next call copies them
        let again: Vec<[f32; 2]> = grad.iter().map(|&[g, h]| [g + 1.0, h]).collect();
        b.set_gradients(&again).unwrap();
        assert!(!b.inputs.by_group_current);
        b.inputs.group_gradients();
        assert_eq!(
            gradients_of(&b.inputs.grad, &b.inputs.by_group, k, 2)[n - 1],
            again[n * k - 1]
        );
    }

    #[test]
    fn gradients_computed_group_by_group_are_the_row_major_ones_transposed() {
        use crate::objective::{ObjectiveKind, ObjectiveParams};
        // two tasks and a short third, tiles of both lengths; a softmax (its lanes) and a
        // multi-quantile loss (row by row through `gradient`)
        let n = 2 * ROWS_PER_TASK + GRADIENT_TILE + 37;
        let quantiles = ObjectiveParams {
            quantile_alpha: vec![0.2, 0.5, 0.9],
            ..Default::default()
        };
        let objectives = [
            Objective::new(ObjectiveKind::Softprob, 5).unwrap(),
            Objective::with_params(ObjectiveKind::QuantileError, 0, &quantiles).unwrap(),
        ];
        let mut rng = sapwood_testkit::Rng(41);
        for objective in objectives {
            let k = objective.groups();
            let labels: Vec<f32> = (0..n)
                .map(|_| match objective.kind() {
                    ObjectiveKind::Softprob => rng.below(k as u64) as f32,
                    _ => rng.unit() * 4.0 - 2.0,
                })
                .collect();
            let weights: Vec<f32> = (0..n).map(|_| 0.25 + rng.unit()).collect();
            let margins: Vec<f32> = (0..n * k).map(|_| rng.unit() * 6.0 - 3.0).collect();
            let values: Vec<f32> = (0..n * k).map(|_| rng.unit() - 0.5).collect();
            // groups 1 and 3 (the quantiles' 1) hold pending values
            let groups: Vec<bool> = (0..k).map(|g| g % 2 == 1).collect();
            let mut added = margins.clone();
            for (r, row) in added.chunks_exact_mut(k).enumerate() {
                for g in (0..k).filter(|&g| groups[g]) {
                    row[g] = ftz(row[g] + values[g * n + r]);
                }
            }
            let mut rows = vec![[0.0f32; 2]; n * k];
            let want_max =
                shard::gradients_into(&objective, &labels, Some(&weights), &added, &mut rows);
            let mut got_margins = margins.clone();
            let mut by_group = vec![[9.0f32; 2]; n * k];
            let max = gradients_by_group(
                &objective,
                &labels,
                Some(&weights),
                &mut got_margins,
                Pending {
                    values: &values,
                    groups: &groups,
                },
                &mut by_group,
            );
            assert_eq!(max, want_max, "{:?}", objective.kind());
            assert!(got_margins == added, "{:?}: margins", objective.kind());
            for g in 0..k {
                for r in 0..n {
                    assert!(
                        by_group[g * n + r] == rows[r * k + g],
                        "{:?}: group {g}, row {r}",
                        objective.kind()
                    );
                }
            }
        }
    }

    /// A shard of `n` rows whose features are mostly one bin each (bin 0, missing, or
    /// another), one feature in twelve dense: stored sparse.
    fn sparse_shard(n: usize, wide: bool) -> ShardData {
        let widths: Vec<u32> = (0..24).map(|f| [2, 3, 9, 40, 300][f % 5]).collect();
        let widths: Vec<u32> = widths
            .iter()
            .map(|&w| if wide { w } else { w.min(256) })
            .collect();
        let nf = widths.len();
        let mut offsets = vec![0u32];
        for w in &widths {
            offsets.push(offsets.last().unwrap() + w);
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |below: u32| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as u16
        };
        let mut vals = Vec::with_capacity(n * nf);
        for _ in 0..n {
            for (f, &w) in widths.iter().enumerate() {
                let common = (f as u32 % w) as u16;
                vals.push(if f % 12 == 5 || next(40) == 0 {
                    next(w)
                } else {
                    common
                });
            }
        }
        let bins = if wide {
            Bins::U16(vals)
        } else {
            Bins::U8(vals.iter().map(|&v| v as u8).collect())
        };
        let labels = (0..n)
            .map(|i| ((i * 7919) % 113) as f32 / 10.0 - 5.0)
            .collect();
        ShardData {
            binned: Arc::new(BinnedMatrix::from_bins(n, nf, bins).unwrap()),
            offsets,
            labels,
            weights: None,
            objective: crate::objective::Objective::new(
                crate::objective::ObjectiveKind::SquaredError,
                1,
            )
            .unwrap(),
            base_margin: vec![0.0],
            initial_margins: None,
            row_offset: 0,
        }
    }

    #[test]
    fn sparse_shards_build_the_dense_histograms_level_after_level() {
        use crate::hash::SampleRate;
        use crate::params::Quantisation;
        use crate::quantise::GroupScales;
        let n = 20_000;
        for wide in [false, true] {
            let mut sparse = CpuBackend::new(sparse_shard(n, wide)).unwrap();
            let mut dense = CpuBackend::new(sparse_shard(n, wide)).unwrap();
            assert!(
                sparse.inputs.sparse.is_some(),
                "a shard this sparse is stored sparse"
            );
            // the dense twin builds from every bin and routes rows by its column copy; the
            // sparse one routes by its row-major bins
            assert!(sparse.inputs.columns.is_none());
            dense.inputs.sparse = None;
            dense.inputs.columns = Some(transpose(
                dense.inputs.binned.bins(),
                n,
                dense.inputs.binned.n_features(),
            ));
            let width = sparse.inputs.total_bins;
            let max = sparse
                .compute_gradients()
                .unwrap()
                .iter()
                .fold([0f32; 2], |m, g| {
                    [m[0].max(g[0].abs()), m[1].max(g[1].abs())]
                });
            dense.compute_gradients().unwrap();
            // exact (i64 pairs) and 8 bits (packed), all rows and a sample
            for (q, rate) in [
                (Quantisation::Exact, 1.0),
                (Quantisation::Bits(8), 1.0),
                (Quantisation::Bits(8), 0.7),
            ] {
                let setup = TreeSetup {
                    tree_index: 3,
                    group: 0,
                    seed: 9,
                    row_sample: SampleRate::new(rate),
                    scales: GroupScales {
                        grad: Scale::agree(max[0], n as u64, q),
                        hess: Scale::agree(max[1], n as u64, q),
                    },
                };
                let what = format!("wide {wide} {q:?} rate {rate}");
                sparse.start_tree(&setup).unwrap();
                dense.start_tree(&setup).unwrap();
                if q != Quantisation::Exact {
                    assert!(sparse.tree.packed.is_some(), "{what}: packed");
                }
                let mut open = vec![NodeId::ROOT];
                let mut next = 1u32;
                for depth in 0..4 {
                    let mut a = vec![[0i64; 2]; open.len() * width];
                    let mut b = vec![[1i64; 2]; open.len() * width];
                    sparse.build_histograms(&open, &mut a).unwrap();
                    dense.build_histograms(&open, &mut b).unwrap();
                    assert!(a == b, "{what}: depth {depth}");
                    // split each node on a sparse feature, then on the dense one
                    let splits: Vec<NodeSplit> = open
                        .iter()
                        .enumerate()
                        .map(|(i, &node)| {
                            let feature = [3, 5, 8, 14][(depth + i) % 4];
                            next += 2;
                            NodeSplit {
                                node,
                                left: NodeId(next - 2),
                                right: NodeId(next - 1),
                                feature,
                                rule: SplitRule::Numeric { bin: 1 },
                                default_left: i % 2 == 0,
                            }
                        })
                        .collect();
                    assert_eq!(
                        sparse.apply_splits(&splits).unwrap(),
                        dense.apply_splits(&splits).unwrap()
                    );
                    open = splits.iter().flat_map(|s| [s.left, s.right]).collect();
                }
            }
        }
    }

    /// The setups of round `round` for every group of `max` (the gradients' maxima by
    /// group) over `n` rows: tree `round · k + g` of group g, sampled at `rate`.
    fn round_setups(
        max: &[[f32; 2]],
        n: usize,
        q: crate::params::Quantisation,
        rate: f64,
        round: u32,
    ) -> Vec<TreeSetup> {
        let k = max.len();
        (0..k)
            .map(|g| TreeSetup {
                tree_index: round * k as u32 + g as u32,
                group: g,
                seed: 3,
                row_sample: crate::hash::SampleRate::new(rate),
                scales: crate::quantise::GroupScales {
                    grad: Scale::agree(max[g][0], n as u64, q),
                    hess: Scale::agree(max[g][1], n as u64, q),
                },
            })
            .collect()
    }

    #[test]
    fn a_round_grown_in_teams_leaves_the_margins_of_trees_grown_one_after_another() {
        use crate::hash::SampleRate;
        use crate::params::Quantisation;
        use crate::quantise::GroupScales;
        use crate::tree::{Node, Split};
        let (n, k) = (6_000, 17);
        let backend = || {
            let mut spec = sparse_shard(n, false);
            spec.objective =
                crate::objective::Objective::new(crate::objective::ObjectiveKind::Softprob, k)
                    .unwrap();
            spec.labels = (0..n).map(|i| ((i * 7) % k) as f32).collect();
            spec.base_margin = (0..k).map(|g| g as f32 / 10.0).collect();
            let mut b = CpuBackend::new(spec).unwrap();
            // dense: the roots may be built in passes
            b.inputs.sparse = None;
            b
        };
        let offsets = backend().inputs.offsets.clone();
        let nf = offsets.len() - 1;
        // a stump on a feature of the tree's group, its threshold and leaf values read from
        // the root's histogram and the partition's counts: any other root or partition
        // gives another tree
        let grow = |_: usize, s: &TreeSetup, b: &mut dyn TreeBackend| -> Result<Tree> {
            b.start_tree(s)?;
            let width = *offsets.last().unwrap() as usize;
            let mut h = vec![[0i64; 2]; width];
            b.build_histograms(&[NodeId::ROOT], &mut h)?;
            let f = s.group % nf;
            let bins = &h[offsets[f] as usize..offsets[f + 1] as usize];
            let g: i64 = bins.iter().map(|v| v[0]).sum();
            let t = (g.unsigned_abs() % bins.len().max(1) as u64) as u16;
            let rule = SplitRule::Numeric { bin: t };
            let counts = b.apply_splits(&[NodeSplit {
                node: NodeId::ROOT,
                left: NodeId(1),
                right: NodeId(2),
                feature: f,
                rule: rule.clone(),
                default_left: true,
            }])?;
            let leaf = |value: f32| Node {
                split: None,
                value,
                cover: 1.0,
            };
            Ok(Tree {
                nodes: vec![
                    Node {
                        split: Some(Split {
                            feature: f,
                            rule,
                            default_left: true,
                            left: NodeId(1),
                            right: NodeId(2),
                            gain: 0.0,
                        }),
                        value: 0.0,
                        cover: 1.0,
                    },
                    leaf((g % 1_000) as f32 / 4_000.0),
                    leaf(counts[0][0] as f32 / n as f32 - 0.5),
                ],
            })
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for (q, rate, budget) in [
            (Quantisation::Exact, 1.0, ROUND_ROOTS_BYTES),
            // the teams take four trees at once and build their roots in one pass
            (Quantisation::Exact, 1.0, 0),
            (Quantisation::Exact, 0.7, ROUND_ROOTS_BYTES),
            (Quantisation::Bits(8), 0.7, 0),
        ] {
            let (mut one, mut teams) = (backend(), backend());
            pool.install(|| {
                for round in 0..3u32 {
                    let max = one.compute_gradients().unwrap();
                    assert_eq!(teams.compute_gradients().unwrap(), max);
                    let setups = round_setups(&max, n, q, rate, round);
                    one.start_round(&setups).unwrap();
                    let want: Vec<Tree> = setups
                        .iter()
                        .map(|s| {
                            let tree = grow(0, s, &mut one).unwrap();
                            one.update_margins(&tree, s.group).unwrap();
                            tree
                        })
                        .collect();
                    let got = teams
                        .grow_round_in_teams(&setups, &grow, 2, budget)
                        .unwrap();
                    let what = format!("{q:?}, rate {rate}, budget {budget}, round {round}");
                    assert!(got == want, "{what}: trees");
                    assert!(
                        teams.margins().unwrap() == one.margins().unwrap(),
                        "{what}: margins"
                    );
                }
            });
        }
        // one tree a group only, and two teams at least
        let mut b = backend();
        b.compute_gradients().unwrap();
        let s = TreeSetup {
            tree_index: 0,
            group: 1,
            seed: 3,
            row_sample: SampleRate::new(1.0),
            scales: GroupScales {
                grad: Scale::agree(1.0, n as u64, Quantisation::Exact),
                hess: Scale::agree(1.0, n as u64, Quantisation::Exact),
            },
        };
        pool.install(|| {
            assert!(b.grow_round(&[s; 17], 2, &grow).is_none());
            assert!(b.grow_round(&[s], 1, &grow).is_none());
        });
    }

    #[test]
    fn roots_built_ahead_are_each_trees_own_root() {
        use crate::params::Quantisation;
        let (n, k) = (20_000, 6);
        let shard = |sparse: bool| {
            let mut spec = sparse_shard(n, false);
            spec.objective =
                crate::objective::Objective::new(crate::objective::ObjectiveKind::Softprob, k)
                    .unwrap();
            spec.labels = (0..n).map(|i| ((i * 7) % k) as f32).collect();
            spec.base_margin = (0..k).map(|g| g as f32 / 10.0).collect();
            let mut b = CpuBackend::new(spec).unwrap();
            if !sparse {
                b.inputs.sparse = None;
            }
            b
        };
        let root = |b: &mut CpuBackend, s: &TreeSetup| {
            b.start_tree(s).unwrap();
            let mut h = vec![[5i64, -5]; b.inputs.total_bins];
            b.build_histograms(&[NodeId::ROOT], &mut h).unwrap();
            h
        };
        let (mut ahead, mut plain) = (shard(false), shard(false));
        let max = ahead.compute_gradients().unwrap();
        plain.compute_gradients().unwrap();
        let setups = |q, rate, round| round_setups(&max, n, q, rate, round);
        let exact = setups(Quantisation::Exact, 1.0, 0);
        ahead.start_round(&exact).unwrap();
        for (g, s) in exact.iter().enumerate() {
            assert!(root(&mut ahead, s) == root(&mut plain, s), "group {g}");
            // the first tree's pass built the next three roots, the fifth's the sixth
            let left = [3, 2, 1, 0, 1, 0][g];
            assert_eq!(ahead.tree.roots_ahead.len(), left, "after group {g}");
        }
        // a tree not of the round is built on its own, as is every tree where the pass
        // does not apply: low-bit quantisation, sampled rows, a sparse shard
        ahead.start_round(&exact).unwrap();
        let mut other = exact[1];
        other.tree_index += 100;
        assert!(root(&mut ahead, &other) == root(&mut plain, &other));
        assert!(ahead.tree.roots_ahead.is_empty());
        for (q, rate) in [(Quantisation::Bits(8), 1.0), (Quantisation::Exact, 0.5)] {
            let round = setups(q, rate, 1);
            ahead.start_round(&round).unwrap();
            for s in &round {
                assert!(root(&mut ahead, s) == root(&mut plain, s), "{q:?} {rate}");
                assert!(ahead.tree.roots_ahead.is_empty(), "{q:?} {rate}");
            }
        }
        let mut sparse = shard(true);
        assert!(sparse.inputs.sparse.is_some());
        sparse.compute_gradients().unwrap();
        sparse.start_round(&exact).unwrap();
        assert!(root(&mut sparse, &exact[0]) == root(&mut plain, &exact[0]));
        assert!(sparse.tree.roots_ahead.is_empty());
        // new gradients end the round: nothing built ahead survives them
        ahead.start_round(&exact).unwrap();
        root(&mut ahead, &exact[0]);
        assert_eq!(ahead.tree.roots_ahead.len(), 3);
        ahead.compute_gradients().unwrap();
        assert!(ahead.tree.roots_ahead.is_empty() && ahead.tree.round.is_empty());
        // as do gradients set from the host, and a new round
        ahead.start_round(&exact).unwrap();
        root(&mut ahead, &exact[0]);
        let grad = vec![[0.5f32, 0.25]; ahead.num_rows() * k];
        ahead.set_gradients(&grad).unwrap();
        assert!(ahead.tree.roots_ahead.is_empty() && ahead.tree.round.is_empty());
        ahead.start_round(&exact).unwrap();
        root(&mut ahead, &exact[0]);
        ahead.start_round(&exact).unwrap();
        assert!(
            ahead.tree.roots_ahead.is_empty(),
            "a new round forgets the last"
        );
        assert_eq!(ahead.tree.round.len(), k);
    }

    #[test]
    fn routing_by_row_major_bins_moves_the_rows_the_column_copy_does() {
        use crate::split::BinSet;
        let mut rng = sapwood_testkit::Rng(0x0a11_0c8e);
        // more rows than a partition chunk, so the rows also go in parallel pieces
        let (n, nf) = (3 * MIN_PARTITION_CHUNK + 123, 7);
        let mut mixed = 0;
        for wide in [false, true] {
            let width = if wide { 700 } else { 256 };
            let vals: Vec<u16> = (0..n * nf)
                .map(|_| match rng.below(5) {
                    0 => 0,
                    _ => rng.below(width) as u16,
                })
                .collect();
            let bins = if wide {
                Bins::U16(vals)
            } else {
                Bins::U8(vals.iter().map(|&v| v as u8).collect())
            };
            let binned = BinnedMatrix::from_bins(n, nf, bins).unwrap();
            let columns = transpose(binned.bins(), n, nf);
            for case in 0..24 {
                let feature = case % nf;
                let rule = if case % 3 == 0 {
                    SplitRule::Categorical {
                        left: BinSet::from_bins((0..width as u16).filter(|_| rng.below(2) == 0)),
                    }
                } else {
                    SplitRule::Numeric {
                        bin: [0, 1, 37, width as u16 - 2, width as u16 - 1][case % 5],
                    }
                };
                let split = NodeSplit {
                    node: NodeId::ROOT,
                    left: NodeId(1),
                    right: NodeId(2),
                    feature,
                    rule,
                    default_left: case % 2 == 0,
                };
                let rows: Vec<u32> = (0..n as u32).filter(|_| rng.below(4) != 0).collect();
                for threads in [1, 4] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    let (mut a, mut b) = (rows.clone(), rows.clone());
                    let (mut sa, mut sb) = (vec![0u32; rows.len()], vec![0u32; rows.len()]);
                    let column = feature * n..(feature + 1) * n + kernel::COLUMN_PAD;
                    let (la, lb) = pool.install(|| match (&columns, binned.bins()) {
                        (Bins::U8(c), BinsRef::U8(r)) => (
                            partition_by(&mut a, &mut sa, &c[column], n, &split),
                            partition_by_rows(&mut b, &mut sb, r, nf, &split),
                        ),
                        (Bins::U16(c), BinsRef::U16(r)) => (
                            partition_by(&mut a, &mut sa, &c[column], n, &split),
                            partition_by_rows(&mut b, &mut sb, r, nf, &split),
                        ),
                        _ => unreachable!("one bin type"),
                    });
                    let what = format!("wide {wide}, {split:?}, {threads} threads");
                    assert_eq!(la, lb, "{what}");
                    assert!(a == b, "{what}");
                    mixed += usize::from(la > 0 && la < rows.len());
                }
            }
        }
        assert!(mixed > 60, "most cases send rows both ways: {mixed}");
    }
}
