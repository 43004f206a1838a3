//! Backends: a device holding a shard of rows, and what every backend shares.
//!
//! - [`HistBackend`]: what the grower asks of a backend (gradients, histograms, partition);
//! - [`factory`]: [`ShardData`] and the factories that build a worker's backend from it;
//! - [`shard`]: everything about a shard that is not a kernel launch (validation, node row
//!   spans, kernel list, scalars and encodings kernels read), shared by every backend;
//! - [`gpu_layout`]: the data layouts GPU kernels read (packed bins, splits, trees, tiles);
//! - [`device`]: the shard driver every GPU backend shares ([`device::DeviceShard`]) over a
//!   small runtime trait ([`device::ShardDevice`]);
//! - [`TreeBackend`]: what growing one tree asks of a backend, which teams of threads growing
//!   a round's trees at once ask of each team's share of the CPU backend (the `teams`
//!   module);
//! - the CPU backend ([`CpuBackend`]), the reference every other backend must match bit for
//!   bit, which builds histograms of sparse shards from each row's uncommon bins (the
//!   `sparse_rows` module). A GPU backend is allocation, launches and read-backs under
//!   [`device`].

mod cpu;
pub mod device;
pub mod factory;
pub mod gpu_layout;
mod kernel;
mod roots;
pub mod shard;
mod sparse_rows;
mod teams;

pub use cpu::{CpuBackend, CpuFactory};
pub use factory::{BackendFactory, ShardData};
pub(crate) use kernel::BinValue;

use crate::error::Result;
use crate::hash::SampleRate;
use crate::hist::HistBin;
use crate::quantise::GroupScales;
use crate::split::SplitRule;
use crate::tree::{NodeId, Tree};

/// A split the grower has decided, for the backend to apply to its row partition.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSplit {
    /// The node being split.
    pub node: NodeId,
    /// Its new left child.
    pub left: NodeId,
    /// Its new right child.
    pub right: NodeId,
    /// Split feature.
    pub feature: usize,
    /// Routing rule on the feature's bins.
    pub rule: SplitRule,
    /// Where missing values go.
    pub default_left: bool,
}

/// What a backend needs to start a tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeSetup {
    /// Index of the tree in the model (round × groups + group): keys the random streams.
    pub tree_index: u32,
    /// Output group whose gradients this tree fits.
    pub group: usize,
    /// The job's seed.
    pub seed: u64,
    /// Row sampling rate of this tree (`subsample`).
    pub row_sample: SampleRate,
    /// Globally agreed quantisation scales of the group.
    pub scales: GroupScales,
}

/// Grows one tree of a round on the backend it is given, for the team of that index (0 when
/// one team grows them all): what [`HistBackend::grow_round`] calls for every tree.
pub type GrowTree<'a> = dyn Fn(usize, &TreeSetup, &mut dyn TreeBackend) -> Result<Tree> + Sync + 'a;

/// What growing one tree asks of a backend: start it, build its nodes' histograms, move
/// its rows to the children of its splits and sum its leaves exactly. The grower sees only
/// this.
pub trait TreeBackend: Send {
    /// Quantises the group's gradients, samples rows and resets the partition to the root;
    /// returns the rows in the root on this shard.
    fn start_tree(&mut self, setup: &TreeSetup) -> Result<u64>;

    /// Histograms of `nodes`, written one after another into `out` (every entry is
    /// overwritten).
    fn build_histograms(&mut self, nodes: &[NodeId], out: &mut [HistBin]) -> Result<()>;

    /// Whether [`TreeBackend::build_histograms_occupied`] sets the bits of the bins rows
    /// occupy more narrowly than all of them (a shard stored as sparse rows).
    fn tracks_occupancy(&self) -> bool {
        false
    }

    /// Builds as [`TreeBackend::build_histograms`] does into `out`, which arrives zeroed,
    /// and sets in `occupied` (zeroed, [`crate::occupancy::words_for`]`(total_bins)` words
    /// a node, node after node) the bit of every bin a row of the node falls in; other
    /// bits may be set too (this default sets them all). Row-based, not value-based: a
    /// child's rows are among its parent's, so its occupied bins are among the parent's
    /// bits even where the parent's rows cancel to [0, 0].
    fn build_histograms_occupied(
        &mut self,
        nodes: &[NodeId],
        out: &mut [HistBin],
        occupied: &mut [u64],
    ) -> Result<()> {
        occupied.fill(u64::MAX);
        self.build_histograms(nodes, out)
    }

    /// Builds the histograms of `nodes` as [`TreeBackend::build_histograms`] does and packs
    /// node i's `2 * total_bins` values at lane width `widths[i]` on the device, exactly as
    /// the `packed` codec packs them (lane j of a word weighted by 2^(w·j), wrapping i64),
    /// the nodes' words one after another: the histograms never reach the host unpacked,
    /// and a transport that adds 64-bit integers sums the words as they are. `None` where
    /// the backend has no packing kernel (the host packs).
    fn build_packed_histograms(
        &mut self,
        nodes: &[NodeId],
        widths: &[u32],
    ) -> Result<Option<Vec<i64>>> {
        let _ = (nodes, widths);
        Ok(None)
    }

    /// Builds the histograms of `nodes` for a reduce-scatter by bin block, and encodes on
    /// the device what this worker sends each block's owner: for every block `b` of
    /// `blocks` (ranges of bins within a node's histogram) but `own`, the nodes' values in
    /// bins `blocks[b]`, node after node (g, h of each bin), group-encoded as the `auto`
    /// codec encodes them (the bytes after its tag). Writes each node's `own` block into
    /// `hists` (node i's bins at `i * total_bins`; its other bins are left unspecified) and
    /// returns the messages by block, empty for `own`: only the encoded bytes and this
    /// worker's own block reach the host. `None` where the backend has no encoder: nothing
    /// was built, and the host builds and encodes.
    fn build_encoded_blocks(
        &mut self,
        nodes: &[NodeId],
        blocks: &[std::ops::Range<usize>],
        own: usize,
        hists: &mut [HistBin],
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let _ = (nodes, blocks, own, hists);
        Ok(None)
    }

    /// Moves each split node's rows to its children; returns (left, right) rows per split.
    fn apply_splits(&mut self, splits: &[NodeSplit]) -> Result<Vec<[u64; 2]>>;

    /// Exact fixed-point (Σg, Σh) of each node's rows, for refitting leaves in low-bit mode.
    fn exact_sums(&mut self, nodes: &[NodeId]) -> Result<Vec<HistBin>>;

    /// Σ [`crate::quantise::square_term`]`(g, 2^shift)` over each node's rows, g the row's
    /// gradient of the tree's group: what the noise within a node's categorical levels is
    /// measured with (integers, so summed over workers exactly).
    fn square_sums(&mut self, nodes: &[NodeId], shift: i32) -> Result<Vec<i64>>;
}

/// A device holding one shard of the binned rows, its gradients and its row partition.
///
/// The CPU backend is the reference; every other backend must give the same integers.
/// A node's histogram is `total_bins` [`HistBin`]s.
pub trait HistBackend: TreeBackend {
    /// Rows in this shard.
    fn num_rows(&self) -> usize;

    /// Computes every group's gradients from the current margins; returns this shard's
    /// largest |g| and largest h per group.
    fn compute_gradients(&mut self) -> Result<Vec<[f32; 2]>>;

    /// Replaces every group's gradients with `grad` (`groups` per row, row-major), computed
    /// on the host: losses without a kernel, ranking, custom objectives.
    fn set_gradients(&mut self, grad: &[[f32; 2]]) -> Result<()>;

    /// The setups of a round's trees, one a group in the order they will start, given after
    /// the round's gradients and before its first tree: a backend may build what the trees
    /// share ahead of them (the CPU backend builds several groups' root histograms in one
    /// pass over the bins). The default builds nothing.
    fn start_round(&mut self, setups: &[TreeSetup]) -> Result<()> {
        let _ = setups;
        Ok(())
    }

    /// Adds the finished tree's leaf values to the group's margins.
    fn update_margins(&mut self, tree: &Tree, group: usize) -> Result<()>;

    /// The shard's current margins, `groups` per row (for tests and diagnostics).
    fn margins(&self) -> Result<Vec<f32>>;

    /// How many of a round's `trees` the backend grows at once ([`HistBackend::grow_round`]),
    /// when the grower keeps up to `grower_bytes` for each tree it grows (its nodes'
    /// histograms); 1 (the default) where it grows them one after another.
    fn round_teams(&self, trees: usize, grower_bytes: usize) -> usize {
        let _ = (trees, grower_bytes);
        1
    }

    /// Grows a round's trees (the setups `start_round` would be given, one a group) with
    /// `grow`, on `teams` teams at once (as [`HistBackend::round_teams`] gave), and adds each
    /// tree's leaf values to its group's margins as [`HistBackend::update_margins`] after
    /// each would: returns the trees in the order of `setups`, the same trees `grow` gives
    /// one after another. `None` where the backend does not (the default, or fewer teams
    /// than two): nothing was done.
    fn grow_round(
        &mut self,
        setups: &[TreeSetup],
        teams: usize,
        grow: &GrowTree<'_>,
    ) -> Option<Result<Vec<Tree>>> {
        let _ = (setups, teams, grow);
        None
    }

    /// Whether the backend's work runs on the calling thread's rayon pool (the CPU
    /// backend): a single worker then keeps the pool's threads awake while it trains (see
    /// [`crate::warm_pool`]). A GPU backend waits on its device instead.
    fn runs_on_pool(&self) -> bool {
        false
    }

    /// What ran, e.g. "cpu" or `"wgpu: <adapter>"`, so a run can show which backend it used.
    fn name(&self) -> String {
        // test doubles need not name themselves
        "unnamed".into()
    }
}
