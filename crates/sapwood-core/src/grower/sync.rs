//! Histogram synchronisation: local histograms become global ones, and the workers agree on
//! each node's best split. This is LightGBM's data-parallel learner wrapped around the
//! serial one: the grower asks for sums and agreement, and never sees a transport.
//!
//! Small batches are all-reduced whole. Once a batch is large, it is reduce-scattered by
//! feature block: each worker then holds global sums for its own block only, evaluates its
//! own features, and the workers gather their best-split records. Descendants of such a batch
//! are parent − child of block-global histograms, so they stay block-scoped from then on.

use std::ops::Range;

use crate::collective::Collective;
use crate::data::cuts::Cuts;
use crate::error::{Error, Result};
use crate::hist::HistBin;
use crate::split::{pick, BinSet, SplitCandidate, SplitRule};
use crate::wire::{ByteReader, PutBytes};

/// Histograms of a batch at least this large (bytes of i64) are reduce-scattered by feature
/// block instead of all-reduced: each worker then sends half as much, and only best-split
/// records travel back.
pub const BLOCK_THRESHOLD_BYTES: usize = 256 * 1024;

/// Which part of the histograms reduced so far holds global sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every bin.
    Whole,
    /// Only this worker's feature block.
    OwnBlock,
}

/// One worker's side of the histogram exchange for one tree.
pub struct HistSync<'c> {
    collective: &'c mut dyn Collective,
    /// each worker's block of bins within a node's histogram
    blocks: Vec<Range<usize>>,
    /// the tree's features
    features: Vec<usize>,
    /// the tree's features inside this worker's block
    own_features: Vec<usize>,
    scope: Scope,
}

impl<'c> HistSync<'c> {
    /// The exchange of a tree over `features`, histograms laid out by `cuts`.
    pub fn new(collective: &'c mut dyn Collective, cuts: &Cuts, features: &[usize]) -> Self {
        let (blocks, own) = feature_blocks(cuts, collective.world_size(), collective.rank());
        HistSync {
            blocks,
            features: features.to_vec(),
            own_features: features
                .iter()
                .copied()
                .filter(|f| own.contains(f))
                .collect(),
            scope: Scope::Whole,
            collective,
        }
    }

    /// The features whose bins hold global sums: the ones to evaluate.
    pub fn features(&self) -> &[usize] {
        match self.scope {
            Scope::Whole => &self.features,
            Scope::OwnBlock => &self.own_features,
        }
    }

    /// Sums integers exactly over workers; every reduced value is at most `bound`.
    pub fn sum(&mut self, values: &mut [i64], bound: u64) -> Result<()> {
        self.collective.allreduce_sum(values, bound)
    }

    /// Sums a whole histogram (the root's) over workers.
    pub fn sum_whole(&mut self, hist: &mut [HistBin], bound: u64) -> Result<()> {
        self.collective
            .allreduce_sum(hist.as_flattened_mut(), bound)
    }

    /// Whether this worker is the only one: its histograms are global as built.
    pub fn alone(&self) -> bool {
        self.collective.world_size() == 1
    }

    /// Whether the histograms of a level may be exchanged in chunks behind the builds.
    pub fn overlap(&self) -> bool {
        self.collective.overlap() && self.collective.world_size() > 1
    }

    /// Fixes how a level of `bins` histogram bins in all is summed: all-reduced, or
    /// reduce-scattered by feature block once large (see the module). One choice for the
    /// whole level, so that its chunks are summed alike and evaluated over the same features.
    pub fn plan_level(&mut self, bins: usize) {
        if self.collective.world_size() > 1 && 16 * bins >= BLOCK_THRESHOLD_BYTES {
            self.scope = Scope::OwnBlock;
        }
    }

    /// What a GPU backend may encode of this level's histograms on its device (`bounds`
    /// per node): each worker's block when it is reduce-scattered and the collective takes
    /// group-encoded blocks, or every node packed at its lane width when the collective sums
    /// packed words as they are; `None` where the host encodes.
    pub fn device_plan(&mut self, bounds: &[u64]) -> Option<DevicePlan> {
        let own = self.collective.rank();
        let exchange = self.collective.device_exchange()?;
        match self.scope {
            Scope::OwnBlock => exchange.takes_encoded_blocks().then(|| DevicePlan::Blocks {
                blocks: self.blocks.clone(),
                own,
            }),
            Scope::Whole => exchange.packed_widths(bounds).map(DevicePlan::Packed),
        }
    }

    /// Sums a batch of histograms of `width` bins, node i bounded by `bounds[i]`, as the
    /// backend built it: `encoded` on its device, else whole in `hists`.
    pub fn sum_built(
        &mut self,
        hists: &mut [HistBin],
        width: usize,
        bounds: &[u64],
        encoded: Option<Encoded>,
    ) -> Result<()> {
        match encoded {
            Some(e) => self.sum_encoded(hists, width, bounds.len(), e),
            None => self.sum_batch(hists, width, bounds),
        }
    }

    /// Sums a batch of `nodes` histograms of `width` bins that the backend encoded as the
    /// [`HistSync::device_plan`] said: afterwards they are global as after
    /// [`HistSync::sum_batch`].
    fn sum_encoded(
        &mut self,
        hists: &mut [HistBin],
        width: usize,
        nodes: usize,
        encoded: Encoded,
    ) -> Result<()> {
        let own = self.blocks[self.collective.rank()].clone();
        let exchange = self.collective.device_exchange().ok_or_else(|| {
            Error::Collective(
                "histograms encoded on the device for a collective that takes none".into(),
            )
        })?;
        match encoded {
            Encoded::Packed { words, widths } => {
                exchange.allreduce_packed(words, &widths, 2 * width, hists.as_flattened_mut())
            }
            Encoded::Blocks(messages) => {
                let mut mine = Vec::with_capacity(2 * nodes * own.len());
                for n in 0..nodes {
                    mine.extend_from_slice(
                        hists[n * width + own.start..n * width + own.end].as_flattened(),
                    );
                }
                let lens: Vec<usize> = self.blocks.iter().map(|b| 2 * nodes * b.len()).collect();
                exchange.reduce_scatter_encoded(&mut mine, &lens, messages)?;
                for (n, part) in mine.chunks_exact(2 * own.len().max(1)).enumerate() {
                    hists[n * width + own.start..n * width + own.end]
                        .as_flattened_mut()
                        .copy_from_slice(part);
                }
                Ok(())
            }
        }
    }

    /// Sums a batch (a level, or a chunk of one) of histograms of `width` bins each, node i
    /// bounded by `bounds[i]`, as [`HistSync::plan_level`] chose.
    pub fn sum_batch(&mut self, hists: &mut [HistBin], width: usize, bounds: &[u64]) -> Result<()> {
        if self.scope == Scope::OwnBlock {
            let bound = bounds.iter().copied().max().unwrap_or(0);
            self.reduce_blocks(hists, width, bounds.len(), bound)
        } else {
            self.collective
                .allreduce_segments(hists.as_flattened_mut(), 2 * width, bounds)
        }
    }

    /// Reduce-scatter of a batch by feature block: afterwards only this worker's block of
    /// each node is the global sum.
    fn reduce_blocks(
        &mut self,
        hists: &mut [HistBin],
        width: usize,
        nodes: usize,
        bound: u64,
    ) -> Result<()> {
        let mut permuted = Vec::with_capacity(2 * hists.len());
        let mut ranges = Vec::with_capacity(self.blocks.len());
        for b in &self.blocks {
            let start = permuted.len();
            for n in 0..nodes {
                permuted.extend_from_slice(
                    hists[n * width + b.start..n * width + b.end].as_flattened(),
                );
            }
            ranges.push(start..permuted.len());
        }
        self.collective
            .reduce_scatter(&mut permuted, &ranges, bound)?;
        let rank = self.collective.rank();
        let own = &self.blocks[rank];
        let mine = &permuted[ranges[rank].clone()];
        for (n, part) in mine
            .chunks_exact(2 * own.len().max(1))
            .enumerate()
            .take(nodes)
        {
            hists[n * width + own.start..n * width + own.end]
                .as_flattened_mut()
                .copy_from_slice(part);
        }
        Ok(())
    }

    /// Makes every worker's candidates the best over all workers, where each evaluated only
    /// its own block; nothing to do while histograms are whole.
    pub fn agree(&mut self, best: &mut [Option<SplitCandidate>]) -> Result<()> {
        if self.scope == Scope::Whole {
            return Ok(());
        }
        let mut mine = Vec::new();
        for c in best.iter() {
            write_candidate(c.as_ref(), &mut mine);
        }
        let all = self.collective.allgather(&mine)?;
        let mut readers: Vec<ByteReader<'_>> = all
            .iter()
            .map(|b| ByteReader::new(b, "split record"))
            .collect();
        for slot in best.iter_mut() {
            let mut b = None;
            for r in readers.iter_mut() {
                b = pick(b, read_candidate(r)?);
            }
            *slot = b;
        }
        Ok(())
    }
}

/// What a backend encodes of a level on its device, from [`HistSync::device_plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevicePlan {
    /// Group-encode every block of bins but `own` for its owner (a reduce-scatter).
    Blocks {
        /// Each worker's bins within a node's histogram.
        blocks: Vec<Range<usize>>,
        /// This worker's block.
        own: usize,
    },
    /// Pack node i at lane width `widths[i]` (an all-reduce of packed words).
    Packed(Vec<u32>),
}

/// Histograms as a backend encoded them on its device, for `HistSync::sum_encoded`.
#[derive(Debug)]
pub enum Encoded {
    /// The message for each block's owner (empty for this worker's own block, whose bins
    /// are in the histograms).
    Blocks(Vec<Vec<u8>>),
    /// The nodes' packed words, node i at lane width `widths[i]`.
    Packed {
        /// The words, node after node.
        words: Vec<i64>,
        /// Each node's lane width.
        widths: Vec<u32>,
    },
}

/// Contiguous feature blocks balanced by bins, one per worker: the bin ranges within a
/// node's histogram, and this worker's features.
fn feature_blocks(cuts: &Cuts, workers: usize, rank: usize) -> (Vec<Range<usize>>, Range<usize>) {
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
    let bins = (0..workers)
        .map(|b| offsets[bounds[b]] as usize..offsets[bounds[b + 1]] as usize)
        .collect();
    (bins, bounds[rank]..bounds[rank + 1])
}

/// Appends an optional candidate to `out`: the best-split record workers gather.
pub fn write_candidate(c: Option<&SplitCandidate>, out: &mut Vec<u8>) {
    let Some(c) = c else {
        out.put_u8(0);
        return;
    };
    out.put_u8(1);
    out.put_u32(c.feature as u32);
    out.put_u8(c.default_left as u8);
    out.put_f64(c.gain);
    for &v in c.left.iter().chain(&c.right) {
        out.put_i64(v);
    }
    match &c.rule {
        SplitRule::Numeric { bin } => {
            out.put_u8(0);
            out.put_u16(*bin);
        }
        SplitRule::Categorical { left } => {
            out.put_u8(1);
            let bins: Vec<u16> = left.iter().collect();
            out.put_u32(bins.len() as u32);
            for b in bins {
                out.put_u16(b);
            }
        }
    }
}

/// Reads one record [`write_candidate`] wrote; malformed bytes are an error, never a panic.
pub fn read_candidate(r: &mut ByteReader<'_>) -> Result<Option<SplitCandidate>> {
    if r.u8()? == 0 {
        return Ok(None);
    }
    let feature = r.u32()? as usize;
    let default_left = r.u8()? != 0;
    let gain = r.f64()?;
    let mut sums = [0i64; 4];
    for s in &mut sums {
        *s = r.i64()?;
    }
    let rule = if r.u8()? == 0 {
        SplitRule::Numeric { bin: r.u16()? }
    } else {
        let n = r.u32()? as usize;
        let mut bins = Vec::with_capacity(n.min(65_536));
        for _ in 0..n {
            bins.push(r.u16()?);
        }
        SplitRule::Categorical {
            left: BinSet::from_bins(bins),
        }
    };
    Ok(Some(SplitCandidate {
        feature,
        rule,
        default_left,
        gain,
        left: [sums[0], sums[1]],
        right: [sums[2], sums[3]],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_round_trip_and_truncation_is_an_error() {
        let cands = [
            None,
            Some(SplitCandidate {
                feature: 3,
                rule: SplitRule::Numeric { bin: 17 },
                default_left: true,
                gain: 1.25,
                left: [-5, 9],
                right: [i64::MIN, i64::MAX],
            }),
            Some(SplitCandidate {
                feature: 0,
                rule: SplitRule::Categorical {
                    left: BinSet::from_bins([1u16, 64, 300]),
                },
                default_left: false,
                gain: -0.0,
                left: [1, 2],
                right: [3, 4],
            }),
        ];
        let mut bytes = Vec::new();
        for c in &cands {
            write_candidate(c.as_ref(), &mut bytes);
        }
        let mut r = ByteReader::new(&bytes, "split record");
        for c in &cands {
            assert_eq!(&read_candidate(&mut r).unwrap(), c);
        }
        r.finish().unwrap();
        for cut in 1..bytes.len() {
            let mut r = ByteReader::new(&bytes[..cut], "split record");
            let all: Result<Vec<_>> = (0..cands.len()).map(|_| read_candidate(&mut r)).collect();
            assert!(all.is_err(), "a record cut at {cut} bytes was accepted");
        }
    }
}
