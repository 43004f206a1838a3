//! Walking a block's 64 rows through a tree at once, a row a SIMD lane: byte lanes where
//! the bins are bytes (AVX-512 VBMI), 16-bit lanes where they are wider (AVX-512 BW).
//!
//! The row-at-a-time walk spends about seven instructions a row and level: load the node,
//! add the row to its column, load the bin, compare, compute the child. Here a level costs
//! a few instructions for all 64 rows: each row's position within the level is a lane; the
//! level's tables (which of the level's features a position reads, its shift and its last
//! bin going left) are looked up for every lane by one permute each; the rows' bins are
//! merged from the level's features with one masked 64-byte load per feature used at that
//! level (one at the root, at most 2^level below it); one compare sends each lane left or
//! right. In byte lanes a position testing a bit set (a categorical split) looks up each
//! lane's byte of its set and the bin's bit in it with two more permutes, and overrides the
//! compare for the lanes at that position: a few instructions per set at a level. A level
//! has at most 128 positions (the most a two-table byte permute, or four 16-bit tables,
//! index), so the lanes take a tree's top 8 levels; where it is deeper, each row goes on
//! from where it ended, one at a time ([`super::FlatTree::finish`]). The leaf each row
//! reaches is the one [`super::heap_step`] reaches (the same compare on the same bins, `b -
//! shift > last`, in 8 bits where the bins are 8 bits: see [`Lane::rule`]), and its value
//! is added to the row's margin with the same rounding, so the margins are the same bits.
#![allow(unsafe_code)]

use super::{HeapNode, BLOCK};

/// The most levels walked in lanes: the last has 128 positions.
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

/// A lane's width: bytes, or 16 bits.
pub(super) trait Lane: Copy + Default + Eq + From<u8> + std::fmt::Debug {
    /// Whether lanes of this width test bit sets.
    const SETS: bool;
    /// The rule `b.wrapping_sub(shift) > last` (16 bits) in this width, where it sends every
    /// bin of this width the same way.
    fn rule(shift: u16, last: u16) -> Option<(Self, Self)>;
    /// Whether the rule sends every bin left.
    fn always_left(shift: Self, last: Self) -> bool;
}

impl Lane for u8 {
    const SETS: bool = true;

    /// For bins `b` in 0..=255, `b.wrapping_sub(shift) > last` in 16 bits equals the 8-bit
    /// compare when `shift` is 0 and `last` is capped at 255 (no byte is above it either
    /// way), or when `shift` is 1 and `last` is at most 254 (then bin 0 wraps above `last`
    /// in both widths); a wider `last` with shift 1 (a hostile model's bin) walks the
    /// 16-bit way.
    fn rule(shift: u16, last: u16) -> Option<(u8, u8)> {
        match (shift, last) {
            (0, last) => Some((0, last.min(255) as u8)),
            (1, last) if last <= 254 => Some((1, last as u8)),
            _ => None,
        }
    }

    fn always_left(shift: u8, last: u8) -> bool {
        (shift, last) == (0, u8::MAX)
    }
}

impl Lane for u16 {
    const SETS: bool = false;

    fn rule(shift: u16, last: u16) -> Option<(u16, u16)> {
        Some((shift, last))
    }

    fn always_left(shift: u16, last: u16) -> bool {
        (shift, last) == (0, u16::MAX)
    }
}

/// One level of splits of a [`LaneTree`].
#[derive(Debug, Clone)]
struct LaneLevel<W> {
    /// where each feature split on at this level starts in a block's columns
    columns: Vec<u32>,
    /// per position: the index in `columns` of the feature it reads
    ids: [W; TABLE],
    /// per position: 1 when a missing bin (0) goes right, else 0
    shift: [W; TABLE],
    /// per position: the row goes right when `bin - shift > last` (wrapping)
    last: [W; TABLE],
    /// the level's bit-set positions (whose `shift` and `last` never send a row right):
    /// the position, and its set of bins going left as a permute table (bin b is bit
    /// b % 8 of byte b / 8; the upper 32 bytes are never indexed)
    sets: Vec<(u8, [u8; 64])>,
}

/// A tree's top [`MAX_DEPTH`] levels (numeric rules, and in byte lanes bit sets) laid out
/// for lanes of width `W`.
#[derive(Debug, Clone)]
pub(super) struct LaneTree<W> {
    levels: Vec<LaneLevel<W>>,
    /// the leaf value of each bottom position (2^depth of them)
    values: Vec<f32>,
    /// for the top levels of a deeper tree: per bottom position, where its rows go on
    /// (`u32::MAX` where a leaf ends there, its value in `values`)
    below: Option<Vec<u32>>,
}

/// Trees walked in byte lanes.
pub(super) type ByteTree = LaneTree<u8>;
/// Trees walked in 16-bit lanes.
pub(super) type WordTree = LaneTree<u16>;

impl<W: Lane> LaneTree<W> {
    /// The lane form of a complete tree (`nodes` in heap order, `values` per bottom
    /// position, `set(slot)` the bit set of bins going left of a slot that tests one
    /// instead of its numeric rule), or `None` where it is deeper than [`MAX_DEPTH`], a
    /// rule does not give the same way in this width ([`Lane::rule`]) or a set is given to
    /// lanes that do not test them. A set's bits past bin 255 are never read: no byte bin
    /// reaches them. `below` is given for the top levels of a deeper tree: where each
    /// bottom position's rows go on.
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
            let mut out = LaneLevel {
                columns: Vec::new(),
                ids: [W::default(); TABLE],
                shift: [W::default(); TABLE],
                last: [W::default(); TABLE],
                sets: Vec::new(),
            };
            for (p, n) in nodes.get(first..first + (1 << level))?.iter().enumerate() {
                let bits = set(first + p);
                let (shift, last) = match bits {
                    Some(_) if !W::SETS => return None,
                    // the set decides: the compare never sends the row right
                    Some(_) => W::rule(0, u16::MAX)?,
                    None => W::rule(n.shift, n.last)?,
                };
                // a node always going left (a leaf above the bottom) reads any feature
                if bits.is_some() || !W::always_left(shift, last) {
                    let id = match out.columns.iter().position(|&c| c == n.column) {
                        Some(id) => id,
                        None => {
                            out.columns.push(n.column);
                            out.columns.len() - 1
                        }
                    };
                    out.ids[p] = W::from(u8::try_from(id).ok()?);
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
        Some(LaneTree {
            levels,
            values: values.to_vec(),
            below,
        })
    }

    /// The leaf value of bottom position `p`, or the node (or heap position) its rows go on
    /// from.
    pub(super) fn end(&self, p: usize) -> Result<f32, u32> {
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

/// Whether this CPU walks in 16-bit lanes (AVX-512 F and BW).
pub(super) fn words_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::avx512_allowed()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU walks in byte lanes (AVX-512 F, BW and VBMI).
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::avx512_allowed()
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
    let values = tree.values.as_ptr();
    // SAFETY: each position is below 2^depth = values.len() (depth steps of 2p + 1 from
    // 0); `acc` is 64 floats, four quarters of 16
    unsafe {
        let quarters = [
            _mm512_extracti32x4_epi32::<0>(position),
            _mm512_extracti32x4_epi32::<1>(position),
            _mm512_extracti32x4_epi32::<2>(position),
            _mm512_extracti32x4_epi32::<3>(position),
        ];
        for (q, p) in quarters.into_iter().enumerate() {
            add_leaves(
                acc.as_mut_ptr().add(16 * q),
                _mm512_cvtepu8_epi32(p),
                values,
            );
        }
    }
}

/// Adds the leaf values at 16 bottom positions `at` to the 16 margins at `acc`, each
/// flushed as [`crate::objective::ftz`] flushes it (below the smallest normal in magnitude
/// is +0): the margins' bits are those of the row-at-a-time walk.
///
/// # Safety
/// `acc` points at 16 floats; every position in `at` indexes `values`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn add_leaves(acc: *mut f32, at: std::arch::x86_64::__m512i, values: *const f32) {
    use std::arch::x86_64::*;
    // SAFETY: by the function's contract
    unsafe {
        let v = _mm512_i32gather_ps::<4>(at, values);
        let sum = _mm512_add_ps(_mm512_loadu_ps(acc), v);
        let tiny =
            _mm512_cmp_ps_mask::<_CMP_LT_OQ>(_mm512_abs_ps(sum), _mm512_set1_ps(f32::MIN_POSITIVE));
        _mm512_storeu_ps(acc, _mm512_maskz_mov_ps(!tiny, sum));
    }
}

/// The bottom position each of 32 rows (half `half` of a block) reaches through `tree`'s
/// levels, a row a 16-bit lane.
///
/// # Safety
/// As [`add_words`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn walk_words(tree: &WordTree, columns: &[u16], half: usize) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    debug_assert!(half < 2);
    let base = columns.as_ptr();
    let mut position = _mm512_setzero_si512();
    for (level, l) in tree.levels.iter().enumerate() {
        debug_assert!(l
            .columns
            .iter()
            .all(|&c| c as usize + BLOCK <= columns.len()));
        // SAFETY: the tables are 128 entries (four 32-entry loads); the positions of level
        // `level` are below 2^level <= 128; every column plus BLOCK is within `columns`
        // (the contract), and a half's 32 bins start at most 32 past the column
        unsafe {
            let table = |t: &[u16; TABLE]| {
                let at = |q: usize| _mm512_loadu_si512(t.as_ptr().add(32 * q).cast());
                match level {
                    0..=5 => _mm512_permutexvar_epi16(position, at(0)),
                    6 => _mm512_permutex2var_epi16(at(0), position, at(1)),
                    _ => {
                        let lo = _mm512_permutex2var_epi16(at(0), position, at(1));
                        let hi = _mm512_permutex2var_epi16(at(2), position, at(3));
                        let upper = _mm512_test_epi16_mask(position, _mm512_set1_epi16(64));
                        _mm512_mask_blend_epi16(upper, lo, hi)
                    }
                }
            };
            let column = |c: u32| base.add(c as usize + 32 * half);
            let ids = table(&l.ids);
            let mut bins = match l.columns.first() {
                Some(&c) => _mm512_loadu_si512(column(c).cast()),
                None => _mm512_setzero_si512(),
            };
            for (id, &c) in l.columns.iter().enumerate().skip(1) {
                let reads = _mm512_cmpeq_epi16_mask(ids, _mm512_set1_epi16(id as i16));
                bins = _mm512_mask_loadu_epi16(bins, reads, column(c).cast());
            }
            let right =
                _mm512_cmpgt_epu16_mask(_mm512_sub_epi16(bins, table(&l.shift)), table(&l.last));
            // child position 2p, plus one going right
            position = _mm512_add_epi16(position, position);
            position = _mm512_mask_sub_epi16(position, right, position, _mm512_set1_epi16(-1));
        }
    }
    position
}

/// [`positions`] in 16-bit lanes.
///
/// # Safety
/// As [`add_words`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn word_positions(tree: &WordTree, columns: &[u16]) -> [u16; BLOCK] {
    let mut out = [0u16; BLOCK];
    for half in 0..2 {
        // SAFETY: the caller's contract is walk_words'; each half is 32 of `out`'s 64
        unsafe {
            let position = walk_words(tree, columns, half);
            std::arch::x86_64::_mm512_storeu_si512(
                out.as_mut_ptr().add(32 * half).cast(),
                position,
            );
        }
    }
    out
}

/// [`add_tree`] in 16-bit lanes: adds `tree`'s leaf value to each of a block's 64 margins.
///
/// # Safety
/// [`words_available`] must be true, and `columns` must hold at least every column the
/// tree's levels name plus [`BLOCK`] bins.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn add_words(tree: &WordTree, columns: &[u16], acc: &mut [f32; BLOCK]) {
    use std::arch::x86_64::*;
    debug_assert!(!tree.partial());
    let values = tree.values.as_ptr();
    for half in 0..2 {
        // SAFETY: the contract is walk_words'; each position is below 2^depth =
        // values.len(); `acc` is 64 floats, two quarters of 16 a half
        unsafe {
            let position = walk_words(tree, columns, half);
            let quarters = [
                _mm512_extracti64x4_epi64::<0>(position),
                _mm512_extracti64x4_epi64::<1>(position),
            ];
            for (q, p) in quarters.into_iter().enumerate() {
                let at = acc.as_mut_ptr().add(32 * half + 16 * q);
                add_leaves(at, _mm512_cvtepu16_epi32(p), values);
            }
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

/// Never called: [`words_available`] is false off x86_64.
///
/// # Safety
/// None needed; it panics.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn add_words(_: &WordTree, _: &[u16], _: &mut [f32; BLOCK]) {
    unreachable!("16-bit lanes are x86_64 only")
}

/// Never called: [`words_available`] is false off x86_64.
///
/// # Safety
/// None needed; it panics.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn word_positions(_: &WordTree, _: &[u16]) -> [u16; BLOCK] {
    unreachable!("16-bit lanes are x86_64 only")
}
