//! Pairwise reduce-scatter: every worker sends each peer that peer's block of its own
//! histogram, directly.
//!
//! Against the ring it moves the same number of values, (P-1)/P of the data per worker, but
//! what is encoded is a worker's own histogram rather than a running partial sum: fewer rows
//! behind each bin, so more zero bins and narrower values. And no message waits on another
//! being decoded first, so a slow worker delays its peers once, not at every step.

use std::ops::Range;

use sapwood_core::collective::CommStats;
use sapwood_core::Result;

use crate::codec::{self, Encoder};
use crate::ring;
use crate::transport::Transport;

/// Afterwards `data[blocks[rank]]` holds the sum over all workers (other blocks are left as
/// they were). `bound` bounds every value and every sum of them in the block.
pub fn reduce_scatter(
    t: &mut dyn Transport,
    data: &mut [i64],
    blocks: &[Range<usize>],
    bound: u64,
    enc: &mut Encoder,
    stats: &mut CommStats,
) -> Result<()> {
    let (r, p) = (t.rank(), t.size());
    ring::one_block_per_worker(blocks, p)?;
    let own = blocks[r].clone();
    // round s pairs each worker with the ones s ahead and s behind; like the ring's steps,
    // this relies on `exchange` not blocking on its send (MPI's sends are immediate)
    let (sends, from) = rounds(r, p, |to| {
        let send = blocks[to].clone();
        let msg = enc.encode(&data[send.clone()], bound);
        stats.bytes_sent += msg.len() as u64;
        codec::count_block(&msg, &mut stats.blocks);
        stats.bytes_uncompressed += 8 * send.len() as u64;
        msg
    });
    let received = t.exchange_all(sends, &from)?;
    // decoding after the exchange keeps it off every peer's path
    for msg in received {
        codec::decode_into(&msg, &mut data[own.clone()], true)?;
        enc.recycle(msg);
    }
    Ok(())
}

/// [`reduce_scatter`] where this worker's share of each other block came group-encoded
/// from its device (`encoded[b]`, the bytes after the tag): the same messages to the same
/// peers in the same rounds, so workers that encode on the host and on a device mix.
/// Afterwards `own` (block `rank`, `lens[rank]` values) holds the sum over all workers.
pub fn reduce_scatter_encoded(
    t: &mut dyn Transport,
    own: &mut [i64],
    lens: &[usize],
    encoded: Vec<Vec<u8>>,
    stats: &mut CommStats,
) -> Result<()> {
    let (r, p) = (t.rank(), t.size());
    if lens.len() != p || encoded.len() != p || own.len() != lens[r] {
        return Err(sapwood_core::Error::Collective(format!(
            "a reduce-scatter of {} blocks ({} encoded, {} values of its own where block {r} \
             has {}) among {p} workers",
            lens.len(),
            encoded.len(),
            own.len(),
            lens.get(r).copied().unwrap_or(0)
        )));
    }
    let (sends, from) = rounds(r, p, |to| {
        let msg = codec::groups_message(&encoded[to]);
        stats.bytes_sent += msg.len() as u64;
        codec::count_block(&msg, &mut stats.blocks);
        stats.device_encoded += 1;
        stats.bytes_uncompressed += 8 * lens[to] as u64;
        msg
    });
    let received = t.exchange_all(sends, &from)?;
    for msg in received {
        codec::decode_into(&msg, own, true)?;
    }
    Ok(())
}

/// The rounds of worker `r` of `p`: round s sends `message(r + s)` to the worker s ahead
/// and receives from the one s behind; returns the sends and the senders, by round.
fn rounds(
    r: usize,
    p: usize,
    mut message: impl FnMut(usize) -> Vec<u8>,
) -> (Vec<(usize, Vec<u8>)>, Vec<usize>) {
    (1..p)
        .map(|s| {
            let (to, from) = ((r + s) % p, (r + p - s) % p);
            ((to, message(to)), from)
        })
        .unzip()
}
