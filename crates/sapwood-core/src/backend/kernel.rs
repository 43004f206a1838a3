//! The CPU histogram kernel: the hot loop of training.
//!
//! Rows of a deep node are scattered over the shard, so the loop is bound by memory latency;
//! it prefetches the bins and gradients of rows a little ahead. Indexing is unchecked: the
//! backend validates at construction that every bin is inside its feature's histogram and
//! only ever stores row indices below the row count.
#![allow(unsafe_code)]

use std::ops::Range;

/// How many rows ahead to prefetch.
const AHEAD: usize = 16;

#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint and never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A bin type of the binned matrix.
pub trait BinValue: Copy + Send + Sync {
    /// The bin as an index.
    fn index(self) -> usize;
}

impl BinValue for u8 {
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

impl BinValue for u16 {
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

/// A histogram entry: (Σg, Σh) as two i64, or both packed in one i64 in low-bit mode.
pub trait HistValue: Copy + Send + Sync + Default {
    /// Adds another entry.
    fn add(&mut self, other: Self);
}

impl HistValue for [i64; 2] {
    #[inline(always)]
    fn add(&mut self, o: Self) {
        self[0] += o[0];
        self[1] += o[1];
    }
}

impl HistValue for i64 {
    #[inline(always)]
    fn add(&mut self, o: Self) {
        *self += o;
    }
}

/// Packs a low-bit (g, h) with h >= 0: the sum of packed values is the packed sum while
/// |Σg| < 2^31 and Σh < 2^32.
#[inline]
pub fn pack(g: i64, h: i64) -> i64 {
    (g << 32) + h
}

/// Inverse of [`pack`] for a sum.
#[inline]
pub fn unpack(v: i64) -> [i64; 2] {
    let h = v & 0xffff_ffff;
    [(v - h) >> 32, h]
}

/// Adds each row's (g, h) to the bins of features `feats`: `hist` starts at the first of
/// them (`offsets[feats.start]`), so threads can fill disjoint ranges of one histogram.
///
/// Caller guarantees: every `r` in `rows` satisfies `(r + 1) * nf <= bins.len()` and
/// `r < gh.len()` (nf = `offsets.len() - 1` features a row), `feats` lies within `0..nf`,
/// and `offsets[f] - offsets[feats.start] + bins[r * nf + f] < hist.len()` for every f in
/// `feats`.
pub fn accumulate<B: BinValue, V: HistValue>(
    rows: &[u32],
    bins: &[B],
    offsets: &[u32],
    feats: Range<usize>,
    gh: &[V],
    hist: &mut [V],
) {
    let nf = offsets.len() - 1;
    debug_assert!(feats.end <= nf);
    debug_assert!(rows
        .iter()
        .all(|&r| (r as usize + 1) * nf <= bins.len() && (r as usize) < gh.len()));
    let base = offsets[feats.start];
    let (first, last) = (feats.start, feats.end.saturating_sub(1));
    for (i, &r) in rows.iter().enumerate() {
        if let Some(&ahead) = rows.get(i + AHEAD) {
            let a = ahead as usize * nf;
            prefetch(bins.as_ptr().wrapping_add(a + first));
            // the bins may straddle two cache lines
            prefetch(bins.as_ptr().wrapping_add(a + last));
            prefetch(gh.as_ptr().wrapping_add(ahead as usize));
        }
        let r = r as usize;
        // SAFETY: see the function's contract; checked by the backend's constructor.
        unsafe {
            let v = *gh.get_unchecked(r);
            let row = bins.get_unchecked(r * nf + feats.start..r * nf + feats.end);
            let offs = offsets.get_unchecked(feats.clone());
            for (b, &off) in row.iter().zip(offs) {
                hist.get_unchecked_mut((off - base) as usize + b.index())
                    .add(v);
            }
        }
    }
}

/// [`accumulate`] for every row of a contiguous range (the root when all rows are in the
/// bag).
pub fn accumulate_all<B: BinValue, V: HistValue>(
    rows: Range<usize>,
    bins: &[B],
    offsets: &[u32],
    feats: Range<usize>,
    gh: &[V],
    hist: &mut [V],
) {
    let nf = offsets.len() - 1;
    let base = offsets[feats.start];
    let offs = &offsets[feats.clone()];
    for (row, &v) in bins[rows.start * nf..rows.end * nf]
        .chunks_exact(nf)
        .zip(&gh[rows])
    {
        for (b, &off) in row[feats.clone()].iter().zip(offs) {
            // SAFETY: the backend's constructor checked every bin against its feature's range.
            unsafe { hist.get_unchecked_mut((off - base) as usize + b.index()) }.add(v);
        }
    }
}

/// Compacts the rows going left (by `left` of the row's bin in `column`) to the front of
/// `rows`, in order, and copies the others to the front of `right`; returns how many went
/// left. Branch-free: the direction of a row is unpredictable, so both writes happen and
/// only the cursors move by the predicate.
///
/// # Safety
/// Every `r` in `rows` must satisfy `r < column.len()` (the backend only ever stores row
/// indices below the row count, and a column holds every row).
#[inline(always)]
pub unsafe fn split_rows<B: BinValue>(
    rows: &mut [u32],
    right: &mut [u32],
    column: &[B],
    left: impl Fn(usize) -> bool,
) -> usize {
    assert!(
        right.len() >= rows.len(),
        "a right buffer as long as the rows"
    );
    debug_assert!(rows.iter().all(|&r| (r as usize) < column.len()));
    let (mut nl, mut nr) = (0usize, 0usize);
    for i in 0..rows.len() {
        // the rows of a deep node are sparse in the column: its bins are gathered
        if let Some(&ahead) = rows.get(i + AHEAD) {
            prefetch(column.as_ptr().wrapping_add(ahead as usize));
        }
        // SAFETY: nl, nr <= i < rows.len() <= right.len(); r < column.len() by the contract.
        unsafe {
            let r = *rows.get_unchecked(i);
            let go = left(column.get_unchecked(r as usize).index()) as usize;
            *rows.get_unchecked_mut(nl) = r;
            *right.get_unchecked_mut(nr) = r;
            nl += go;
            nr += 1 - go;
        }
    }
    nl
}
