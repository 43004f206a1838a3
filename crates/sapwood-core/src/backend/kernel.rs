//! The CPU histogram kernel: the hot loop of training.
//!
//! Rows of a deep node are scattered over the shard, so the loop is bound by memory latency;
//! it prefetches the bins and gradients of rows a little ahead. Indexing is unchecked: the
//! backend validates at construction that every bin is inside its feature's histogram and
//! only ever stores row indices below the row count.
#![allow(unsafe_code)]

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

/// Adds each row's (g, h) to the bins of its features.
///
/// Caller guarantees: every `r` in `rows` satisfies `(r + 1) * nf <= bins.len()` and
/// `r < gh.len()`, and `offsets[f] + bins[r * nf + f] < hist.len()` for every feature f.
pub fn accumulate<B: BinValue>(
    rows: &[u32],
    bins: &[B],
    offsets: &[u32],
    gh: &[[i64; 2]],
    hist: &mut [[i64; 2]],
) {
    let nf = offsets.len() - 1;
    let offsets = &offsets[..nf];
    debug_assert!(rows
        .iter()
        .all(|&r| (r as usize + 1) * nf <= bins.len() && (r as usize) < gh.len()));
    for (i, &r) in rows.iter().enumerate() {
        if let Some(&ahead) = rows.get(i + AHEAD) {
            let a = ahead as usize;
            prefetch(bins.as_ptr().wrapping_add(a * nf));
            prefetch(gh.as_ptr().wrapping_add(a));
        }
        let r = r as usize;
        // SAFETY: see the function's contract; checked by the backend's constructor.
        unsafe {
            let [g, h] = *gh.get_unchecked(r);
            let row = bins.get_unchecked(r * nf..(r + 1) * nf);
            for (b, &off) in row.iter().zip(offsets) {
                let e = hist.get_unchecked_mut(off as usize + b.index());
                e[0] += g;
                e[1] += h;
            }
        }
    }
}

/// Accumulates every row of a contiguous range (the root when all rows are in the bag).
pub fn accumulate_all<B: BinValue>(
    start: usize,
    end: usize,
    bins: &[B],
    offsets: &[u32],
    gh: &[[i64; 2]],
    hist: &mut [[i64; 2]],
) {
    let nf = offsets.len() - 1;
    let offsets = &offsets[..nf];
    for (row, &[g, h]) in bins[start * nf..end * nf]
        .chunks_exact(nf)
        .zip(&gh[start..end])
    {
        for (b, &off) in row.iter().zip(offsets) {
            // SAFETY: the backend's constructor checked every bin against its feature's range.
            let e = unsafe { hist.get_unchecked_mut(off as usize + b.index()) };
            e[0] += g;
            e[1] += h;
        }
    }
}
