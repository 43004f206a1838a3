//! [`RingCollective`]: the engine's `Collective` over any transport, with exact codecs.

use sapwood_core::collective::{Collective, CommStats, DeviceExchange};
use sapwood_core::params::CommCodec;
use sapwood_core::Result;

use crate::codec::{self, lane_width, pack, Encoder};
use crate::transport::Transport;
use crate::{pairwise, ring};

/// A worker's collective: ring algorithms (or the transport's own integer sum, fed packed
/// words) over a transport, histograms encoded with a codec, traffic counted.
pub struct RingCollective<T: Transport> {
    t: T,
    enc: Encoder,
    stats: CommStats,
    overlap: bool,
}

impl<T: Transport> RingCollective<T> {
    /// A collective over `transport` encoding sums with `codec`.
    pub fn new(transport: T, codec: CommCodec) -> Self {
        RingCollective {
            t: transport,
            enc: Encoder::new(codec),
            stats: CommStats::default(),
            overlap: true,
        }
    }

    /// The same collective, letting the grower exchange histograms behind its builds or
    /// not (the `comm_overlap` run option; on by default).
    pub fn with_overlap(mut self, overlap: bool) -> Self {
        self.overlap = overlap;
        self
    }

    /// Runs `f`, adding its wall time to the traffic's busy time.
    fn timed<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let start = std::time::Instant::now();
        let r = f(self);
        self.stats.busy_nanos += start.elapsed().as_nanos() as u64;
        r
    }
}

impl<T: Transport> RingCollective<T> {
    /// The transport underneath (e.g. to abort an MPI job).
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.t
    }
}

// the operations themselves; the trait times each call
impl<T: Transport> RingCollective<T> {
    fn sum_segments(&mut self, data: &mut [i64], segment: usize, bounds: &[u64]) -> Result<()> {
        if self.t.size() == 1 || data.is_empty() {
            return Ok(());
        }
        if bounds.len() != data.len().div_ceil(segment.max(1)) {
            return Err(sapwood_core::Error::Collective(format!(
                "{} bounds for {} segments",
                bounds.len(),
                data.len().div_ceil(segment.max(1))
            )));
        }
        self.stats.allreduce_calls += 1;
        // `auto` stays on the ring, where sparse blocks can win; `packed` uses the transport's
        // own integer sum when it has one
        if self.enc.codec() == CommCodec::Packed && self.t.sums_natively() {
            // a transport that adds 64-bit integers reduces packed words directly; each
            // segment is packed at its own proven width
            let widths: Vec<u32> = bounds.iter().map(|&b| lane_width(b)).collect();
            let words: Vec<i64> = data
                .chunks(segment.max(1))
                .zip(&widths)
                .flat_map(|(seg, &w)| pack(seg, w))
                .collect();
            return self.sum_words(words, &widths, segment, data);
        }
        let bound = ring::segment_bound(bounds, segment.max(1));
        ring::allreduce(&mut self.t, data, &bound, &mut self.enc, &mut self.stats)
    }

    fn sum_blocks(
        &mut self,
        data: &mut [i64],
        blocks: &[std::ops::Range<usize>],
        bound: u64,
    ) -> Result<()> {
        if self.t.size() == 1 {
            return Ok(());
        }
        self.stats.allreduce_calls += 1;
        pairwise::reduce_scatter(
            &mut self.t,
            data,
            blocks,
            bound,
            &mut self.enc,
            &mut self.stats,
        )
    }

    fn sum_encoded_blocks(
        &mut self,
        own: &mut [i64],
        lens: &[usize],
        encoded: Vec<Vec<u8>>,
    ) -> Result<()> {
        if self.t.size() == 1 {
            return Ok(());
        }
        self.stats.allreduce_calls += 1;
        pairwise::reduce_scatter_encoded(&mut self.t, own, lens, encoded, &mut self.stats)
    }

    /// Sums packed words with the transport's own sum and unpacks them into `data`.
    fn sum_words(
        &mut self,
        mut words: Vec<i64>,
        widths: &[u32],
        segment: usize,
        data: &mut [i64],
    ) -> Result<()> {
        codec::check_segments(words.len(), widths, segment, data.len())?;
        match self.t.native_sum(&mut words) {
            Some(done) => done?,
            None => {
                return Err(sapwood_core::Error::Collective(
                    "this transport cannot sum packed words".into(),
                ))
            }
        }
        let p = self.t.size() as u64;
        // what each worker sends in a ring allreduce: 2 (p - 1) / p of the message
        self.stats.bytes_sent += 2 * (p - 1) * 8 * words.len() as u64 / p;
        self.stats.bytes_uncompressed += 2 * (p - 1) * 8 * data.len() as u64 / p;
        self.stats.blocks.packed += 1;
        codec::unpack_segments(&words, widths, segment, data);
        Ok(())
    }

    fn max_all(&mut self, data: &mut [u64]) -> Result<()> {
        if self.t.size() == 1 {
            return Ok(());
        }
        let mine: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        for other in ring::gather_bytes(&mut self.t, &mine, &mut self.stats)? {
            if other.len() != mine.len() {
                return Err(sapwood_core::Error::Collective(
                    "workers disagree on a maximum's length".into(),
                ));
            }
            for (d, c) in data.iter_mut().zip(other.chunks_exact(8)) {
                *d = (*d).max(u64::from_le_bytes(c.try_into().unwrap()));
            }
        }
        Ok(())
    }

    fn gather_all(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        if self.t.size() == 1 {
            return Ok(vec![data.to_vec()]);
        }
        ring::gather_bytes(&mut self.t, data, &mut self.stats)
    }

    fn gather_to(&mut self, data: &[u8], root: usize) -> Result<Option<Vec<Vec<u8>>>> {
        let (r, p) = (self.t.rank(), self.t.size());
        if root >= p {
            return Err(sapwood_core::Error::Collective(format!(
                "gather to worker {root} of a job of {p}"
            )));
        }
        if r != root {
            self.stats.bytes_sent += data.len() as u64;
            self.stats.bytes_uncompressed += data.len() as u64;
            self.t.send(root, data.to_vec())?;
            return Ok(None);
        }
        (0..p)
            .map(|from| {
                if from == root {
                    Ok(data.to_vec())
                } else {
                    self.t.recv(from)
                }
            })
            .collect::<Result<_>>()
            .map(Some)
    }

    fn broadcast_from(&mut self, data: &mut Vec<u8>, root: usize) -> Result<()> {
        let (r, p) = (self.t.rank(), self.t.size());
        if p == 1 {
            return Ok(());
        }
        if r == root {
            for to in (0..p).filter(|&to| to != root) {
                self.stats.bytes_sent += data.len() as u64;
                self.stats.bytes_uncompressed += data.len() as u64;
                self.t.send(to, data.clone())?;
            }
        } else {
            *data = self.t.recv(root)?;
        }
        Ok(())
    }
}

impl<T: Transport> Collective for RingCollective<T> {
    fn rank(&self) -> usize {
        self.t.rank()
    }

    fn world_size(&self) -> usize {
        self.t.size()
    }

    fn allreduce_sum(&mut self, data: &mut [i64], bound: u64) -> Result<()> {
        self.timed(|c| c.sum_segments(data, data.len().max(1), &[bound]))
    }

    fn allreduce_segments(
        &mut self,
        data: &mut [i64],
        segment: usize,
        bounds: &[u64],
    ) -> Result<()> {
        self.timed(|c| c.sum_segments(data, segment, bounds))
    }

    fn reduce_scatter(
        &mut self,
        data: &mut [i64],
        blocks: &[std::ops::Range<usize>],
        bound: u64,
    ) -> Result<()> {
        self.timed(|c| c.sum_blocks(data, blocks, bound))
    }

    fn allreduce_max(&mut self, data: &mut [u64]) -> Result<()> {
        self.timed(|c| c.max_all(data))
    }

    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.timed(|c| c.gather_all(data))
    }

    fn gather(&mut self, data: &[u8], root: usize) -> Result<Option<Vec<Vec<u8>>>> {
        self.timed(|c| c.gather_to(data, root))
    }

    fn broadcast(&mut self, data: &mut Vec<u8>, root: usize) -> Result<()> {
        self.timed(|c| c.broadcast_from(data, root))
    }

    fn stats(&self) -> CommStats {
        self.stats
    }

    fn overlap(&self) -> bool {
        self.overlap
    }

    fn device_exchange(&mut self) -> Option<&mut dyn DeviceExchange> {
        Some(self)
    }
}

impl<T: Transport> DeviceExchange for RingCollective<T> {
    fn packed_widths(&mut self, bounds: &[u64]) -> Option<Vec<u32>> {
        (self.enc.codec() == CommCodec::Packed && self.t.size() > 1 && self.t.sums_natively())
            .then(|| bounds.iter().map(|&b| lane_width(b)).collect())
    }

    fn allreduce_packed(
        &mut self,
        words: Vec<i64>,
        widths: &[u32],
        segment: usize,
        out: &mut [i64],
    ) -> Result<()> {
        self.timed(|c| {
            c.stats.allreduce_calls += 1;
            c.stats.device_encoded += 1;
            c.sum_words(words, widths, segment, out)
        })
    }

    fn takes_encoded_blocks(&mut self) -> bool {
        // `auto` sends the group encoding, which a device makes byte for byte
        self.enc.codec() == CommCodec::Auto && self.t.size() > 1
    }

    fn reduce_scatter_encoded(
        &mut self,
        own: &mut [i64],
        lens: &[usize],
        encoded: Vec<Vec<u8>>,
    ) -> Result<()> {
        self.timed(|c| c.sum_encoded_blocks(own, lens, encoded))
    }
}
