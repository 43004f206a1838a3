//! Walking a block's 64 rows through a tree at once, one byte lane a row (AVX-512 VBMI).
//!
//! The row-at-a-time walk spends about seven instructions a row and level: load the node,
//! add the row to its column, load the bin, compare, compute the child. Here a level costs
//! a few instructions for all 64 rows: each row's position within the level is a byte; the
//! level's tables (which of the level's features a position reads, its shift and its last
//! bin going left) are looked up for every lane by one byte permute each; the rows' bins
//! are merged from the level's features with one masked 64-byte load per feature used at
//! that level (one at the root, at most 2^level below it); one compare sends each lane
//! left or right. A position testing a bit set (a categorical split) looks up each lane's
//! byte of its set and the bin's bit in it with two more permutes, and overrides the
//! compare for the lanes at that position: a few instructions per set at a level. That limits it to trees of complete depth at most 8 (128 positions on
//! the last level of splits, the most a two-table byte permute indexes) over byte bins.
//! The leaf each row reaches is the one [`super::heap_step`] reaches (the same compare on
//! the same bins, `b - shift > last`, in 8 bits where the bins are 8 bits: see
//! [`ByteTree::new`]), and its value is added to the row's margin with the same rounding,
//! so the margins are the same bits.
#![allow(unsafe_code)]

use super::{HeapNode, BLOCK};

/// The deepest tree walked in byte lanes: its last level of splits has 128 positions.
pub(super) const MAX_DEPTH: usize = 8;
/// Positions a level's tables hold (two 64-byte permute tables).
const TABLE: usize = 128;
/// `1 << i % 8` at each i: a bin's bit within its byte of a set, by one permute.
const BITS: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = 1 << (i % 8);
        i += 1;
    }
    t
};

/// One level of splits of a [`ByteTree`].
#[derive(Debug, Clone)]
struct ByteLevel {
    /// where each feature split on at this level starts in a block's columns
    columns: Vec<u32>,
    /// per position: the index in `columns` of the feature it reads
    ids: [u8; TABLE],
    /// per position: 1 when a missing bin (0) goes right, else 0
    shift: [u8; TABLE],
    /// per position: the row goes right when `bin - shift > last` (wrapping, 8 bits)
    last: [u8; TABLE],
    /// the level's bit-set positions (whose `shift` and `last` never send a row right):
    /// the position, and its set of bins going left as a permute table (bin b is bit
    /// b % 8 of byte b / 8; the upper 32 bytes are never indexed)
    sets: Vec<(u8, [u8; 64])>,
}

/// A tree of complete depth at most [`MAX_DEPTH`] (numeric rules and bit sets), laid out
/// for byte lanes.
#[derive(Debug, Clone)]
pub(super) struct ByteTree {
    levels: Vec<ByteLevel>,
    /// the leaf value of each bottom position (2^depth of them)
    values: Vec<f32>,
    /// for the top levels of a deeper tree: per bottom position, where its rows go on
    /// (`u32::MAX` where a leaf ends there, its value in `values`)
    below: Option<Vec<u32>>,
}

impl ByteTree {
    /// The byte-lane form of a complete tree (`nodes` in heap order, `values` per bottom
    /// position, `set(slot)` the bit set of bins going left of a slot that tests one
    /// instead of its numeric rule), or `None` where it is deeper than [`MAX_DEPTH`] or a
    /// rule does not give the same way in 8 bits. For bins `b` in 0..=255,
    /// `b.wrapping_sub(shift) > last` in 16 bits equals the 8-bit compare when `shift` is 0
    /// and `last` is capped at 255 (no byte is above it either way), or when `shift` is 1
    /// and `last` is at most 254 (then bin 0 wraps above `last` in both widths); a wider
    /// `last` with shift 1 (a hostile model's bin) walks the 16-bit way. A set's bits past
    /// bin 255 are never read: no byte bin reaches them. `below` is given for the top
    /// levels of a deeper tree: where each bottom position's rows go on.
    pub(super) fn new(
        nodes: &[HeapNode],
        values: &[f32],
        depth: usize,
        set: impl Fn(usize) -> Option<[u8; 32]>,
        below: Option<Vec<u32>>,
    ) -> Option<Self> {
        if depth > MAX_DEPTH || values.len() != 1 << depth {
            return None;
        }
        let mut levels = Vec::with_capacity(depth);
        for level in 0..depth {
            let first = (1usize << level) - 1;
            let mut out = ByteLevel {
                columns: Vec::new(),
                ids: [0; TABLE],
                shift: [0; TABLE],
                last: [0; TABLE],
                sets: Vec::new(),
            };
            for (p, n) in nodes.get(first..first + (1 << level))?.iter().enumerate() {
                let bits = set(first + p);
                let (shift, last) = match (bits.is_some(), n.shift, n.last) {
                    // the set decides: the compare never sends the row right
                    (true, _, _) => (0, 255),
                    (false, 0, last) => (0, last.min(255) as u8),
                    (false, 1, last) if last <= 254 => (1, last as u8),
                    _ => return None,
                };
                // a node always going left (a leaf above the bottom) reads any feature
                if bits.is_some() || (shift, last) != (0, 255) {
                    let id = match out.columns.iter().position(|&c| c == n.column) {
                        Some(id) => id,
                        None => {
                            out.columns.push(n.column);
                            out.columns.len() - 1
                        }
                    };
                    out.ids[p] = id as u8;
                }
                if let Some(bits) = bits {
                    let mut table = [0u8; 64];
                    table[..32].copy_from_slice(&bits);
                    out.sets.push((p as u8, table));
                }
                out.shift[p] = shift;
                out.last[p] = last;
            }
            levels.push(out);
        }
        Some(ByteTree {
            levels,
            values: values.to_vec(),
            below,
        })
    }

    /// The leaf value of bottom position `p`, or the node (or heap position) its rows go on
    /// from.
    pub(super) fn end(&self, p: u8) -> Result<f32, u32> {
        let p = usize::from(p);
        match self.below.as_ref().map(|b| b[p]) {
            Some(from) if from != u32::MAX => Err(from),
            _ => Ok(self.values[p]),
        }
    }

    /// Whether rows go on below the levels (the top levels of a deeper tree).
    pub(super) fn partial(&self) -> bool {
        self.below.is_some()
    }
}

/// Whether this CPU walks in byte lanes (AVX-512 F, BW and VBMI).
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::vectors_allowed()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vbmi")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The bottom position each of a block's 64 rows reaches through `tree`'s levels.
///
/// # Safety
/// As [`add_tree`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn walk(tree: &ByteTree, columns: &[u8]) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    const _: () = assert!(BLOCK == 64, "one byte lane a row of the block");
    let base = columns.as_ptr();
    let mut position = _mm512_setzero_si512();
    for (level, l) in tree.levels.iter().enumerate() {
        debug_assert!(l
            .columns
            .iter()
            .all(|&c| c as usize + BLOCK <= columns.len()));
        // SAFETY: the tables are 128 bytes (two 64-byte loads each); the positions of level
        // `level` are below 2^level <= 128; every column plus BLOCK is within `columns`
        // (the contract)
        unsafe {
            let table = |t: &[u8; TABLE]| {
                let lo = _mm512_loadu_si512(t.as_ptr().cast());
                if level < 7 {
                    _mm512_permutexvar_epi8(position, lo)
                } else {
                    let hi = _mm512_loadu_si512(t.as_ptr().add(64).cast());
                    _mm512_permutex2var_epi8(lo, position, hi)
                }
            };
            let ids = table(&l.ids);
            let mut bins = match l.columns.first() {
                Some(&c) => _mm512_loadu_si512(base.add(c as usize).cast()),
                None => _mm512_setzero_si512(),
            };
            for (id, &c) in l.columns.iter().enumerate().skip(1) {
                let reads = _mm512_cmpeq_epi8_mask(ids, _mm512_set1_epi8(id as i8));
                bins = _mm512_mask_loadu_epi8(bins, reads, base.add(c as usize).cast());
            }
            let mut right =
                _mm512_cmpgt_epu8_mask(_mm512_sub_epi8(bins, table(&l.shift)), table(&l.last));
            if !l.sets.is_empty() {
                // each lane's byte of a set (bin / 8, from 16-bit shifts whose bits from
                // the next lane the mask clears) and its bit within it (1 << bin % 8,
                // the permute reading the table at bin % 64)
                let byte_at =
                    _mm512_and_si512(_mm512_srli_epi16::<3>(bins), _mm512_set1_epi8(0x1f));
                let bit = _mm512_permutexvar_epi8(bins, _mm512_loadu_si512(BITS.as_ptr().cast()));
                for (p, t) in &l.sets {
                    let here = _mm512_cmpeq_epi8_mask(position, _mm512_set1_epi8(*p as i8));
                    let byte =
                        _mm512_permutexvar_epi8(byte_at, _mm512_loadu_si512(t.as_ptr().cast()));
                    right |= here & !_mm512_test_epi8_mask(byte, bit);
                }
            }
            // child position 2p, plus one going right
            position = _mm512_add_epi8(position, position);
            position = _mm512_mask_sub_epi8(position, right, position, _mm512_set1_epi8(-1));
        }
    }
    position
}

/// The bottom position each of a block's 64 rows reaches through the top levels of a
/// deeper tree (rows past the block's end from stale bins).
///
/// # Safety
/// As [`add_tree`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) unsafe fn positions(tree: &ByteTree, columns: &[u8]) -> [u8; BLOCK] {
    let mut out = [0u8; BLOCK];
    // SAFETY: the caller's contract is walk's; `out` is 64 bytes
    unsafe {
        let position = walk(tree, columns);
        std::arch::x86_64::_mm512_storeu_si512(out.as_mut_ptr().cast(), position);
    }
    out
}

/// Adds `tree`'s leaf value to each of a block's 64 margins: `acc[r] = ftz(acc[r] +
/// value)` (rows past the block's end compute from stale bins and are never read back).
/// The tree is whole ([`ByteTree::partial`] false).
///
/// # Safety
/// [`available`] must be true, and `columns` must hold at least every column the tree's
/// levels name plus [`BLOCK`] bytes (`columns.len() >= column + BLOCK` for each).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) unsafe fn add_tree(tree: &ByteTree, columns: &[u8], acc: &mut [f32; BLOCK]) {
    use std::arch::x86_64::*;
    debug_assert!(!tree.partial());
    // SAFETY: the contract is walk's
    let position = unsafe { walk(tree, columns) };
    let min_normal = _mm512_set1_ps(f32::MIN_POSITIVE);
    let values = tree.values.as_ptr();
    // SAFETY: each position is below 2^depth = values.len() (depth steps of 2p + 1 from
    // 0); `acc` is 64 floats, four loads and stores of 16
    unsafe {
        let quarter = |q: __m128i| {
            let at = _mm512_cvtepu8_epi32(q);
            _mm512_i32gather_ps::<4>(at, values)
        };
        let leaves = [
            quarter(_mm512_extracti32x4_epi32::<0>(position)),
            quarter(_mm512_extracti32x4_epi32::<1>(position)),
            quarter(_mm512_extracti32x4_epi32::<2>(position)),
            quarter(_mm512_extracti32x4_epi32::<3>(position)),
        ];
        for (q, v) in leaves.into_iter().enumerate() {
            let at = acc.as_mut_ptr().add(16 * q);
            let sum = _mm512_add_ps(_mm512_loadu_ps(at), v);
            // crate::objective::ftz: below the smallest normal in magnitude is +0
            let tiny = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(_mm512_abs_ps(sum), min_normal);
            _mm512_storeu_ps(at, _mm512_maskz_mov_ps(!tiny, sum));
        }
    }
}

/// Never called: [`available`] is false off x86_64.
///
/// # Safety
/// None needed; it panics.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn add_tree(_: &ByteTree, _: &[u8], _: &mut [f32; BLOCK]) {
    unreachable!("byte lanes are x86_64 only")
}

/// Never called: [`available`] is false off x86_64.
///
/// # Safety
/// None needed; it panics.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn positions(_: &ByteTree, _: &[u8]) -> [u8; BLOCK] {
    unreachable!("byte lanes are x86_64 only")
}
