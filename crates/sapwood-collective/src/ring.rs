//! Ring reduce-scatter and all-gather, carrying encoded blocks over any transport.

use std::ops::Range;

use sapwood_core::collective::CommStats;
use sapwood_core::{Error, Result};

use crate::codec::{self, Encoder};
use crate::transport::Transport;

/// `parts` near-equal contiguous ranges covering `0..len`.
pub fn even_blocks(len: usize, parts: usize) -> Vec<Range<usize>> {
    (0..parts)
        .map(|i| (i * len / parts)..((i + 1) * len / parts))
        .collect()
}

fn prev(r: usize, s: usize, p: usize) -> usize {
    (r + p - s % p) % p
}

/// An error unless there is one block for each of the `p` workers.
pub(crate) fn one_block_per_worker(blocks: &[Range<usize>], p: usize) -> Result<()> {
    if blocks.len() == p {
        Ok(())
    } else {
        Err(Error::Collective(format!(
            "{} blocks for {p} workers",
            blocks.len()
        )))
    }
}

/// Ring reduce-scatter: afterwards `data[blocks[rank]]` holds the sum over all workers
/// (other blocks hold partial sums). `bound` gives, for a range, a bound on every partial
/// and full sum in it.
pub fn reduce_scatter(
    t: &mut dyn Transport,
    data: &mut [i64],
    blocks: &[Range<usize>],
    bound: &dyn Fn(Range<usize>) -> u64,
    enc: &mut Encoder,
    stats: &mut CommStats,
) -> Result<()> {
    let (r, p) = (t.rank(), t.size());
    one_block_per_worker(blocks, p)?;
    let (next, from) = ((r + 1) % p, prev(r, 1, p));
    for s in 0..p.saturating_sub(1) {
        let send = &blocks[prev(r, s + 1, p)];
        let recv = blocks[prev(r, s + 2, p)].clone();
        let msg = enc.encode(&data[send.clone()], bound(send.clone()));
        stats.bytes_sent += msg.len() as u64;
        codec::count_block(&msg, &mut stats.blocks);
        stats.bytes_uncompressed += 8 * send.len() as u64;
        let got = t.exchange(next, msg, from)?;
        codec::decode_into(&got, &mut data[recv], true)?;
        enc.recycle(got);
    }
    Ok(())
}

/// Ring all-gather: every worker's `data[blocks[its rank]]` reaches every worker.
pub fn all_gather(
    t: &mut dyn Transport,
    data: &mut [i64],
    blocks: &[Range<usize>],
    bound: &dyn Fn(Range<usize>) -> u64,
    enc: &mut Encoder,
    stats: &mut CommStats,
) -> Result<()> {
    let (r, p) = (t.rank(), t.size());
    let (next, from) = ((r + 1) % p, prev(r, 1, p));
    let mut forward: Option<Vec<u8>> = None;
    for s in 0..p.saturating_sub(1) {
        let send = &blocks[prev(r, s, p)];
        let recv = blocks[prev(r, s + 1, p)].clone();
        // a block received in the last step is passed on as it came, not encoded again
        let msg = match forward.take() {
            Some(msg) => msg,
            None => enc.encode(&data[send.clone()], bound(send.clone())),
        };
        stats.bytes_sent += msg.len() as u64;
        codec::count_block(&msg, &mut stats.blocks);
        stats.bytes_uncompressed += 8 * send.len() as u64;
        let got = t.exchange(next, msg, from)?;
        codec::decode_into(&got, &mut data[recv], false)?;
        forward = Some(got);
    }
    if let Some(msg) = forward {
        enc.recycle(msg);
    }
    Ok(())
}

/// Sum over workers of `data`, exactly, by ring reduce-scatter then all-gather.
pub fn allreduce(
    t: &mut dyn Transport,
    data: &mut [i64],
    bound: &dyn Fn(Range<usize>) -> u64,
    enc: &mut Encoder,
    stats: &mut CommStats,
) -> Result<()> {
    let blocks = even_blocks(data.len(), t.size());
    reduce_scatter(t, data, &blocks, bound, enc, stats)?;
    all_gather(t, data, &blocks, bound, enc, stats)
}

/// The bound of a range of values cut into segments of `segment` values with `bounds`.
pub fn segment_bound(bounds: &[u64], segment: usize) -> impl Fn(Range<usize>) -> u64 + '_ {
    move |r: Range<usize>| {
        if r.is_empty() || segment == 0 {
            return 0;
        }
        bounds[r.start / segment..=((r.end - 1) / segment).min(bounds.len() - 1)]
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
    }
}

/// Every worker's bytes, by rank, passed around the ring.
pub fn gather_bytes(
    t: &mut dyn Transport,
    mine: &[u8],
    stats: &mut CommStats,
) -> Result<Vec<Vec<u8>>> {
    let (r, p) = (t.rank(), t.size());
    let mut all = vec![Vec::new(); p];
    all[r] = mine.to_vec();
    let (next, from) = ((r + 1) % p, prev(r, 1, p));
    for s in 0..p.saturating_sub(1) {
        let msg = all[prev(r, s, p)].clone();
        stats.bytes_sent += msg.len() as u64;
        stats.bytes_uncompressed += msg.len() as u64;
        all[prev(r, s + 1, p)] = t.exchange(next, msg, from)?;
    }
    Ok(all)
}
