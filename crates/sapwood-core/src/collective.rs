//! The `Collective` trait: how workers agree on scales and sum histograms.

use crate::error::Result;

/// Bytes moved by a collective, for reports and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommStats {
    /// Bytes this worker sent on the wire.
    pub bytes_sent: u64,
    /// Bytes it would have sent without compression.
    pub bytes_uncompressed: u64,
    /// Sum-reductions performed.
    pub allreduce_calls: u64,
    /// Blocks sent in each encoding, so a run shows the codec it chose per block.
    pub blocks: BlockCounts,
    /// Blocks a device backend encoded (group-encoded, or packed in lanes), sent as they
    /// came (counted in `blocks.groups` or `blocks.packed` too): the histograms reached the
    /// host only encoded.
    pub device_encoded: u64,
    /// Wall time inside collective calls, in nanoseconds, on whichever thread made them:
    /// with `comm_overlap` the histogram exchange runs beside the builds, so this is the
    /// communication time to set against the whole.
    pub busy_nanos: u64,
}

impl CommStats {
    /// The traffic of `self` less that of `earlier` (a round's share of a running total).
    pub fn since(&self, earlier: &CommStats) -> CommStats {
        CommStats {
            bytes_sent: self.bytes_sent - earlier.bytes_sent,
            bytes_uncompressed: self.bytes_uncompressed - earlier.bytes_uncompressed,
            allreduce_calls: self.allreduce_calls - earlier.allreduce_calls,
            blocks: self.blocks.since(&earlier.blocks),
            device_encoded: self.device_encoded - earlier.device_encoded,
            busy_nanos: self.busy_nanos - earlier.busy_nanos,
        }
    }
}

/// Histogram blocks sent, by the encoding the codec chose for each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCounts {
    /// Plain 64-bit values (`none`).
    pub plain: u64,
    /// Values packed at their proven width (`packed`; a transport's own sum counts once).
    pub packed: u64,
    /// (index, value) pairs of the nonzero values.
    pub sparse: u64,
    /// A bitmap of the nonzero values, then the values.
    pub bitmap: u64,
    /// Groups of 32 values at their own width (`auto`).
    pub groups: u64,
}

impl BlockCounts {
    /// The counts of `self` less those of `earlier` (a round's share of a running total).
    pub fn since(&self, earlier: &BlockCounts) -> BlockCounts {
        BlockCounts {
            plain: self.plain - earlier.plain,
            packed: self.packed - earlier.packed,
            sparse: self.sparse - earlier.sparse,
            bitmap: self.bitmap - earlier.bitmap,
            groups: self.groups - earlier.groups,
        }
    }

    /// The counts of both.
    pub fn plus(&self, other: &BlockCounts) -> BlockCounts {
        BlockCounts {
            plain: self.plain + other.plain,
            packed: self.packed + other.packed,
            sparse: self.sparse + other.sparse,
            bitmap: self.bitmap + other.bitmap,
            groups: self.groups + other.groups,
        }
    }
}

/// Communication among the workers of one training job (one per worker).
///
/// Every call is collective: all workers make the same calls in the same order. Errors are
/// values; implementations bound every wait so a dead peer is an error, not a hang.
pub trait Collective: Send {
    /// This worker's index in `0..world_size()`.
    fn rank(&self) -> usize;

    /// Number of workers.
    fn world_size(&self) -> usize;

    /// Element-wise sum over workers, in place. `bound` is a proven bound on the absolute
    /// value of every *reduced* element, which lets implementations narrow lanes exactly.
    fn allreduce_sum(&mut self, data: &mut [i64], bound: u64) -> Result<()>;

    /// Sum over workers of consecutive segments of `segment` values (one node's histogram
    /// each), segment i bounded by `bounds[i]`: tighter bounds allow narrower lanes.
    fn allreduce_segments(
        &mut self,
        data: &mut [i64],
        segment: usize,
        bounds: &[u64],
    ) -> Result<()> {
        let _ = segment;
        self.allreduce_sum(data, bounds.iter().copied().max().unwrap_or(0))
    }

    /// Sum over workers of the ranges `blocks` (one per worker), each worker needing only
    /// its own: afterwards `data[blocks[rank]]` is the global sum (others are unspecified).
    fn reduce_scatter(
        &mut self,
        data: &mut [i64],
        blocks: &[std::ops::Range<usize>],
        bound: u64,
    ) -> Result<()> {
        let _ = blocks;
        self.allreduce_sum(data, bound)
    }

    /// This transport's exchange of histograms a device encoded, where it has one (see
    /// [`DeviceExchange`]); `None`, the default, has the host encode them.
    fn device_exchange(&mut self) -> Option<&mut dyn DeviceExchange> {
        None
    }

    /// Element-wise maximum over workers, in place.
    fn allreduce_max(&mut self, data: &mut [u64]) -> Result<()>;

    /// Every worker's bytes, indexed by rank.
    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>>;

    /// Every worker's bytes, indexed by rank, on `root` only (`None` elsewhere): where one
    /// worker computes from everyone's data, the others need not hold it too.
    fn gather(&mut self, data: &[u8], root: usize) -> Result<Option<Vec<Vec<u8>>>> {
        if root >= self.world_size() {
            return Err(crate::error::Error::Collective(format!(
                "gather to worker {root} of a job of {}",
                self.world_size()
            )));
        }
        let all = self.allgather(data)?;
        Ok((self.rank() == root).then_some(all))
    }

    /// Replaces `data` on every worker with `root`'s.
    fn broadcast(&mut self, data: &mut Vec<u8>, root: usize) -> Result<()>;

    /// Traffic so far.
    fn stats(&self) -> CommStats {
        CommStats::default()
    }

    /// Whether the grower may exchange one chunk of a level's histograms on a second thread
    /// while it builds the next (the `comm_overlap` run option): the sums are exact, so the
    /// model is the same either way.
    fn overlap(&self) -> bool {
        false
    }
}

/// The exchanges of histograms a GPU backend already encoded on its device, which only
/// transports whose wire a device can write offer (through
/// [`Collective::device_exchange`]): blocks in the `auto` codec's group encoding, words
/// packed at the `packed` codec's lane widths. The sums are those of
/// [`Collective::reduce_scatter`] and [`Collective::allreduce_segments`], byte for byte.
pub trait DeviceExchange {
    /// Whether [`DeviceExchange::reduce_scatter_encoded`] takes blocks a device group-encoded
    /// (the `auto` codec over a transport of bytes): the grower then asks the backend for
    /// them.
    fn takes_encoded_blocks(&mut self) -> bool;

    /// [`Collective::reduce_scatter`] where this worker holds its own block's values in
    /// `own` and its share of every other block `b` only as the group encoding a device
    /// made of it (`encoded[b]`, the bytes after the tag; empty for its own); `lens[b]` is
    /// block b's number of values. Afterwards `own` is the global sum of this worker's block.
    fn reduce_scatter_encoded(
        &mut self,
        own: &mut [i64],
        lens: &[usize],
        encoded: Vec<Vec<u8>>,
    ) -> Result<()>;

    /// The lane widths at which this collective takes segments bounded by `bounds` already
    /// packed (the `packed` codec over a transport that sums 64-bit words itself), so that a
    /// backend packs them on its device; `None` where it packs on the host.
    fn packed_widths(&mut self, bounds: &[u64]) -> Option<Vec<u32>>;

    /// Sums `words` over workers (segments of `segment` values, segment i packed at
    /// `widths[i]` as [`DeviceExchange::packed_widths`] gave) and unpacks the sums into `out`.
    fn allreduce_packed(
        &mut self,
        words: Vec<i64>,
        widths: &[u32],
        segment: usize,
        out: &mut [i64],
    ) -> Result<()>;
}

/// The collective of a job with one worker: every operation is the identity.
#[derive(Debug, Default, Clone, Copy)]
pub struct SingleWorker;

impl Collective for SingleWorker {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        1
    }
    fn allreduce_sum(&mut self, _data: &mut [i64], _bound: u64) -> Result<()> {
        Ok(())
    }
    fn allreduce_max(&mut self, _data: &mut [u64]) -> Result<()> {
        Ok(())
    }
    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        Ok(vec![data.to_vec()])
    }
    fn broadcast(&mut self, _data: &mut Vec<u8>, _root: usize) -> Result<()> {
        Ok(())
    }
}
