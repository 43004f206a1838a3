//! Group-adaptive bit packing: each run of 32 values at its own shift and width.
//!
//! Histogram bins next to each other differ by orders of magnitude, and empty bins come in
//! runs, so one width for a whole block wastes bits that a width per 32 values keeps. Each
//! group is written as
//! - one byte: `w` (0..=64, the bits its zigzagged values need after the shift), with the
//!   high bit set for a sparse group;
//! - unless `w` is 0 (an all-zero group, nothing more): one byte, the trailing zero bits all
//!   its values share (quantised sums are multiples of a power of two);
//! - for a sparse group, 32 bits marking its nonzero values, then only those;
//! - the values as a little-endian bit stream, `w` bits each (32 values are exactly 4w bytes;
//!   a shorter last group takes the bytes of its own values only).
//!
//! Packing and unpacking have one routine per width, chosen once per group, so inside a
//! group every bit position is a constant: no branch and no dependence from one value to the
//! next. Encoding is one pass over the block: the width comes from the group itself.

use sapwood_core::{Error, Result};

use super::{put, truncated, unzigzag, zigzag};

/// The table of a width-generic routine's 65 instances, indexed by width.
macro_rules! per_width {
    ($f:ident) => {
        [
            $f::<0>, $f::<1>, $f::<2>, $f::<3>, $f::<4>, $f::<5>, $f::<6>, $f::<7>, $f::<8>,
            $f::<9>, $f::<10>, $f::<11>, $f::<12>, $f::<13>, $f::<14>, $f::<15>, $f::<16>,
            $f::<17>, $f::<18>, $f::<19>, $f::<20>, $f::<21>, $f::<22>, $f::<23>, $f::<24>,
            $f::<25>, $f::<26>, $f::<27>, $f::<28>, $f::<29>, $f::<30>, $f::<31>, $f::<32>,
            $f::<33>, $f::<34>, $f::<35>, $f::<36>, $f::<37>, $f::<38>, $f::<39>, $f::<40>,
            $f::<41>, $f::<42>, $f::<43>, $f::<44>, $f::<45>, $f::<46>, $f::<47>, $f::<48>,
            $f::<49>, $f::<50>, $f::<51>, $f::<52>, $f::<53>, $f::<54>, $f::<55>, $f::<56>,
            $f::<57>, $f::<58>, $f::<59>, $f::<60>, $f::<61>, $f::<62>, $f::<63>, $f::<64>,
        ]
    };
}

/// Values per group.
pub(super) const GROUP: usize = 32;

/// Header flag of a sparse group (a bitmap, then only the nonzero values).
pub(super) const SPARSE_GROUP: u8 = 0x80;

/// Most bytes a group's values take (32 values at 64 bits).
pub(super) const MAX_DATA: usize = 4 * 64;

/// The scalar encoder's body, inlined into each of its versions.
#[inline(always)]
pub(super) fn encode_inlined(values: &[i64], out: &mut Vec<u8>) -> usize {
    encode_groups(values, out, encode_group)
}

/// Walks `values` in groups of 32 (the last padded with zeros) and encodes each with
/// `encode_group(group, its values in the block, out)`, which returns its nonzero count,
/// after reserving the block's worst case: so that no group reallocates (the caller keeps
/// the buffer from one message to the next), and so that a group may write whole registers
/// up to its own worst case past its start (6 + 256 bytes). The body of every encoder,
/// inlined into each.
#[inline(always)]
pub(super) fn encode_groups(
    values: &[i64],
    out: &mut Vec<u8>,
    mut encode_group: impl FnMut(&[i64; GROUP], usize, &mut Vec<u8>) -> usize,
) -> usize {
    out.reserve(values.len().div_ceil(GROUP) * (6 + MAX_DATA));
    let mut nnz = 0;
    let mut groups = values.chunks_exact(GROUP);
    for group in groups.by_ref() {
        nnz += encode_group(group.try_into().unwrap(), GROUP, out);
    }
    let tail = groups.remainder();
    if !tail.is_empty() {
        let mut padded = [0i64; GROUP];
        padded[..tail.len()].copy_from_slice(tail);
        nnz += encode_group(&padded, tail.len(), out);
    }
    nnz
}

/// Whether a group of `len` values, `k` of them nonzero at width `w`, is sent sparse: when
/// its bitmap saves at least a fifth (the dense path is faster).
#[inline(always)]
pub(super) fn sparse_pays(k: usize, w: usize, len: usize) -> bool {
    5 * (GROUP + k * w) <= 4 * len * w
}

/// Packs 32 values below 2^w as 4w bytes onto the end of a vector.
type Packer = fn(&[u64; GROUP], &mut Vec<u8>);

const PACKERS: [Packer; 65] = per_width!(pack);

/// Packs 32 values below 2^w at width `w` one value at a time.
pub(super) fn scalar_pack(w: usize, u: &[u64; GROUP], out: &mut Vec<u8>) {
    PACKERS[w](u, out)
}

/// Unpacks 32 values at width `w` one value at a time, into `dst` or (`add`) onto it.
pub(super) fn scalar_unpack(
    w: usize,
    src: &[u8; MAX_DATA],
    shift: u32,
    dst: &mut [i64; GROUP],
    add: bool,
) {
    let table = if add { &UNPACK_ADD } else { &UNPACK_PUT };
    table[w](src, shift, dst)
}

/// Encodes a group whose first `len` values are the block's (the rest are zero padding);
/// returns how many are nonzero.
#[inline(always)]
fn encode_group(group: &[i64; GROUP], len: usize, out: &mut Vec<u8>) -> usize {
    // (a count rather than the bitmap: this loop vectorises, and most groups are dense)
    let (mut or, mut or_zigzag, mut nnz) = (0u64, 0u64, 0usize);
    for &v in group {
        or |= v as u64;
        or_zigzag |= zigzag(v);
        nnz += (v != 0) as usize;
    }
    if or == 0 {
        out.push(0);
        return 0;
    }
    let shift = or.trailing_zeros();
    // with the low `shift` bits of v zero, zigzag(v) >> shift == zigzag(v >> shift)
    let w = 64 - (or_zigzag >> shift).leading_zeros();
    let (wu, k) = (w as usize, nnz);
    if sparse_pays(k, wu, len) {
        let mask = group
            .iter()
            .enumerate()
            .fold(0u32, |m, (j, &v)| m | ((v != 0) as u32) << j);
        // visit the marked values only, lowest first
        let (mut kept, mut m) = ([0u64; GROUP], mask);
        for slot in kept.iter_mut().take(k) {
            *slot = zigzag(group[m.trailing_zeros() as usize % GROUP]) >> shift;
            m &= m - 1;
        }
        out.extend_from_slice(&[w as u8 | SPARSE_GROUP, shift as u8]);
        out.extend_from_slice(&mask.to_le_bytes());
        scalar_pack(wu, &kept, out);
        out.truncate(out.len() - 4 * wu + (k * wu).div_ceil(8));
    } else {
        let mut u = [0u64; GROUP];
        for (u, &v) in u.iter_mut().zip(group) {
            *u = zigzag(v) >> shift;
        }
        out.extend_from_slice(&[w as u8, shift as u8]);
        scalar_pack(wu, &u, out);
        // a short last group keeps the bytes of its own values only
        out.truncate(out.len() - 4 * wu + (len * wu).div_ceil(8));
    }
    nnz
}

/// Value `j` of a group at width `W` starts at bit `j·W`: the word it starts in, the bit in
/// that word, and whether it runs into the next word.
#[inline(always)]
const fn place<const W: u32>(j: usize) -> (usize, u32, bool) {
    let bit = j * W as usize;
    let at = (bit % 64) as u32;
    (bit / 64, at, at != 0 && at + W > 64)
}

fn pack<const W: u32>(u: &[u64; GROUP], out: &mut Vec<u8>) {
    let mut words = [0u64; GROUP + 1];
    // spelt out per value so that every position is a constant (a loop stays a loop)
    macro_rules! put_value {
        ($($j:literal)*) => {$({
            let (i, at, straddles) = place::<W>($j);
            words[i] |= u[$j] << at;
            if straddles {
                words[i + 1] |= u[$j] >> (64 - at);
            }
        })*};
    }
    put_value!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
    // 4W bytes: whole words, then 4 bytes when W is odd (all constants here)
    let n = 4 * W as usize;
    for word in &words[..n / 8] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    if !n.is_multiple_of(8) {
        out.extend_from_slice(&words[n / 8].to_le_bytes()[..n % 8]);
    }
}

/// Reads 32 values at width `W` from the start of `src` (which may run past the group),
/// unzigzags and shifts them into `dst` (adding when `ADD`).
#[inline(always)]
fn unpack<const W: u32, const ADD: bool>(src: &[u8; MAX_DATA], shift: u32, dst: &mut [i64; GROUP]) {
    let word = |i: usize| u64::from_le_bytes(src[8 * i..8 * i + 8].try_into().unwrap());
    let mask = if W >= 64 { u64::MAX } else { (1u64 << W) - 1 };
    macro_rules! take_value {
        ($($j:literal)*) => {$({
            let (i, at, straddles) = place::<W>($j);
            let mut v = word(i) >> at;
            if straddles {
                v |= word(i + 1) << (64 - at);
            }
            put::<ADD>(&mut dst[$j], unzigzag(v & mask) << shift);
        })*};
    }
    take_value!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
}

/// Unpacks 32 values of one width into a group of the destination.
type Unpacker = fn(&[u8; MAX_DATA], u32, &mut [i64; GROUP]);

fn unpack_add<const W: u32>(src: &[u8; MAX_DATA], shift: u32, dst: &mut [i64; GROUP]) {
    unpack::<W, true>(src, shift, dst)
}

fn unpack_put<const W: u32>(src: &[u8; MAX_DATA], shift: u32, dst: &mut [i64; GROUP]) {
    unpack::<W, false>(src, shift, dst)
}

const UNPACK_ADD: [Unpacker; 65] = per_width!(unpack_add);
const UNPACK_PUT: [Unpacker; 65] = per_width!(unpack_put);

/// Decodes groups one value at a time (the body every CPU has).
pub(super) fn decode_scalar<const ADD: bool>(data: &[u8], dst: &mut [i64]) -> Result<()> {
    decode_groups::<ADD>(data, dst, scalar_place::<ADD>)
}

/// Puts a group's values, `head.w` bits each at the start of `src`, into its bins (or adds
/// them, when `ADD`) one value at a time.
#[inline(always)]
pub(super) fn scalar_place<const ADD: bool>(head: &Head, src: &[u8; MAX_DATA], group: &mut [i64]) {
    if head.count == GROUP {
        // (only a whole group has 32 values)
        scalar_unpack(head.w, src, head.shift, group.try_into().unwrap(), ADD);
        return;
    }
    // a sparse group, or a short last one: unpack, then put each value in its bin
    let mut values = [0i64; GROUP];
    scalar_unpack(head.w, src, head.shift, &mut values, false);
    if !ADD {
        group.fill(0);
    }
    let mut m = head.mask;
    for &v in values.iter().take(head.count) {
        put::<ADD>(&mut group[m.trailing_zeros() as usize], v);
        m &= m - 1;
    }
}

/// A group's header, read and checked against the message and the block.
pub(super) struct Head {
    /// Bits of each value (1..=64).
    pub w: usize,
    /// Trailing zero bits every value shares.
    pub shift: u32,
    /// The group's bins that have a value in the message.
    pub mask: u32,
    /// How many do (`mask`'s ones).
    pub count: usize,
}

/// Walks the groups of `data` over `dst`, checking every header and length, and hands each
/// group that is not all zero to `place` with its ⌈count·w / 8⌉ bytes at the start of a
/// window of [`MAX_DATA`] (what follows them in the window is never part of a value);
/// all-zero groups are cleared unless `ADD`. The body of every decoder, inlined into each.
#[inline(always)]
pub(super) fn decode_groups<const ADD: bool>(
    data: &[u8],
    dst: &mut [i64],
    mut place: impl FnMut(&Head, &[u8; MAX_DATA], &mut [i64]),
) -> Result<()> {
    let mut pos = 0usize;
    let mut window = [0u8; MAX_DATA];
    for group in dst.chunks_mut(GROUP) {
        let head = *data.get(pos).ok_or_else(truncated)?;
        pos += 1;
        let w = (head & !SPARSE_GROUP) as usize;
        if w == 0 {
            if head != 0 {
                return Err(malformed("a sparse group of width 0"));
            }
            if !ADD {
                group.fill(0);
            }
            continue;
        }
        if w > 64 {
            return Err(malformed(&format!("a group of width {w}")));
        }
        let shift = *data.get(pos).ok_or_else(truncated)? as u32;
        pos += 1;
        if shift > 63 {
            return Err(malformed(&format!("a group shifted by {shift}")));
        }
        // which bins of the group have a value in the message, and how many
        let len = group.len();
        let (mask, count) = if head & SPARSE_GROUP != 0 {
            let m = data.get(pos..pos + 4).ok_or_else(truncated)?;
            pos += 4;
            let mask = u32::from_le_bytes(m.try_into().unwrap());
            if mask.checked_shr(len as u32).unwrap_or(0) != 0 {
                return Err(malformed("a group marking values past the block's end"));
            }
            (mask, mask.count_ones() as usize)
        } else {
            (u32::MAX.checked_shr((GROUP - len) as u32).unwrap_or(0), len)
        };
        let n = (count * w).div_ceil(8);
        let bytes = data.get(pos..pos + n).ok_or_else(truncated)?;
        // a whole window of the message when it has one, else a copy of the group's bytes
        let src: &[u8; MAX_DATA] = match data.get(pos..pos + MAX_DATA) {
            Some(s) => s.try_into().unwrap(),
            None => {
                window[..n].copy_from_slice(bytes);
                &window
            }
        };
        pos += n;
        place(
            &Head {
                w,
                shift,
                mask,
                count,
            },
            src,
            group,
        );
    }
    if pos != data.len() {
        return Err(malformed("trailing bytes"));
    }
    Ok(())
}

fn malformed(what: &str) -> Error {
    Error::Collective(format!("malformed grouped histogram message: {what}"))
}
