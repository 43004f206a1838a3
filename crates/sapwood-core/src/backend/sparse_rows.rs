//! Sparse rows: each row's bins other than its feature's most common one, for shards whose
//! rows are mostly that one bin (one-hot and text-like columns, absent entries missing).
//!
//! A histogram then costs a row's few uncommon bins rather than one add per feature, and
//! each feature's common bin is filled in after: the rows' sums less the feature's other
//! bins. The entries are integers, so that difference is exactly what the dense build adds
//! up, and the histogram is the dense one bit for bit whichever bin is called common.
#![allow(unsafe_code)]

use std::ops::Range;

use rayon::prelude::*;

use super::kernel::{prefetch_to, BinValue, HistValue, Level, PartRows};
use crate::data::binned::BinsRef;
use crate::data::sparse_bins::{SparseBinsRef, SparseColumn};
use crate::occupancy;

/// A shard is stored sparse where its uncommon bins are at most this fraction (one over it)
/// of its entries: a sparse add reads an index and lands anywhere in the histogram, where
/// a dense one reads a byte and lands in its feature's run, so sparse pays only well below
/// one entry in two (one in eight leaves a margin for the fill-in of the common bins).
const MAX_DENSITY_INVERSE: usize = 8;
/// Rows a task of the conversion takes.
const ROWS_PER_TASK: usize = 4096;
/// Features whose bins a task of the conversion counts: 64 bytes of a row of u8 bins.
const COUNT_TILE: usize = 64;
/// Rows whose bins a task of the conversion counts (a dense shard of few features is one
/// tile: its rows still spread over the threads).
const COUNT_ROWS: usize = 65_536;
/// How many rows ahead the build prefetches a row's start and value ([`NEAR`]: its
/// entries, whose place is known once the start has arrived).
const FAR: usize = 32;
/// See [`FAR`].
const NEAR: usize = 12;

/// A shard's rows as their uncommon bins.
#[derive(Debug)]
pub(super) struct SparseRows {
    /// where each row's entries start in `entries`, and where the last ends
    starts: Vec<u64>,
    /// each row's uncommon bins as histogram indices (a feature's offset plus the bin), in
    /// feature order, row after row
    entries: Vec<u32>,
    /// each feature's most common bin, as a histogram index
    common: Vec<u32>,
    /// the histogram's bins (every entry is below)
    width: usize,
}

impl SparseRows {
    /// The rows of `bins` (`n` rows of `nf` features, row-major) by their uncommon bins,
    /// where they are few enough to pay ([`MAX_DENSITY_INVERSE`]); features' bins start at
    /// `offsets`.
    pub(super) fn of(bins: BinsRef<'_>, n: usize, offsets: &[u32]) -> Option<SparseRows> {
        match bins {
            BinsRef::U8(b) => Self::of_typed(b, n, offsets),
            BinsRef::U16(b) => Self::of_typed(b, n, offsets),
            BinsRef::Sparse(s) => Self::of_columns(s, offsets),
        }
    }

    /// The rows of bins held by column (always sparse enough: see
    /// [`crate::data::sparse_bins::DENSITY_INVERSE`]), each feature's absent bin as its
    /// common one; none where the entries pass u32 indices or the offsets are too few.
    fn of_columns(bins: SparseBinsRef<'_>, offsets: &[u32]) -> Option<SparseRows> {
        let (n, nf) = (bins.n_rows(), bins.n_features());
        if offsets.len() != nf + 1 {
            return None;
        }
        let columns: Vec<SparseColumn<'_>> = (0..nf).map(|f| bins.column(f)).collect();
        let total: usize = columns.iter().map(|c| c.rows.len()).sum();
        if total > u32::MAX as usize {
            return None;
        }
        let mut starts = vec![0u64; n + 1];
        for c in &columns {
            for &r in c.rows {
                starts[r as usize - c.first + 1] += 1;
            }
        }
        for r in 0..n {
            starts[r + 1] += starts[r];
        }
        // features in order, so each row's entries come in feature order
        let mut next: Vec<u64> = starts[..n].to_vec();
        let mut entries = vec![0u32; total];
        for (f, c) in columns.iter().enumerate() {
            for (&r, &b) in c.rows.iter().zip(c.bins) {
                let at = &mut next[r as usize - c.first];
                entries[*at as usize] = offsets[f] + u32::from(b);
                *at += 1;
            }
        }
        let common = columns
            .iter()
            .zip(offsets)
            .map(|(c, &o)| o + u32::from(c.absent))
            .collect();
        Some(SparseRows {
            starts,
            entries,
            common,
            width: offsets[nf] as usize,
        })
    }

    fn of_typed<B: BinValue + PartialEq>(
        bins: &[B],
        n: usize,
        offsets: &[u32],
    ) -> Option<SparseRows> {
        let nf = offsets.len() - 1;
        if n == 0 || nf == 0 {
            return None;
        }
        let tiles: Vec<Range<usize>> = (0..nf)
            .step_by(COUNT_TILE)
            .map(|f| f..(f + COUNT_TILE).min(nf))
            .collect();
        let counted = match B::bytes(bins) {
            Some(bytes) => majorities(bytes, n, offsets, &tiles)?,
            None => most_common(bins, n, offsets, &tiles),
        };
        Self::from_common(bins, n, offsets, counted)
    }

    /// The shard's rows by their bins other than `counted`'s (each feature's most common
    /// bin as a histogram index, and the rows it holds), where they are few enough to pay.
    fn from_common<B: BinValue + PartialEq>(
        bins: &[B],
        n: usize,
        offsets: &[u32],
        counted: Vec<(u32, usize)>,
    ) -> Option<SparseRows> {
        let nf = offsets.len() - 1;
        let uncommon: usize = counted.iter().map(|&(_, c)| n - c).sum();
        if uncommon.checked_mul(MAX_DENSITY_INVERSE)? > n * nf || uncommon > u32::MAX as usize {
            return None;
        }
        let common: Vec<u32> = counted.iter().map(|&(b, _)| b).collect();
        // the common bins as bin values, to compare whole rows with in lanes
        let common_bins: Vec<B> = (0..nf)
            .map(|f| {
                let bin = (common[f] - offsets[f]) as usize;
                *bins[..n * nf]
                    .iter()
                    .skip(f)
                    .step_by(nf)
                    .find(|b| b.index() == bin)
                    .expect("the most common bin holds a row")
            })
            .collect();
        // each feature whose bin in row r is not its common one, in order: byte bins are
        // compared eight at a time (most of a sparse row's words are all common)
        let bytes = B::bytes(bins).zip(B::bytes(&common_bins));
        let uncommon_of = |r: usize, each: &mut dyn FnMut(usize)| match bytes {
            Some((b, c)) => each_differing_byte(&b[r * nf..(r + 1) * nf], c, each),
            None => {
                let row = bins[r * nf..(r + 1) * nf].iter().zip(&common_bins);
                for (f, (b, c)) in row.enumerate() {
                    if b != c {
                        each(f);
                    }
                }
            }
        };
        // each block of rows counts its entries, then writes them at its place
        let counts: Vec<usize> = (0..n.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .map(|t| {
                let mut count = 0;
                for r in t * ROWS_PER_TASK..((t + 1) * ROWS_PER_TASK).min(n) {
                    uncommon_of(r, &mut |_| count += 1);
                }
                count
            })
            .collect();
        let mut entries = vec![0u32; uncommon];
        let mut starts = vec![0u64; n + 1];
        let mut pieces = Vec::with_capacity(counts.len());
        {
            let (mut rest, mut rest_starts) = (entries.as_mut_slice(), &mut starts[1..]);
            let mut first = 0u64;
            for (t, &count) in counts.iter().enumerate() {
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(count);
                let len = ROWS_PER_TASK.min(n - t * ROWS_PER_TASK);
                let (ends, stail) = std::mem::take(&mut rest_starts).split_at_mut(len);
                pieces.push((t, mine, ends, first));
                first += count as u64;
                rest = tail;
                rest_starts = stail;
            }
        }
        pieces.into_par_iter().for_each(|(t, mine, ends, first)| {
            let mut at = 0;
            for (i, end) in ends.iter_mut().enumerate() {
                let r = t * ROWS_PER_TASK + i;
                let row = &bins[r * nf..(r + 1) * nf];
                uncommon_of(r, &mut |f| {
                    mine[at] = offsets[f] + row[f].index() as u32;
                    at += 1;
                });
                *end = first + at as u64;
            }
        });
        Some(SparseRows {
            starts,
            entries,
            common,
            width: offsets[nf] as usize,
        })
    }

    /// Uncommon bins a row holds, on average (at least 1).
    pub(super) fn entries_per_row(&self) -> usize {
        (self.entries.len() / (self.starts.len() - 1).max(1)).max(1)
    }

    /// Zeroes `hist` (a whole histogram, bins at `offsets`) unless it is `zeroed` already,
    /// and builds in it the histogram of `rows` from each row's `values`. With `occupied`
    /// (zeroed, a bit per bin), sets the bit of every bin a row falls in: each entry's,
    /// and every feature's common bin.
    ///
    /// # Panics
    /// If `hist` is not as long as the histograms the rows were stored for, or `occupied`
    /// has fewer bits.
    pub(super) fn build<V: HistValue>(
        &self,
        rows: &PartRows<'_>,
        offsets: &[u32],
        values: &[V],
        hist: &mut [V],
        occupied: Option<&mut [u64]>,
        zeroed: bool,
    ) {
        // the unchecked adds below rely on it
        assert_eq!(hist.len(), self.width, "a whole histogram");
        if !zeroed {
            hist.fill(V::default());
        }
        let Some(bits) = occupied else {
            let total = self.add_rows(rows, values, hist, &mut |_| {});
            for (f, &common) in self.common.iter().enumerate() {
                let bins = &hist[offsets[f] as usize..offsets[f + 1] as usize];
                let mut rest = total;
                rest.sub(bins.iter().fold(V::default(), |mut s, &b| {
                    s.add(b);
                    s
                }));
                // the common bin was never added to, so the feature's sum left it out
                hist[common as usize] = rest;
            }
            return;
        };
        assert!(
            bits.len() >= occupancy::words_for(self.width),
            "a bit per bin"
        );
        let total = self.add_rows(rows, values, hist, &mut |e| {
            // SAFETY: `e` is below the histogram's width (see `add_row`), and `bits` holds
            // a bit for each bin (asserted above)
            unsafe { *bits.get_unchecked_mut(e / 64) |= 1 << (e % 64) }
        });
        for (f, &common) in self.common.iter().enumerate() {
            // the bins without a bit hold no row: [0, 0], as the common bin still is
            let mut rest = total;
            occupancy::each_set(bits, offsets[f] as usize, offsets[f + 1] as usize, |b| {
                rest.sub(hist[b])
            });
            hist[common as usize] = rest;
            occupancy::set(bits, common as usize);
        }
    }

    /// Adds `rows`' values at their entries, calling `mark` with each entry; returns the
    /// values' sum.
    #[inline(always)]
    fn add_rows<V: HistValue>(
        &self,
        rows: &PartRows<'_>,
        values: &[V],
        hist: &mut [V],
        mark: &mut impl FnMut(usize),
    ) -> V {
        match rows {
            PartRows::Listed(listed) => self.add_listed(listed, values, hist, mark),
            PartRows::All(all) => all.clone().fold(V::default(), |mut total, r| {
                let v = values[r];
                self.add_row(r, v, hist, mark);
                total.add(v);
                total
            }),
        }
    }

    /// Adds `rows`' values at their entries, prefetching rows ahead (a deep node's rows are
    /// scattered); returns the values' sum.
    #[inline(always)]
    fn add_listed<V: HistValue>(
        &self,
        rows: &[u32],
        values: &[V],
        hist: &mut [V],
        mark: &mut impl FnMut(usize),
    ) -> V {
        let mut total = V::default();
        for (i, &r) in rows.iter().enumerate() {
            if let Some(&far) = rows.get(i + FAR) {
                prefetch_to(self.starts.as_ptr().wrapping_add(far as usize), Level::L2);
                prefetch_to(values.as_ptr().wrapping_add(far as usize), Level::L2);
            }
            if let Some(&near) = rows.get(i + NEAR) {
                let at = self.starts[near as usize] as usize;
                prefetch_to(self.entries.as_ptr().wrapping_add(at), Level::L1);
                prefetch_to(values.as_ptr().wrapping_add(near as usize), Level::L1);
            }
            let v = values[r as usize];
            self.add_row(r as usize, v, hist, mark);
            total.add(v);
        }
        total
    }

    #[inline(always)]
    fn add_row<V: HistValue>(&self, r: usize, v: V, hist: &mut [V], mark: &mut impl FnMut(usize)) {
        let entries = &self.entries[self.starts[r] as usize..self.starts[r + 1] as usize];
        for &e in entries {
            mark(e as usize);
            // SAFETY: every entry is a feature's offset plus one of its bins (the shard's
            // bins are validated below their feature's width), so below the histogram's
            // width, which `build` asserts `hist` is
            unsafe { hist.get_unchecked_mut(e as usize).add(v) };
        }
    }
}

/// Calls `each(j)` for every `j` where `row[j] != common[j]`, in order, comparing eight
/// bytes at a time.
#[inline(always)]
fn each_differing_byte(row: &[u8], common: &[u8], each: &mut dyn FnMut(usize)) {
    let words = row.len() / 8 * 8;
    for (k, (a, c)) in row[..words]
        .chunks_exact(8)
        .zip(common[..words].chunks_exact(8))
        .enumerate()
    {
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("eight bytes"));
        let mut x = word(a) ^ word(c);
        while x != 0 {
            let byte = x.trailing_zeros() as usize / 8;
            each(8 * k + byte);
            x &= !(0xff << (8 * byte));
        }
    }
    for (j, (a, c)) in row.iter().zip(common).enumerate().skip(words) {
        if a != c {
            each(j);
        }
    }
}

/// Each feature's most common bin of `tiles` (the lowest of equals, as a histogram index)
/// and how many rows it holds, counted a tile of features and a block of rows at a time: a
/// row's piece of the tile is one read, and the tile's counts stay in cache (a whole row's
/// would not, on a wide shard); the blocks' counts are summed.
fn most_common<B: BinValue>(
    bins: &[B],
    n: usize,
    offsets: &[u32],
    tiles: &[Range<usize>],
) -> Vec<(u32, usize)> {
    let nf = offsets.len() - 1;
    let blocks = n.div_ceil(COUNT_ROWS);
    let counts: Vec<Vec<usize>> = (0..tiles.len() * blocks)
        .into_par_iter()
        .map(|task| {
            let (tile, block) = (&tiles[task / blocks], task % blocks);
            let rows = block * COUNT_ROWS..((block + 1) * COUNT_ROWS).min(n);
            let base = offsets[tile.start] as usize;
            let mut counts = vec![0usize; offsets[tile.end] as usize - base];
            for row in bins[rows.start * nf..rows.end * nf].chunks_exact(nf) {
                for (f, b) in tile.clone().zip(&row[tile.clone()]) {
                    counts[offsets[f] as usize - base + b.index()] += 1;
                }
            }
            counts
        })
        .collect();
    let counted: Vec<(u32, usize)> = tiles
        .iter()
        .zip(counts.chunks(blocks))
        .flat_map(|(tile, parts)| {
            let mut sum = parts[0].clone();
            for p in &parts[1..] {
                sum.iter_mut().zip(p).for_each(|(s, c)| *s += c);
            }
            let base = offsets[tile.start] as usize;
            tile.clone()
                .map(|f| {
                    let at = offsets[f] as usize - base..offsets[f + 1] as usize - base;
                    let (bin, &most) = sum[at]
                        .iter()
                        .enumerate()
                        .rev()
                        .max_by_key(|&(_, c)| c)
                        .expect("a feature has a bin");
                    (offsets[f] + bin as u32, most)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    counted
}

/// A majority vote's state in each lane of a tile: a candidate bin and its lead.
type Votes = ([u8; COUNT_TILE], [u32; COUNT_TILE]);

/// Merges the vote of a later block of rows into `vote`: it cancels pairs of different bins,
/// as the vote itself does, so a bin held by more than half the rows of both blocks
/// survives (a wrong candidate would only cost the exact count; it never changes the
/// answer, which the candidates' counted rows decide).
fn merge_votes((cand, lead): &mut Votes, (c2, l2): &Votes) {
    for j in 0..COUNT_TILE {
        if cand[j] == c2[j] {
            lead[j] += l2[j];
        } else if lead[j] >= l2[j] {
            lead[j] -= l2[j];
        } else {
            (cand[j], lead[j]) = (c2[j], l2[j] - lead[j]);
        }
    }
}

/// [`most_common`] of byte bins where each feature has a bin held by more than half the
/// rows (then it is the most common, with no tie: the counting's answer), or `None` where
/// the features without one already leave too many uncommon bins for sparse rows (a dense
/// shard). Each tile's candidates come from a majority vote in vector lanes (Boyer–Moore:
/// a bin held by more than half the rows survives it, block by block and through the
/// blocks' merge), then their rows are counted; tiles where some feature has no majority
/// are counted bin by bin. On a sparse shard this replaces a scattered count of every byte
/// by two passes of compares.
fn majorities(
    bins: &[u8],
    n: usize,
    offsets: &[u32],
    tiles: &[Range<usize>],
) -> Option<Vec<(u32, usize)>> {
    let nf = offsets.len() - 1;
    let blocks = n.div_ceil(COUNT_ROWS);
    let rows_of = |block: usize| block * COUNT_ROWS..((block + 1) * COUNT_ROWS).min(n);
    let per_block: Vec<Votes> = (0..tiles.len() * blocks)
        .into_par_iter()
        .map(|task| {
            let (tile, rows) = (&tiles[task / blocks], rows_of(task % blocks));
            let (mut cand, mut lead) = ([0u8; COUNT_TILE], [0u32; COUNT_TILE]);
            for row in bins[rows.start * nf..rows.end * nf].chunks_exact(nf) {
                for ((c, l), &b) in cand.iter_mut().zip(lead.iter_mut()).zip(&row[tile.clone()]) {
                    let take = *l == 0;
                    *c = if take { b } else { *c };
                    *l = if take || b == *c { *l + 1 } else { *l - 1 };
                }
            }
            (cand, lead)
        })
        .collect();
    let votes: Vec<[u8; COUNT_TILE]> = per_block
        .chunks(blocks)
        .map(|parts| {
            let mut vote = parts[0];
            for other in &parts[1..] {
                merge_votes(&mut vote, other);
            }
            vote.0
        })
        .collect();
    let held: Vec<[u32; COUNT_TILE]> = (0..tiles.len() * blocks)
        .into_par_iter()
        .map(|task| {
            let (t, rows) = (task / blocks, rows_of(task % blocks));
            let (tile, cand) = (&tiles[t], &votes[t]);
            let mut held = [0u32; COUNT_TILE];
            for row in bins[rows.start * nf..rows.end * nf].chunks_exact(nf) {
                for ((h, &c), &b) in held.iter_mut().zip(cand).zip(&row[tile.clone()]) {
                    *h += (b == c) as u32;
                }
            }
            held
        })
        .collect();
    let rows = |t: usize, j: usize| -> usize {
        held[t * blocks..(t + 1) * blocks]
            .iter()
            .map(|h| h[j] as usize)
            .sum()
    };
    // a feature without a majority leaves at least half its rows outside its most common
    // bin: where that bound already fails the density test, the exact count would too
    let lower: usize = tiles
        .iter()
        .enumerate()
        .flat_map(|(t, tile)| (0..tile.len()).map(move |j| (t, j)))
        .map(|(t, j)| n - rows(t, j).max(n - n.div_ceil(2)))
        .sum();
    if lower.checked_mul(MAX_DENSITY_INVERSE)? > n * nf {
        return None;
    }
    // the tiles where some feature has no majority are counted bin by bin, together
    let unsettled = |t: usize| (0..tiles[t].len()).any(|j| 2 * rows(t, j) <= n);
    let apart: Vec<Range<usize>> = (0..tiles.len())
        .filter(|&t| unsettled(t))
        .map(|t| tiles[t].clone())
        .collect();
    let mut counted_apart = most_common(bins, n, offsets, &apart).into_iter();
    Some(
        tiles
            .iter()
            .enumerate()
            .flat_map(|(t, tile)| {
                if unsettled(t) {
                    counted_apart.by_ref().take(tile.len()).collect::<Vec<_>>()
                } else {
                    tile.clone()
                        .enumerate()
                        .map(|(j, f)| (offsets[f] + votes[t][j] as u32, rows(t, j)))
                        .collect()
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::kernel::{pack, unpack};

    fn brute(rows: &[u32], bins: &[u8], offsets: &[u32], gh: &[[i64; 2]]) -> Vec<[i64; 2]> {
        let nf = offsets.len() - 1;
        let mut h = vec![[0i64; 2]; offsets[nf] as usize];
        for &r in rows {
            for f in 0..nf {
                let e = &mut h[(offsets[f] + bins[r as usize * nf + f] as u32) as usize];
                e[0] += gh[r as usize][0];
                e[1] += gh[r as usize][1];
            }
        }
        h
    }

    /// A sparse shard: most entries are bin 0 (missing), a few features dense, and one
    /// feature whose common bin is not 0.
    fn shard(n: usize) -> (Vec<u8>, Vec<u32>, Vec<[i64; 2]>) {
        let widths = [
            2u32, 5, 3, 40, 2, 7, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
        ];
        let nf = widths.len();
        let mut offsets = vec![0u32];
        for w in widths {
            offsets.push(offsets.last().unwrap() + w);
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut bins = vec![0u8; n * nf];
        for r in 0..n {
            for f in 0..nf {
                let w = widths[f] as u64;
                bins[r * nf + f] = match f {
                    // a dense feature
                    3 => (next() % w) as u8,
                    // mostly bin 2
                    2 => {
                        if next() % 10 == 0 {
                            (next() % w) as u8
                        } else {
                            2
                        }
                    }
                    _ => {
                        if next() % 40 == 0 {
                            (1 + next() % (w - 1)) as u8
                        } else {
                            0
                        }
                    }
                };
            }
        }
        let gh = (0..n)
            .map(|_| [(next() % 2001) as i64 - 1000, (next() % 500) as i64])
            .collect();
        (bins, offsets, gh)
    }

    #[test]
    fn sparse_builds_are_the_dense_histograms() {
        let n = 5000;
        let (bins, offsets, gh) = shard(n);
        let nf = offsets.len() - 1;
        let sparse = SparseRows::of(BinsRef::U8(&bins), n, &offsets).expect("sparse enough");
        assert_eq!(
            sparse.common[2],
            offsets[2] + 2,
            "the common bin need not be 0"
        );
        let width = offsets[nf] as usize;
        let all: Vec<u32> = (0..n as u32).collect();
        let some: Vec<u32> = (0..n as u32).filter(|r| r % 3 != 1).collect();
        let mut hist = vec![[7i64; 2]; width];
        sparse.build(&PartRows::All(0..n), &offsets, &gh, &mut hist, None, false);
        assert_eq!(hist, brute(&all, &bins, &offsets, &gh));
        sparse.build(
            &PartRows::Listed(&some),
            &offsets,
            &gh,
            &mut hist,
            None,
            false,
        );
        assert_eq!(hist, brute(&some, &bins, &offsets, &gh));
        sparse.build(
            &PartRows::Listed(&[]),
            &offsets,
            &gh,
            &mut hist,
            None,
            false,
        );
        assert_eq!(hist, vec![[0; 2]; width]);
        // packed low-bit values: the common bins' differences unpack to the same sums
        let packed: Vec<i64> = gh.iter().map(|&[g, h]| pack(g, h)).collect();
        let mut ph = vec![0i64; width];
        sparse.build(
            &PartRows::Listed(&some),
            &offsets,
            &packed,
            &mut ph,
            None,
            false,
        );
        let unpacked: Vec<[i64; 2]> = ph.into_iter().map(unpack).collect();
        assert_eq!(unpacked, brute(&some, &bins, &offsets, &gh));
    }

    #[test]
    fn builds_with_bits_set_them_at_every_bin_a_row_falls_in() {
        let n = 5000;
        let (bins, offsets, gh) = shard(n);
        let nf = offsets.len() - 1;
        let sparse = SparseRows::of(BinsRef::U8(&bins), n, &offsets).expect("sparse enough");
        let width = offsets[nf] as usize;
        // few rows: most bins hold none
        for rows in [
            vec![],
            vec![3u32],
            (0..n as u32).filter(|r| r % 97 == 5).collect(),
        ] {
            let mut hist = vec![[7i64; 2]; width];
            let mut bits = vec![0u64; occupancy::words_for(width)];
            sparse.build(
                &PartRows::Listed(&rows),
                &offsets,
                &gh,
                &mut hist,
                Some(&mut bits),
                false,
            );
            assert_eq!(hist, brute(&rows, &bins, &offsets, &gh));
            let mut fallen = vec![false; width];
            for &r in &rows {
                for f in 0..nf {
                    fallen[offsets[f] as usize + bins[r as usize * nf + f] as usize] = true;
                }
            }
            for (b, &fell) in fallen.iter().enumerate() {
                let bit = bits[b / 64] >> (b % 64) & 1 == 1;
                // a row's bin has its bit; other bits are only the common bins'
                assert!(!fell || bit, "bin {b} holds a row");
                assert!(
                    fell || !bit || sparse.common.contains(&(b as u32)),
                    "bin {b}"
                );
            }
        }
    }

    #[test]
    fn dense_shards_stay_dense() {
        let n = 2000;
        let (mut bins, offsets, _) = shard(n);
        let nf = offsets.len() - 1;
        // every feature's bins spread out: no bin is common
        for (i, b) in bins.iter_mut().enumerate() {
            let f = i % nf;
            *b = (i / nf % (offsets[f + 1] - offsets[f]) as usize) as u8;
        }
        assert!(SparseRows::of(BinsRef::U8(&bins), n, &offsets).is_none());
    }

    #[test]
    fn merged_votes_keep_a_majority_of_both_blocks() {
        // lane 0: 9 leads the first block by 5, 4 the second by 40 (4 holds most rows of
        // both); lane 1: the same bin leads both; lane 2: 7 leads the first by 40 and 4 the
        // second by 5
        let mut first: Votes = ([0; COUNT_TILE], [0; COUNT_TILE]);
        let mut second = first;
        first.0[..3].copy_from_slice(&[9, 3, 7]);
        first.1[..3].copy_from_slice(&[5, 6, 40]);
        second.0[..3].copy_from_slice(&[4, 3, 4]);
        second.1[..3].copy_from_slice(&[40, 2, 5]);
        merge_votes(&mut first, &second);
        assert_eq!(&first.0[..3], &[4, 3, 7]);
        assert_eq!(&first.1[..3], &[35, 8, 35]);
    }

    #[test]
    fn a_majority_that_loses_a_block_is_still_found() {
        // two blocks of rows: feature 0's bin 4 holds most rows overall but not the first
        // block, where bin 9 leads; feature 1's bin 2 holds exactly half the rows (no
        // majority: its tile is counted bin by bin); the rest are mostly bin 0. Votes merged
        // across blocks must find 4, and a shard where half the features have no majority
        // at all is dense without counting them
        let (n, nf) = (COUNT_ROWS + 40_000, 70);
        let widths: Vec<u32> = (0..nf).map(|f| [12, 7, 3][f % 3]).collect();
        let offsets = sapwood_testkit::data::offsets_of(&widths);
        let mut rng = sapwood_testkit::Rng(0x5851_f42d_4c95_7f2d);
        let mut bins = vec![0u8; n * nf];
        for r in 0..n {
            bins[r * nf] = if r >= COUNT_ROWS || r % 13 < 6 { 4 } else { 9 };
            bins[r * nf + 1] = if r % 2 == 0 {
                2
            } else {
                1 + 2 * (r % 3 == 0) as u8
            };
            for f in 2..nf {
                if rng.below(40) == 0 {
                    bins[r * nf + f] = rng.below(widths[f] as u64) as u8;
                }
            }
        }
        let (want, uncommon) = common_by_columns(&bins, n, &offsets);
        assert_eq!(want[0], offsets[0] + 4);
        let sparse = SparseRows::of(BinsRef::U8(&bins), n, &offsets).expect("sparse");
        assert_eq!(sparse.common, want);
        assert_eq!(sparse.entries.len(), uncommon);
        for r in 0..n {
            for f in (0..nf).step_by(2) {
                bins[r * nf + f] = ((r + f) % widths[f] as usize) as u8;
            }
        }
        assert!(SparseRows::of(BinsRef::U8(&bins), n, &offsets).is_none());
    }

    /// Each feature's most common bin (the lowest of equals) and the rows outside it,
    /// counted column by column.
    fn common_by_columns<B: BinValue>(bins: &[B], n: usize, offsets: &[u32]) -> (Vec<u32>, usize) {
        let nf = offsets.len() - 1;
        let mut uncommon = 0;
        let common = (0..nf)
            .map(|f| {
                let mut counts = vec![0usize; (offsets[f + 1] - offsets[f]) as usize];
                for r in 0..n {
                    counts[bins[r * nf + f].index()] += 1;
                }
                let most = *counts.iter().max().unwrap();
                uncommon += n - most;
                offsets[f] + counts.iter().position(|&c| c == most).unwrap() as u32
            })
            .collect();
        (common, uncommon)
    }

    #[test]
    fn differing_bytes_are_found_eight_at_a_time_in_order() {
        let mut rng = sapwood_testkit::Rng(0x9e37_79b9_7f4a_7c15);
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 200] {
            for rate in [0, 3, 30, 100] {
                let common: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                let row: Vec<u8> = common
                    .iter()
                    .map(|&c| {
                        if (rng.below(100) as usize) < rate {
                            c.wrapping_add(1 + rng.below(255) as u8)
                        } else {
                            c
                        }
                    })
                    .collect();
                let want: Vec<usize> = (0..len).filter(|&j| row[j] != common[j]).collect();
                let mut got = Vec::new();
                each_differing_byte(&row, &common, &mut |j| got.push(j));
                assert_eq!(got, want, "len {len} rate {rate}");
            }
        }
    }

    #[test]
    fn common_bins_counted_in_tiles_and_blocks_are_those_of_the_columns() {
        // three tiles of features (the last short), two blocks of rows, u8 and u16 bins,
        // features wider than 256 bins, common bins other than 0, and a tie
        let (n, nf) = (COUNT_ROWS + 4_322, 2 * COUNT_TILE + 22);
        let widths: Vec<u32> = (0..nf).map(|f| [2, 9, 256, 40, 700][f % 5]).collect();
        let offsets = sapwood_testkit::data::offsets_of(&widths);
        let mut rng = sapwood_testkit::Rng(0x2545_f491_4f6c_dd1d);
        let mut next = move |below: u32| rng.below(below as u64) as u16;
        let mut bins = vec![0u16; n * nf];
        for r in 0..n {
            for (f, &w) in widths.iter().enumerate() {
                bins[r * nf + f] = if f == 7 {
                    // a tie (n is even): half the rows in bin 5, half in bin 3
                    if r % 2 == 0 {
                        5
                    } else {
                        3
                    }
                } else if next(30) == 0 {
                    next(w)
                } else {
                    (f as u32 % w) as u16
                };
            }
        }
        let (want, uncommon) = common_by_columns(&bins, n, &offsets);
        assert_eq!(want[7], offsets[7] + 3, "the lowest of equals");
        let sparse = SparseRows::of(BinsRef::U16(&bins), n, &offsets).expect("sparse");
        assert_eq!(sparse.common, want, "u16");
        assert_eq!(sparse.entries.len(), uncommon);
        // the same bins as bytes, where every feature fits a byte
        let narrow: Vec<u32> = offsets.windows(2).map(|o| (o[1] - o[0]).min(256)).collect();
        let offsets8 = sapwood_testkit::data::offsets_of(&narrow);
        let bytes: Vec<u8> = bins
            .iter()
            .enumerate()
            .map(|(i, &b)| (b as u32 % narrow[i % nf]) as u8)
            .collect();
        let (want, uncommon) = common_by_columns(&bytes, n, &offsets8);
        let sparse = SparseRows::of(BinsRef::U8(&bytes), n, &offsets8).expect("sparse");
        assert_eq!(sparse.common, want, "u8");
        assert_eq!(sparse.entries.len(), uncommon);
    }
}
