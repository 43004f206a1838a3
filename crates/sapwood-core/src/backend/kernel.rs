//! The CPU histogram kernel: the hot loop of training.
//!
//! Rows of a deep node are scattered over the shard, so the loop is bound by memory latency;
//! it prefetches the bins and gradients of rows a little ahead. Indexing is unchecked: the
//! backend validates at construction that every bin is inside its feature's histogram and
//! only ever stores row indices below the row count (the padded kernels, which write
//! through a pointer, assert their rows and features themselves).
#![allow(unsafe_code)]

use std::ops::Range;

use crate::hist::HistBin;
use crate::split::BinSet;

/// How many rows ahead to prefetch into L2. A deep node's rows are scattered over the
/// shard, so a row's bins and gradients come from L3 or memory; prefetches into L1 alone
/// are capped by the L1's few outstanding misses (a couple of dozen lines on Zen 4, and a
/// row needs two or three), which bounded the gathers, not the adds. Prefetching far ahead
/// into L2 (whose queue holds more) and near ahead from there into L1 took a node of 4,096
/// scattered rows of 1M × 28 from 47-51 to 21 ns a row in a microbenchmark on a Zen 4 core
/// (32,768 rows: 37-40 to 16-17; a quarter of the rows: 20 to 14-16), where one distance
/// of 48 rows into L1 had been the best single one (see [`NEAR`]).
const FAR: usize = 96;
/// How many rows ahead to prefetch from L2 into L1 (the row was sent to L2 [`FAR`] rows
/// ahead). Before the two stages, one distance into L1 was tuned: 16 rows hid too little
/// once the padded kernels took a row in a fifth less time, 48 beat 32 on a Zen 4 core and
/// equalled it on a Zen 5, 64 was worse.
const NEAR: usize = 24;

/// Where a prefetch puts its line.
#[derive(Clone, Copy)]
pub(super) enum Level {
    L1,
    L2,
}

/// Asks for the line holding `p` at `level` (a hint: any address is fine).
#[inline(always)]
pub(super) fn prefetch_to<T>(p: *const T, level: Level) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint and never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
        match level {
            Level::L1 => _mm_prefetch(p as *const i8, _MM_HINT_T0),
            Level::L2 => _mm_prefetch(p as *const i8, _MM_HINT_T1),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, level);
}

/// Prefetches the bins of `feats` and the value of the rows [`FAR`] entries after entry `i`
/// of `rows` into L2 and [`NEAR`] entries after it into L1, where there are such rows (rows
/// of `nf` bins): a deep node's rows are scattered over the shard.
#[inline(always)]
fn prefetch_ahead<B, V>(
    rows: &[u32],
    i: usize,
    bins: &[B],
    nf: usize,
    feats: &Range<usize>,
    gh: &[V],
) {
    for (ahead, level) in [(FAR, Level::L2), (NEAR, Level::L1)] {
        if let Some(&r) = rows.get(i + ahead) {
            let a = r as usize * nf;
            prefetch_to(bins.as_ptr().wrapping_add(a + feats.start), level);
            // the bins may straddle two cache lines
            prefetch_to(
                bins.as_ptr().wrapping_add(a + feats.end.saturating_sub(1)),
                level,
            );
            prefetch_to(gh.as_ptr().wrapping_add(r as usize), level);
        }
    }
}

/// The rows a histogram part accumulates: a slice of the row array, or (for a root holding
/// every row) a range of rows read in order.
#[derive(Clone)]
pub(super) enum PartRows<'a> {
    /// Rows by index.
    Listed(&'a [u32]),
    /// Every row of a range.
    All(Range<usize>),
}

impl PartRows<'_> {
    /// How many rows.
    pub(super) fn len(&self) -> usize {
        match self {
            PartRows::Listed(r) => r.len(),
            PartRows::All(r) => r.len(),
        }
    }
}

/// A bin type of the binned matrix.
pub trait BinValue: Copy + Send + Sync {
    /// The bin as an index.
    fn index(self) -> usize;
    /// The bins as bytes, where they are bytes (the padded kernels read them a word at a
    /// time).
    fn bytes(bins: &[Self]) -> Option<&[u8]>;
    /// The bins as 16-bit values, where they are (the 16-bit prediction lanes).
    fn words(bins: &[Self]) -> Option<&[u16]>;
}

impl BinValue for u8 {
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }

    fn bytes(bins: &[Self]) -> Option<&[u8]> {
        Some(bins)
    }

    fn words(_: &[Self]) -> Option<&[u16]> {
        None
    }
}

impl BinValue for u16 {
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }

    fn bytes(_: &[Self]) -> Option<&[u8]> {
        None
    }

    fn words(bins: &[Self]) -> Option<&[u16]> {
        Some(bins)
    }
}

/// A histogram entry: (Σg, Σh) as two i64, or both packed in one i64 in low-bit mode.
pub trait HistValue: Copy + Send + Sync + Default {
    /// Adds another entry.
    fn add(&mut self, other: Self);
    /// Takes away another entry (whose sums this one's include).
    fn sub(&mut self, other: Self);
    /// The entry as (Σg, Σh).
    fn bin(self) -> HistBin;
    /// `hist` as entries of this type, where they are the same (built in place, with
    /// nothing to convert).
    fn in_place(hist: &mut [HistBin]) -> Option<&mut [Self]>;
}

impl HistValue for [i64; 2] {
    #[inline(always)]
    fn add(&mut self, o: Self) {
        self[0] += o[0];
        self[1] += o[1];
    }

    #[inline(always)]
    fn sub(&mut self, o: Self) {
        self[0] -= o[0];
        self[1] -= o[1];
    }

    #[inline(always)]
    fn bin(self) -> HistBin {
        self
    }

    fn in_place(hist: &mut [HistBin]) -> Option<&mut [Self]> {
        Some(hist)
    }
}

impl HistValue for i64 {
    #[inline(always)]
    fn add(&mut self, o: Self) {
        *self += o;
    }

    // packing is linear, so the difference of two packed sums is the packed difference
    #[inline(always)]
    fn sub(&mut self, o: Self) {
        *self -= o;
    }

    #[inline(always)]
    fn bin(self) -> HistBin {
        unpack(self)
    }

    fn in_place(_: &mut [HistBin]) -> Option<&mut [Self]> {
        None
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
    for (i, &r) in rows.iter().enumerate() {
        prefetch_ahead(rows, i, bins, nf, &feats, gh);
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

/// Entries a feature takes in a padded histogram: one for each value of a u8 bin, so that
/// feature f's bin b is entry `f * PADDED_BINS + b` whatever the features' widths.
pub const PADDED_BINS: usize = 256;

/// Adds `v` to the padded entries (from `hist`, feature by feature) of one row's u8 `bins`.
/// The bins are read eight to a word and each feature's entries lie at a fixed distance, so
/// an add is one read-modify-write of the histogram, with no load of a bin or of an offset:
/// the loads, not the adds, bound [`accumulate`] (4 memory operations an add against 2).
///
/// # Safety
/// `hist` must point to `bins.len() * PADDED_BINS` entries.
#[inline(always)]
unsafe fn add_row_padded<V: HistValue>(bins: &[u8], v: V, hist: *mut V) {
    let mut h = hist;
    let mut words = bins.chunks_exact(8);
    for word in &mut words {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        for j in 0..8 {
            let b = ((w >> (8 * j)) & 0xff) as usize;
            // SAFETY: feature j of this word owns the PADDED_BINS entries from
            // h + j * PADDED_BINS, within `hist` by the contract; b < PADDED_BINS
            unsafe { (*h.add(j * PADDED_BINS + b)).add(v) };
        }
        // SAFETY: past this word's features, at most one past the end of `hist`
        h = unsafe { h.add(8 * PADDED_BINS) };
    }
    for (j, &b) in words.remainder().iter().enumerate() {
        // SAFETY: as above, for the last features
        unsafe { (*h.add(j * PADDED_BINS + b as usize)).add(v) };
    }
}

/// Panics unless a padded histogram of `len` entries holds features `feats`, ascending
/// and within a row of `nf`.
fn check_padded(len: usize, nf: usize, feats: &Range<usize>) {
    assert_eq!(len, feats.len() * PADDED_BINS, "a padded histogram");
    assert!(
        feats.start <= feats.end && feats.end <= nf,
        "features within a row"
    );
}

/// [`accumulate`] of u8 bins into a padded histogram of features `feats`
/// ([`PADDED_BINS`] entries each, from the first of them).
///
/// # Panics
/// When `hist` is not `feats.len() * PADDED_BINS` long, `feats` lies outside a row, or a
/// row lies outside `bins` or `gh`.
pub fn accumulate_padded<V: HistValue>(
    rows: &[u32],
    bins: &[u8],
    nf: usize,
    feats: Range<usize>,
    gh: &[V],
    hist: &mut [V],
) {
    check_padded(hist.len(), nf, &feats);
    // r < bins.len() / nf is (r + 1) * nf <= bins.len() without the product's overflow
    assert!(
        rows.iter()
            .all(|&r| (nf == 0 || (r as usize) < bins.len() / nf) && (r as usize) < gh.len()),
        "rows within the shard"
    );
    let h = hist.as_mut_ptr();
    for (i, &r) in rows.iter().enumerate() {
        prefetch_ahead(rows, i, bins, nf, &feats, gh);
        let r = r as usize;
        // SAFETY: r < gh.len() and the row's features lie in `bins` (asserted above); `hist`
        // holds the entries of `feats`
        unsafe {
            let row = bins.get_unchecked(r * nf + feats.start..r * nf + feats.end);
            add_row_padded(row, *gh.get_unchecked(r), h);
        }
    }
}

/// [`accumulate_padded`] of every row of a contiguous range.
///
/// # Panics
/// As [`accumulate_padded`].
pub fn accumulate_all_padded<V: HistValue>(
    rows: Range<usize>,
    bins: &[u8],
    nf: usize,
    feats: Range<usize>,
    gh: &[V],
    hist: &mut [V],
) {
    check_padded(hist.len(), nf, &feats);
    let h = hist.as_mut_ptr();
    for (row, &v) in bins[rows.start * nf..rows.end * nf]
        .chunks_exact(nf)
        .zip(&gh[rows])
    {
        // SAFETY: `hist` holds the entries of `feats`, a range within the row
        unsafe { add_row_padded(&row[feats.clone()], v, h) };
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
    // SAFETY: forwarded: the identity keeps every row below column.len()
    unsafe { split_rows_at(rows, right, column, |r| r, left) }
}

/// [`split_rows`] with row `r`'s bin at `bins[at(r)]`: a column (`at` the identity) or one
/// feature of row-major bins (`r * nf + f`, where a sparse shard keeps no column copy).
///
/// # Safety
/// Every `r` in `rows` must satisfy `at(r) < bins.len()`.
#[inline(always)]
pub unsafe fn split_rows_at<B: BinValue>(
    rows: &mut [u32],
    right: &mut [u32],
    bins: &[B],
    at: impl Fn(usize) -> usize,
    left: impl Fn(usize) -> bool,
) -> usize {
    assert!(
        right.len() >= rows.len(),
        "a right buffer as long as the rows"
    );
    debug_assert!(rows.iter().all(|&r| at(r as usize) < bins.len()));
    let (mut nl, mut nr) = (0usize, 0usize);
    for i in 0..rows.len() {
        // the rows of a deep node are sparse in the column: its bins are gathered
        for (ahead, level) in [(FAR, Level::L2), (NEAR, Level::L1)] {
            if let Some(&r) = rows.get(i + ahead) {
                prefetch_to(bins.as_ptr().wrapping_add(at(r as usize)), level);
            }
        }
        // SAFETY: nl, nr <= i < rows.len() <= right.len(); at(r) < bins.len() by the
        // contract.
        unsafe {
            let r = *rows.get_unchecked(i);
            let go = left(bins.get_unchecked(at(r as usize)).index()) as usize;
            *rows.get_unchecked_mut(nl) = r;
            *right.get_unchecked_mut(nr) = r;
            nl += go;
            nr += 1 - go;
        }
    }
    nl
}

/// Bytes [`split_rows_numeric`] may read past a row's bin (its lanes gather four bytes).
pub const COLUMN_PAD: usize = 3;

/// A split's rule over byte bins, as the lanes route rows: numeric at bin `t` (see
/// [`split_rows_numeric`]), or a set of bins as 256 bits (bin b at bit b % 32 of word
/// b / 32), the missing bin 0 in it exactly when missing values go left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRule {
    /// Numeric at bin `t`.
    Numeric {
        /// The last bin going left.
        t: u32,
        /// Whether the missing bin 0 goes left.
        missing_left: bool,
    },
    /// The bins going left.
    Set([u32; 8]),
}

impl ByteRule {
    /// A categorical split's rule: the bins of `left` below 256 (a byte column holds no
    /// other), and bin 0 where missing values go left.
    pub fn set(left: &BinSet, missing_left: bool) -> Self {
        let mut words = [0u32; 8];
        for (i, &w) in left.words().iter().take(4).enumerate() {
            words[2 * i] = w as u32;
            words[2 * i + 1] = (w >> 32) as u32;
        }
        words[0] = (words[0] & !1) | missing_left as u32;
        ByteRule::Set(words)
    }

    /// Whether a row with byte bin `b` goes left.
    #[inline(always)]
    pub fn goes_left(&self, b: usize) -> bool {
        match *self {
            ByteRule::Numeric {
                t,
                missing_left: true,
            } => b <= t as usize,
            ByteRule::Numeric {
                t,
                missing_left: false,
            } => b.wrapping_sub(1) < t as usize,
            ByteRule::Set(words) => (words[(b >> 5) & 7] >> (b & 31)) & 1 != 0,
        }
    }
}

/// [`split_rows`] by a numeric split at bin `t`: a row goes left when its bin b has
/// `b <= t` where missing values (bin 0) go left, else `b.wrapping_sub(1) < t` (bin 0 then
/// never does). Byte bins go sixteen rows a step in 512-bit lanes where the CPU has
/// AVX-512 F, with the same result as one row at a time.
///
/// # Safety
/// Every `r` in `rows` must satisfy `r + COLUMN_PAD < column.len()`.
pub unsafe fn split_rows_numeric<B: BinValue>(
    rows: &mut [u32],
    right: &mut [u32],
    column: &[B],
    t: usize,
    missing_left: bool,
) -> usize {
    if t < u32::MAX as usize {
        let rule = ByteRule::Numeric {
            t: t as u32,
            missing_left,
        };
        // SAFETY: the caller's contract
        if let Some(nl) = unsafe { split_byte_rows_in_lanes(rows, right, column, rule) } {
            return nl;
        }
    }
    // SAFETY: the caller's contract
    unsafe {
        if missing_left {
            split_rows(rows, right, column, |b| b <= t)
        } else {
            split_rows(rows, right, column, |b| b.wrapping_sub(1) < t)
        }
    }
}

/// [`split_rows`] by a categorical split sending the bins of `left` left (and the missing
/// bin 0 where `missing_left`). Byte bins go sixteen rows a step in 512-bit lanes where
/// the CPU has AVX-512 F, looking each bin up in the set's 256 bits, with the same result
/// as one row at a time.
///
/// # Safety
/// Every `r` in `rows` must satisfy `r + COLUMN_PAD < column.len()`.
pub unsafe fn split_rows_categorical<B: BinValue>(
    rows: &mut [u32],
    right: &mut [u32],
    column: &[B],
    left: &BinSet,
    missing_left: bool,
) -> usize {
    let rule = ByteRule::set(left, missing_left);
    // SAFETY: the caller's contract
    if let Some(nl) = unsafe { split_byte_rows_in_lanes(rows, right, column, rule) } {
        return nl;
    }
    // SAFETY: the caller's contract
    unsafe {
        split_rows(rows, right, column, |b| {
            if b == 0 {
                missing_left
            } else {
                left.contains(b as u16)
            }
        })
    }
}

/// [`split_rows_avx512`] where the column holds bytes and the CPU has AVX-512 F; `None`
/// otherwise.
///
/// # Safety
/// Every `r` in `rows` must satisfy `r + COLUMN_PAD < column.len()`.
#[inline(always)]
unsafe fn split_byte_rows_in_lanes<B: BinValue>(
    rows: &mut [u32],
    right: &mut [u32],
    column: &[B],
    rule: ByteRule,
) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(bytes) = B::bytes(column) {
        if crate::simd::avx512_allowed()
            && std::arch::is_x86_feature_detected!("avx512f")
            && bytes.len() <= i32::MAX as usize
            && !matches!(rule, ByteRule::Numeric { t, .. } if t >= i32::MAX as u32)
        {
            // SAFETY: the CPU has AVX-512 F (checked above); the rest is the caller's
            // contract, and every row index fits a gather's signed 32-bit offset
            return Some(unsafe { split_rows_avx512(rows, right, bytes, rule) });
        }
        if crate::simd::avx2()
            && bytes.len() <= i32::MAX as usize
            && !matches!(rule, ByteRule::Numeric { t, .. } if t >= i32::MAX as u32)
        {
            // SAFETY: the CPU has AVX2 (checked by `simd::avx2`); the rest as above
            return Some(unsafe { split_rows_avx2(rows, right, bytes, rule) });
        }
    }
    let _ = (rows, right, column, rule);
    None
}

/// The frame both vector row splits share: the contract checked, whole steps of `LANES`
/// rows split by `step` (the bins of the steps FAR rows ahead prefetched into L2 and NEAR
/// rows ahead into L1, in whole steps: a deep node's rows are sparse in the column), and
/// the rows after the last whole step split one at a time. `step(rows, right, i, nl, nr)`
/// splits rows `i..i + LANES`, storing the left ones from `rows[nl]` and the right ones
/// from `right[nr]`, and returns how many went left.
///
/// # Safety
/// As the vector splits': `step` may rely on `i + LANES <= rows.len()`, `nl, nr <= i`
/// and `right.len() >= rows.len()`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn split_in_steps<const LANES: usize>(
    rows: &mut [u32],
    right: &mut [u32],
    column: &[u8],
    rule: ByteRule,
    mut step: impl FnMut(&mut [u32], &mut [u32], usize, usize, usize) -> usize,
) -> usize {
    assert!(
        right.len() >= rows.len(),
        "a right buffer as long as the rows"
    );
    debug_assert!(rows
        .iter()
        .all(|&r| (r as usize) + COLUMN_PAD < column.len()));
    let len = rows.len();
    let (mut nl, mut nr, mut i) = (0usize, 0usize, 0usize);
    let base = column.as_ptr();
    while i + LANES <= len {
        for (steps, level) in [
            (FAR.div_ceil(LANES), Level::L2),
            (NEAR.div_ceil(LANES), Level::L1),
        ] {
            if let Some(ahead) = rows.get(i + steps * LANES..i + (steps + 1) * LANES) {
                for &a in ahead {
                    prefetch_to(base.wrapping_add(a as usize), level);
                }
            }
        }
        let k = step(rows, right, i, nl, nr);
        nl += k;
        nr += LANES - k;
        i += LANES;
    }
    for j in i..len {
        let r = rows[j];
        let go = rule.goes_left(column[r as usize] as usize) as usize;
        rows[nl] = r;
        right[nr] = r;
        nl += go;
        nr += 1 - go;
    }
    nl
}

/// For each mask of eight lanes, the indices that move its set lanes to the front in order
/// (AVX2 has no compress instruction: a permutation by this table does its work).
#[cfg(target_arch = "x86_64")]
static COMPRESS8: [[u32; 8]; 256] = {
    let mut table = [[0u32; 8]; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut lane, mut k) = (0, 0);
        while lane < 8 {
            if mask >> lane & 1 == 1 {
                table[mask][k] = lane as u32;
                k += 1;
            }
            lane += 1;
        }
        mask += 1;
    }
    table
};

/// [`split_rows_avx512`] in AVX2's eight 32-bit lanes: the same gather of four bytes at
/// each row, the same tests, and each way's rows moved to the front of a register by a
/// permutation from [`COMPRESS8`] and stored whole at its cursor (at most eight entries
/// past it, never past the step just read).
///
/// # Safety
/// The CPU must have AVX2; every `r` in `rows` must satisfy `r + COLUMN_PAD <
/// column.len() <= i32::MAX`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub unsafe fn split_rows_avx2(
    rows: &mut [u32],
    right: &mut [u32],
    column: &[u8],
    rule: ByteRule,
) -> usize {
    use std::arch::x86_64::*;
    const LANES: usize = 8;
    let base = column.as_ptr();
    let byte = _mm256_set1_epi32(0xff);
    let one = _mm256_set1_epi32(1);
    let zero = _mm256_setzero_si256();
    let low5 = _mm256_set1_epi32(31);
    let (threshold, missing_left, words) = match rule {
        ByteRule::Numeric { t, missing_left } => (t, missing_left, [0u32; 8]),
        ByteRule::Set(words) => (0, false, words),
    };
    // bins are below 256 and the threshold below i32::MAX: signed compares order them
    let threshold = _mm256_set1_epi32(threshold as i32);
    // SAFETY: the words are 8 u32, 32 bytes
    let table = unsafe { _mm256_loadu_si256(words.as_ptr().cast()) };
    let is_set = matches!(rule, ByteRule::Set(_));
    let step = |rows: &mut [u32], right: &mut [u32], i: usize, nl: usize, nr: usize| {
        // SAFETY: i + LANES <= rows.len(); every gathered address is r..r + 4 <=
        // column.len() (the contract); the stores are within rows[..i + LANES] and
        // right[..i + LANES] (nl, nr <= i, right.len() >= rows.len()); a mask indexes the
        // 256 rows of COMPRESS8
        unsafe {
            let r = _mm256_loadu_si256(rows.as_ptr().add(i).cast());
            let bins = _mm256_and_si256(_mm256_i32gather_epi32::<1>(base.cast(), r), byte);
            let left = if is_set {
                // word b / 32 of the set (bins are below 256: indices below 8), bit b % 32
                let word = _mm256_permutevar8x32_epi32(table, _mm256_srli_epi32::<5>(bins));
                let bits = _mm256_srlv_epi32(word, _mm256_and_si256(bins, low5));
                _mm256_cmpeq_epi32(_mm256_and_si256(bits, one), one)
            } else {
                let above = _mm256_cmpgt_epi32(bins, threshold);
                let at_most = _mm256_andnot_si256(above, _mm256_set1_epi32(-1));
                if missing_left {
                    at_most
                } else {
                    _mm256_and_si256(at_most, _mm256_cmpgt_epi32(bins, zero))
                }
            };
            let mask = _mm256_movemask_ps(_mm256_castsi256_ps(left)) as usize;
            let to_left = _mm256_loadu_si256(COMPRESS8[mask].as_ptr().cast());
            let to_right = _mm256_loadu_si256(COMPRESS8[!mask & 0xff].as_ptr().cast());
            _mm256_storeu_si256(
                rows.as_mut_ptr().add(nl).cast(),
                _mm256_permutevar8x32_epi32(r, to_left),
            );
            _mm256_storeu_si256(
                right.as_mut_ptr().add(nr).cast(),
                _mm256_permutevar8x32_epi32(r, to_right),
            );
            mask.count_ones() as usize
        }
    };
    // SAFETY: the contract is the caller's; `step` keeps within what the frame promises
    unsafe { split_in_steps::<LANES>(rows, right, column, rule, step) }
}

/// [`split_rows`] of a byte column by `rule`, sixteen rows a step: the step's bins are
/// gathered (four bytes at each row, the first of them its bin), compared with the
/// threshold or looked up in the set's bits, and the rows going each way are compressed to
/// the front of a register stored whole at the cursor: a store reaches at most sixteen
/// entries past the cursor, never past the step just read (`nl <= i`, `nr <= i`), and later
/// stores or the caller's copy of the right rows overwrite its tail.
///
/// # Safety
/// The CPU must have AVX-512 F; every `r` in `rows` must satisfy `r + COLUMN_PAD <
/// column.len() <= i32::MAX`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn split_rows_avx512(
    rows: &mut [u32],
    right: &mut [u32],
    column: &[u8],
    rule: ByteRule,
) -> usize {
    use std::arch::x86_64::*;
    const LANES: usize = 16;
    let base = column.as_ptr();
    let byte = _mm512_set1_epi32(0xff);
    let one = _mm512_set1_epi32(1);
    let low5 = _mm512_set1_epi32(31);
    let (threshold, missing_left, table) = match rule {
        ByteRule::Numeric { t, missing_left } => (t, missing_left, [0u32; 16]),
        ByteRule::Set(words) => {
            let mut table = [0u32; 16];
            table[..8].copy_from_slice(&words);
            (0, false, table)
        }
    };
    let threshold = _mm512_set1_epi32(threshold as i32);
    // SAFETY: the table is 16 u32, 64 bytes
    let table = unsafe { _mm512_loadu_si512(table.as_ptr().cast()) };
    let is_set = matches!(rule, ByteRule::Set(_));
    let step = |rows: &mut [u32], right: &mut [u32], i: usize, nl: usize, nr: usize| {
        // SAFETY: i + LANES <= rows.len(); every gathered address is r..r + 4 <=
        // column.len() (the contract); the stores are within rows[..i + LANES] and
        // right[..i + LANES] (nl, nr <= i, right.len() >= rows.len())
        unsafe {
            let r = _mm512_loadu_si512(rows.as_ptr().add(i).cast());
            let bins = _mm512_and_si512(_mm512_i32gather_epi32::<1>(r, base.cast()), byte);
            let left = if is_set {
                // word b / 32 of the set (bins are below 256: indices below 8), bit b % 32
                let words = _mm512_permutexvar_epi32(_mm512_srli_epi32::<5>(bins), table);
                let bits = _mm512_srlv_epi32(words, _mm512_and_si512(bins, low5));
                _mm512_test_epi32_mask(bits, one)
            } else if missing_left {
                _mm512_cmple_epu32_mask(bins, threshold)
            } else {
                _mm512_cmplt_epu32_mask(_mm512_sub_epi32(bins, one), threshold)
            };
            _mm512_storeu_si512(
                rows.as_mut_ptr().add(nl).cast(),
                _mm512_maskz_compress_epi32(left, r),
            );
            _mm512_storeu_si512(
                right.as_mut_ptr().add(nr).cast(),
                _mm512_maskz_compress_epi32(!left, r),
            );
            left.count_ones() as usize
        }
    };
    // SAFETY: the contract is the caller's; `step` keeps within what the frame promises
    unsafe { split_in_steps::<LANES>(rows, right, column, rule, step) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::SplitRule;

    /// Whether the lanes run on this CPU (else only the row-by-row splits are checked).
    fn lanes() -> bool {
        #[cfg(target_arch = "x86_64")]
        let lanes = crate::simd::avx512_allowed() && std::arch::is_x86_feature_detected!("avx512f");
        #[cfg(not(target_arch = "x86_64"))]
        let lanes = false;
        if !lanes {
            eprintln!("this CPU has no AVX-512 F: only the row-by-row split is checked");
        }
        lanes
    }

    /// Whether the AVX2 lanes run on this CPU (else they are not checked).
    fn avx2() -> bool {
        let avx2 = crate::simd::avx2();
        if !avx2 {
            eprintln!("this CPU has no AVX2 (or it is not allowed): its lanes are not checked");
        }
        avx2
    }

    /// A column of `n` rows whose bins crowd the ends (0 is missing, 255 the last).
    fn byte_column(n: usize) -> Vec<u8> {
        let mut rng = sapwood_testkit::Rng(0x05ee_d0f1_a9e5);
        (0..n + COLUMN_PAD)
            .map(|_| match rng.below(4) {
                0 => 0,
                1 => 255,
                _ => rng.below(256) as u8,
            })
            .collect()
    }

    /// Row sets of a column of `n` rows: empty, shorter than a step, whole steps, sparse.
    fn row_sets(n: usize) -> Vec<Vec<u32>> {
        [
            (0, 1),
            (7, 1),
            (16, 1),
            (31, 2),
            (1_000, 3),
            (n, 1),
            (n, 29),
        ]
        .into_iter()
        .map(|(len, keep)| (0..n as u32).filter(|r| r % keep == 0).take(len).collect())
        .collect()
    }

    /// Asserts that `split` moves `rows` as the partition by `goes_left` of each row's bin
    /// does: the left rows first, in order, and the right rows in order in the scratch.
    fn assert_splits_as(
        what: &str,
        rows: &[u32],
        column: &[u8],
        goes_left: &dyn Fn(usize) -> bool,
        split: &dyn Fn(&mut [u32], &mut [u32]) -> usize,
    ) {
        let (left, right): (Vec<u32>, Vec<u32>) = rows
            .iter()
            .partition(|&&r| goes_left(column[r as usize] as usize));
        let mut r = rows.to_vec();
        let mut s = vec![u32::MAX; rows.len()];
        let nl = split(&mut r, &mut s);
        let what = format!("{what}: {} rows", rows.len());
        assert_eq!(&r[..nl], &left[..], "{what}");
        assert_eq!(&s[..rows.len() - nl], &right[..], "{what}");
    }

    #[test]
    fn numeric_splits_in_lanes_move_the_rows_one_at_a_time_would() {
        let (n, lanes) = (5_000, lanes());
        let column = byte_column(n);
        for rows in row_sets(n) {
            for t in [0usize, 1, 3, 127, 254, 255] {
                for missing_left in [false, true] {
                    let what = format!("t {t}, missing left {missing_left}");
                    let goes_left = |b: usize| {
                        if missing_left {
                            b <= t
                        } else {
                            b.wrapping_sub(1) < t
                        }
                    };
                    // SAFETY: every row is below n and the column holds n + COLUMN_PAD bins
                    assert_splits_as(&what, &rows, &column, &goes_left, &|r, s| unsafe {
                        split_rows_numeric(r, s, &column, t, missing_left)
                    });
                    #[cfg(target_arch = "x86_64")]
                    if lanes {
                        let rule = ByteRule::Numeric {
                            t: t as u32,
                            missing_left,
                        };
                        // SAFETY: as above, and the CPU has AVX-512 F
                        assert_splits_as(&what, &rows, &column, &goes_left, &|r, s| unsafe {
                            split_rows_avx512(r, s, &column, rule)
                        });
                    }
                    #[cfg(target_arch = "x86_64")]
                    if avx2() {
                        // SAFETY: as above, and the CPU has AVX2
                        assert_splits_as(&what, &rows, &column, &goes_left, &|r, s| unsafe {
                            split_rows_avx2(
                                r,
                                s,
                                &column,
                                ByteRule::Numeric {
                                    t: t as u32,
                                    missing_left,
                                },
                            )
                        });
                    }
                }
            }
        }
    }

    #[test]
    fn categorical_splits_in_lanes_move_the_rows_one_at_a_time_would() {
        let (n, lanes) = (5_000, lanes());
        let column = byte_column(n);
        let mut rng = sapwood_testkit::Rng(0xca7e_9041);
        // sets at every word's edges (31, 32, 63, 64, 255), half of the levels at random,
        // every level, none, and one holding the missing bin (which the rule decides alone)
        let random: Vec<u16> = (1..256).filter(|_| rng.below(2) == 0).collect();
        let sets: Vec<Vec<u16>> = vec![
            vec![1],
            vec![31, 32, 63, 64, 95, 96, 127, 128, 255],
            random,
            (1..256).collect(),
            vec![],
            vec![0, 5, 200],
        ];
        for bins in &sets {
            let set = BinSet::from_bins(bins.iter().copied());
            for missing_left in [false, true] {
                let what = format!("{} levels, missing left {missing_left}", bins.len());
                let goes_left = |b: usize| {
                    SplitRule::Categorical { left: set.clone() }.goes_left(b as u16, missing_left)
                };
                for rows in row_sets(n) {
                    // SAFETY: every row is below n and the column holds n + COLUMN_PAD bins
                    assert_splits_as(&what, &rows, &column, &goes_left, &|r, s| unsafe {
                        split_rows_categorical(r, s, &column, &set, missing_left)
                    });
                    #[cfg(target_arch = "x86_64")]
                    if lanes {
                        let rule = ByteRule::set(&set, missing_left);
                        // SAFETY: as above, and the CPU has AVX-512 F
                        assert_splits_as(&what, &rows, &column, &goes_left, &|r, s| unsafe {
                            split_rows_avx512(r, s, &column, rule)
                        });
                    }
                    #[cfg(target_arch = "x86_64")]
                    if avx2() {
                        // SAFETY: as above, and the CPU has AVX2
                        assert_splits_as(&what, &rows, &column, &goes_left, &|r, s| unsafe {
                            split_rows_avx2(r, s, &column, ByteRule::set(&set, missing_left))
                        });
                    }
                }
                // the rule itself, bin by bin
                let rule = ByteRule::set(&set, missing_left);
                for b in 0..256 {
                    assert_eq!(rule.goes_left(b), goes_left(b), "{what}: bin {b}");
                }
            }
        }
    }
}
