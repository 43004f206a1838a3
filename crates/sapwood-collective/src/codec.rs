//! Exact encodings of i64 blocks for the wire.
//!
//! Every reduced value is bounded before anything is sent (global rows × largest quantised
//! magnitude), so the narrowest lane width that holds it is known: `packed` puts values
//! several per 64-bit word as one signed mixed-radix number (lane i weighted by 2^(w·i)). A
//! plain integer sum of packed words is the packed form of the lane-wise sums, so a transport
//! that can only add 64-bit integers (MPI, NCCL) reduces compressed data.
//!
//! The other encodings first remove the trailing zero bits every value of the block shares,
//! then zigzag the values and write them
//! - in as many bytes as each needs, with a 4-bit length per value (zero bins cost half a
//!   byte; no branch per value in either direction),
//! - as a bit stream at the width the block's largest needs,
//! - as a bitmap of the nonzero bins and a bit stream of those, or
//! - as (index gap, value) varint pairs, for blocks that are almost all zero.
//!
//! `sparse` and `auto` pick per block: among the encodings within [`SIZE_SLACK`] of the
//! smallest, the cheapest to encode and decode.

use sapwood_core::params::CommCodec;
use sapwood_core::{Error, Result};

const PLAIN: u8 = 0;
const PACKED: u8 = 1;
const SPARSE: u8 = 2;
const BITMAP: u8 = 3;
const VARBYTE: u8 = 4;
const TIGHT: u8 = 5;

/// Bits of a two's-complement lane that holds every value in [-bound, bound].
pub fn lane_width(bound: u64) -> u32 {
    (64 - bound.leading_zeros() + 1).min(64)
}

/// Lanes per 64-bit word at width `w`.
pub fn lanes_per_word(w: u32) -> usize {
    (64 / w.max(1)) as usize
}

/// Packs `values` (each fitting `w` bits, two's complement) into words.
pub fn pack(values: &[i64], w: u32) -> Vec<i64> {
    let w = w.clamp(1, 64);
    values
        .chunks(lanes_per_word(w))
        .map(|lanes| pack_word(lanes, w, 0))
        .collect()
}

/// One word holding `lanes` (each `v >> shift`) as a signed mixed-radix number.
#[inline(always)]
fn pack_word(lanes: &[i64], w: u32, shift: u32) -> i64 {
    lanes.iter().enumerate().fold(0i64, |acc, (i, &v)| {
        acc.wrapping_add((v >> shift).wrapping_shl(w * i as u32))
    })
}

/// Appends the words packing `values >> shift` at width `w`, little-endian.
fn pack_bytes(values: &[i64], w: u32, shift: u32, out: &mut Vec<u8>) {
    let k = lanes_per_word(w);
    let at = out.len();
    out.resize(at + 8 * values.len().div_ceil(k), 0);
    for (o, lanes) in out[at..].chunks_exact_mut(8).zip(values.chunks(k)) {
        o.copy_from_slice(&pack_word(lanes, w, shift).to_le_bytes());
    }
}

/// Unpacks `len` lanes of width `w` from words (sums of packed words unpack to lane sums).
pub fn unpack(words: &[i64], w: u32, len: usize) -> Vec<i64> {
    let w = w.clamp(1, 64);
    let mut out = vec![0i64; len];
    for (lanes, &word) in out.chunks_mut(lanes_per_word(w)).zip(words) {
        unpack_word::<false>(word, w, 0, lanes);
    }
    out
}

/// Unpacks `dst.len()` lanes of width `w` from little-endian words, shifted left by
/// `shift`, into `dst` (adding to it when `ADD`).
fn unpack_bytes<const ADD: bool>(bytes: &[u8], w: u32, shift: u32, dst: &mut [i64]) {
    for (lanes, word) in dst.chunks_mut(lanes_per_word(w)).zip(bytes.chunks_exact(8)) {
        unpack_word::<ADD>(
            i64::from_le_bytes(word.try_into().unwrap()),
            w,
            shift,
            lanes,
        );
    }
}

/// The lanes of one packed word (width `w` in 1..=64), shifted left by `shift`, into
/// `lanes` (adding when `ADD`).
#[inline(always)]
fn unpack_word<const ADD: bool>(word: i64, w: u32, shift: u32, lanes: &mut [i64]) {
    if w >= 64 {
        put::<ADD>(&mut lanes[0], word << shift);
        return;
    }
    let mut rest = word;
    for d in lanes {
        // sign-extend the low lane, then remove it (it may have borrowed from the next)
        let lane = (rest << (64 - w)) >> (64 - w);
        put::<ADD>(d, lane << shift);
        rest = rest.wrapping_sub(lane) >> w;
    }
}

/// Writes `v` into `d`, or adds it when `ADD` (a reduction step). Sums of valid messages
/// stay within their bound; additions wrap so that a corrupt one cannot panic a debug build.
#[inline(always)]
fn put<const ADD: bool>(d: &mut i64, v: i64) {
    if ADD {
        *d = d.wrapping_add(v);
    } else {
        *d = v;
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    ((64 - v.leading_zeros()).max(1) as usize).div_ceil(7)
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8> {
        let v = *self.b.get(self.pos).ok_or_else(truncated)?;
        self.pos += 1;
        Ok(v)
    }
    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            v |= ((byte & 0x7f) as u64) << shift;
            if byte < 0x80 {
                return Ok(v);
            }
        }
        Err(Error::Collective(
            "malformed varint in a histogram message".into(),
        ))
    }
}

fn truncated() -> Error {
    Error::Collective("truncated histogram message".into())
}

/// One pass over a block: nonzero count, shared trailing zeros, and a number with the bit
/// length of the largest magnitude (their OR, which vectorises where a maximum does not).
fn stats(values: &[i64]) -> (usize, u32, u64) {
    let (mut nnz, mut or, mut abs_or) = (0usize, 0u64, 0u64);
    for &v in values {
        nnz += (v != 0) as usize;
        or |= v as u64;
        abs_or |= v.unsigned_abs();
    }
    let shift = if or == 0 {
        0
    } else {
        or.trailing_zeros().min(62)
    };
    (nnz, shift, abs_or)
}

/// Size in bytes of encodings of `values`, from one pass: plain, packed at the bound's width,
/// sparse varints (an upper estimate: every value at the largest magnitude's length), sparse
/// bitmap, and packed at the block's own width. (The length-prefixed encoding's size needs
/// a second pass.)
pub fn sizes(values: &[i64], bound: u64) -> [usize; 5] {
    sizes_from(values.len(), bound, stats(values))
}

fn sizes_from(len: usize, bound: u64, (nnz, shift, max): (usize, u32, u64)) -> [usize; 5] {
    let plain = 1 + 8 * len;
    let packed = 2 + 8 * len.div_ceil(lanes_per_word(lane_width(bound)));
    // an upper bound: no gap exceeds the block, no value twice the largest magnitude
    let gap = varint_len(len as u64);
    let varints =
        2 + varint_len(nnz as u64) + nnz * (gap + varint_len((max >> shift).saturating_mul(2)));
    let w = stream_width(max >> shift);
    let bitmap = 3 + varint_len(nnz as u64) + len.div_ceil(8) + stream_len(nnz, w);
    let tight = 3 + stream_len(len, w);
    [plain, packed, varints, bitmap, tight]
}

/// Bytes of the length-prefixed encoding's header and length nibbles for `len` values.
fn varbyte_header(len: usize) -> usize {
    2 + len.div_ceil(2)
}

/// Encodes `values`, every one of which (and every sum of them across workers) lies in
/// [-bound, bound], with `codec` (`Sparse`: one of the zero-suppressing encodings; `Auto`:
/// any; both choose by size and speed).
pub fn encode(values: &[i64], bound: u64, codec: CommCodec) -> Vec<u8> {
    match codec {
        CommCodec::None => encode_plain(values),
        CommCodec::Packed => encode_packed(values, bound),
        CommCodec::Sparse | CommCodec::Auto => {
            let st = stats(values);
            let s = sizes_from(values.len(), bound, st);
            let mut candidates = if codec == CommCodec::Auto {
                vec![(PLAIN, s[0]), (TIGHT, s[4]), (SPARSE, s[2]), (BITMAP, s[3])]
            } else {
                vec![(SPARSE, s[2]), (BITMAP, s[3])]
            };
            let smallest = candidates.iter().map(|c| c.1).min().unwrap();
            // the length-prefixed encoding's size needs a pass of its own, made only when
            // its lower bound (a byte per nonzero value) leaves it in the running
            let head = varbyte_header(values.len());
            if (head + st.0) as f64 <= SIZE_SLACK * smallest as f64 {
                candidates.push((VARBYTE, head + varbyte_data_len(values, st.1)));
            }
            let smallest = candidates.iter().map(|c| c.1).min().unwrap();
            let (len, nnz) = (values.len() as f64, st.0 as f64);
            let w = stream_width(st.2 >> st.1);
            let tag = candidates
                .iter()
                .filter(|c| c.1 as f64 <= SIZE_SLACK * smallest as f64)
                .min_by(|a, b| cost(a.0, len, nnz, w).total_cmp(&cost(b.0, len, nnz, w)))
                .unwrap()
                .0;
            match tag {
                PLAIN => encode_plain(values),
                TIGHT => encode_tight(values, st),
                SPARSE => encode_sparse(values, st),
                VARBYTE => encode_varbyte(values, st.1),
                _ => encode_bitmap(values, st),
            }
        }
    }
}

/// Within this factor of the smallest encoding, the cheapest to encode and decode is sent:
/// the exchange is on every worker's critical path, and on fast links a slower codec costs
/// more than a few percent more bytes.
pub const SIZE_SLACK: f64 = 1.25;

/// Rough encode plus decode time in ns of an encoding of `len` values, `nnz` of them nonzero,
/// whose bit stream would be `w` bits wide (from `examples/codec_bench` and per-encoding
/// timings on this project's 2-core machine; only their order matters).
fn cost(tag: u8, len: f64, nnz: f64, w: u32) -> f64 {
    match tag {
        PLAIN => 0.7 * len,
        TIGHT => (1.8 + 0.045 * w as f64) * len,
        VARBYTE => 3.1 * len,
        BITMAP => 2.5 * len + 2.0 * nnz,
        _ => 0.5 * len + 15.0 * nnz,
    }
}

fn encode_plain(values: &[i64]) -> Vec<u8> {
    let mut out = vec![0u8; 1 + 8 * values.len()];
    out[0] = PLAIN;
    for (o, v) in out[1..].chunks_exact_mut(8).zip(values) {
        o.copy_from_slice(&v.to_le_bytes());
    }
    out
}

fn encode_packed(values: &[i64], bound: u64) -> Vec<u8> {
    let w = lane_width(bound);
    let mut out = vec![PACKED, w as u8];
    pack_bytes(values, w, 0, &mut out);
    out
}

/// Width in bits of the zigzagged values of a bit stream whose largest magnitude (after the
/// shift) is `max`: widths over 56 become 64, so a value and the bits before it in its first
/// byte always fit one 8-byte word.
fn stream_width(max: u64) -> u32 {
    let w = lane_width(max);
    if w > 56 {
        64
    } else {
        w
    }
}

/// Bytes of a bit stream of `n` values at width `w`.
fn stream_len(n: usize, w: u32) -> usize {
    (n * w as usize).div_ceil(8)
}

/// Appends `values` (zigzagged) as a little-endian bit stream, `w` bits each. Eight values
/// take exactly `w` bytes, so each group of eight is assembled in registers on its own and
/// stored whole: no chain from one value to the next.
fn put_stream(values: &[i64], w: u32, shift: u32, out: &mut Vec<u8>) {
    let start = out.len();
    let len = stream_len(values.len(), w);
    out.resize(start + len + 64, 0);
    let data = &mut out[start..];
    let wu = w as usize;
    for (g, group) in values.chunks(8).enumerate() {
        let mut words = [0u64; 8];
        if w == 64 {
            for (word, &v) in words.iter_mut().zip(group) {
                *word = zigzag(v >> shift);
            }
        } else {
            for (j, &v) in group.iter().enumerate() {
                let u = zigzag(v >> shift);
                let (i, at) = (j * wu / 64, (j * wu % 64) as u32);
                words[i] |= u << at;
                // the same lanes straddle a word boundary in every group: predictable
                if at + w > 64 {
                    words[i + 1] |= u >> (64 - at);
                }
            }
        }
        // whole words; the zero bytes past this group's w are overwritten by the next group
        let at = g * wu;
        for (i, word) in words.iter().enumerate().take(wu.div_ceil(8)) {
            data[at + 8 * i..at + 8 * i + 8].copy_from_slice(&word.to_le_bytes());
        }
    }
    out.truncate(start + len);
}

/// Reads values of a bit stream at width `w`.
struct Stream<'a> {
    data: &'a [u8],
    mask: u64,
}

impl<'a> Stream<'a> {
    fn new(data: &'a [u8], w: u32) -> Self {
        let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        Stream { data, mask }
    }

    /// The value starting at bit `at` (zero past the end).
    #[inline(always)]
    fn at(&self, at: usize) -> i64 {
        let (byte, bit) = (at / 8, (at % 8) as u32);
        let word = match self.data.get(byte..byte + 8) {
            Some(c) => u64::from_le_bytes(c.try_into().unwrap()),
            None => {
                let byte = byte.min(self.data.len());
                tail_word(self.data, byte, self.data.len() - byte)
            }
        };
        // stream_width keeps bit + w <= 64
        unzigzag((word >> bit) & self.mask)
    }
}

/// Every value at the width the block's largest needs after removing the shared trailing
/// zeros (rather than the width the bound proves), as a bit stream.
fn encode_tight(values: &[i64], (_, shift, max): (usize, u32, u64)) -> Vec<u8> {
    let w = stream_width(max >> shift);
    let mut out = vec![TIGHT, shift as u8, w as u8];
    put_stream(values, w, shift, &mut out);
    out
}

/// Zero bins as one bit each, the rest as a bit stream at the width their largest needs.
fn encode_bitmap(values: &[i64], (nnz, shift, max): (usize, u32, u64)) -> Vec<u8> {
    let w = stream_width(max >> shift);
    let mut out = vec![BITMAP];
    put_varint(&mut out, nnz as u64);
    out.push(shift as u8);
    out.push(w as u8);
    // compaction without a branch per value: every value is written, only nonzero ones
    // advance (zeros and nonzeros interleave unpredictably in histograms)
    let mut kept = vec![0i64; values.len() + 1];
    let mut k = 0usize;
    let bits_at = out.len();
    out.resize(bits_at + values.len().div_ceil(8), 0);
    for (byte, chunk) in out[bits_at..].iter_mut().zip(values.chunks(8)) {
        let mut b = 0u8;
        for (j, &v) in chunk.iter().enumerate() {
            let nz = (v != 0) as usize;
            kept[k] = v;
            k += nz;
            b |= (nz as u8) << j;
        }
        *byte = b;
    }
    put_stream(&kept[..k], w, shift, &mut out);
    out
}

/// (index gap, value) varint pairs of the nonzero bins.
fn encode_sparse(values: &[i64], (nnz, shift, _): (usize, u32, u64)) -> Vec<u8> {
    let mut out = vec![SPARSE];
    out.reserve(2 + 4 * nnz);
    put_varint(&mut out, nnz as u64);
    out.push(shift as u8);
    let mut last = 0usize;
    for (i, &v) in values.iter().enumerate() {
        if v != 0 {
            put_varint(&mut out, (i - last) as u64);
            put_varint(&mut out, zigzag(v >> shift));
            last = i;
        }
    }
    out
}

/// Bytes a zigzagged value needs (0 for zero).
#[inline(always)]
fn byte_len(u: u64) -> usize {
    ((71 - u.leading_zeros()) / 8) as usize
}

/// Bytes of the values of the length-prefixed encoding.
fn varbyte_data_len(values: &[i64], shift: u32) -> usize {
    values.iter().map(|&v| byte_len(zigzag(v >> shift))).sum()
}

/// Each value (shifted, zigzagged) as its low `n` bytes, with the `n` of two values per
/// byte in a header: both loops are free of per-value branches.
fn encode_varbyte(values: &[i64], shift: u32) -> Vec<u8> {
    let head = varbyte_header(values.len());
    let mut out = Vec::with_capacity(head + 8 * values.len() + 8);
    out.extend_from_slice(&[VARBYTE, shift as u8]);
    out.resize(head, 0);
    // each value is written as a whole word and the unused bytes dropped again: no
    // variable-length copy, and the reservation above means no reallocation either
    let store = |out: &mut Vec<u8>, u: u64| {
        let n = byte_len(u);
        out.extend_from_slice(&u.to_le_bytes());
        out.truncate(out.len() - 8 + n);
        n as u8
    };
    let mut pairs = values.chunks_exact(2);
    for (i, pair) in pairs.by_ref().enumerate() {
        let na = store(&mut out, zigzag(pair[0] >> shift));
        let nb = store(&mut out, zigzag(pair[1] >> shift));
        out[2 + i] = na | nb << 4;
    }
    if let [v] = pairs.remainder() {
        out[head - 1] = store(&mut out, zigzag(v >> shift));
    }
    out
}

/// Masks keeping the low `n` bytes of a word, by `n`.
const BYTE_MASKS: [u64; 9] = [
    0,
    0xff,
    0xffff,
    0xff_ffff,
    0xffff_ffff,
    0xff_ffff_ffff,
    0xffff_ffff_ffff,
    0xff_ffff_ffff_ffff,
    u64::MAX,
];

/// Reads the values of a validated length-prefixed message into `dst` (adding when `ADD`).
#[inline(always)]
fn varbyte_values<const ADD: bool>(lens: &[u8], data: &[u8], shift: u32, dst: &mut [i64]) {
    let take = |d: &mut i64, u: u64| put::<ADD>(d, unzigzag(u) << shift);
    let mut pos = 0usize;
    let mut pairs = dst.chunks_exact_mut(2);
    let mut lens = lens.iter();
    // whole-word loads while two of them fit, then byte copies for the tail
    for (pair, &l) in pairs.by_ref().zip(lens.by_ref()) {
        let (a, b) = ((l & 15) as usize, (l >> 4) as usize);
        if let Some(words) = data.get(pos..pos + 16) {
            // lengths were validated (<= 8); min() lets the compiler see it too
            let (a, b) = (a.min(8), b.min(8));
            let wa = u64::from_le_bytes(words[..8].try_into().unwrap());
            let wb = u64::from_le_bytes(words[a..a + 8].try_into().unwrap());
            take(&mut pair[0], wa & BYTE_MASKS[a]);
            take(&mut pair[1], wb & BYTE_MASKS[b]);
        } else {
            take(&mut pair[0], tail_word(data, pos, a));
            take(&mut pair[1], tail_word(data, pos + a, b));
        }
        pos += a + b;
    }
    if let ([last], Some(&l)) = (pairs.into_remainder(), lens.next()) {
        take(last, tail_word(data, pos, (l & 15) as usize));
    }
}

/// The `n` bytes at `pos` as a little-endian word, without reading past the end.
fn tail_word(data: &[u8], pos: usize, n: usize) -> u64 {
    let mut w = [0u8; 8];
    w[..n].copy_from_slice(&data[pos..pos + n]);
    u64::from_le_bytes(w)
}

fn decode_varbyte<const ADD: bool>(bytes: &[u8], dst: &mut [i64]) -> Result<()> {
    let len = dst.len();
    let head = varbyte_header(len);
    if bytes.len() < head {
        return Err(truncated());
    }
    let shift = bytes[1] as u32;
    let (lens, data) = bytes[2..].split_at(head - 2);
    // validate every length once, so the loop below needs no checks but its bounds
    let mut total = 0usize;
    let mut bad = shift > 62;
    for &l in lens {
        let (a, b) = ((l & 15) as usize, (l >> 4) as usize);
        bad |= a > 8 || b > 8;
        total += a + b;
    }
    if len % 2 == 1 {
        bad |= lens.last().is_some_and(|&l| l >> 4 != 0);
    }
    if bad {
        return Err(Error::Collective(
            "malformed length-prefixed histogram message".into(),
        ));
    }
    if total != data.len() {
        return Err(truncated());
    }
    varbyte_values::<ADD>(lens, data, shift, dst);
    Ok(())
}

/// Scatters the stream values of a validated bitmap message to the marked bins of `dst`
/// (adding when `ADD`); every bin reads a value and zero bins mask it, so there is no
/// branch per bin.
#[inline(always)]
fn bitmap_values<const ADD: bool>(bits: &[u8], data: &[u8], w: u32, shift: u32, dst: &mut [i64]) {
    let stream = Stream::new(data, w);
    let mut at = 0usize;
    for (chunk, &b) in dst.chunks_mut(8).zip(bits) {
        for (j, d) in chunk.iter_mut().enumerate() {
            let bit = ((b >> j) & 1) as usize;
            put::<ADD>(d, (stream.at(at) << shift) & -(bit as i64));
            at += w as usize * bit;
        }
    }
}

/// Reads a validated bit stream of `dst.len()` values into `dst` (adding when `ADD`).
#[inline(always)]
fn stream_values<const ADD: bool>(data: &[u8], w: u32, shift: u32, dst: &mut [i64]) {
    let stream = Stream::new(data, w);
    for (k, d) in dst.iter_mut().enumerate() {
        put::<ADD>(d, stream.at(k * w as usize) << shift);
    }
}

/// Decodes a block of `len` values; malformed input is an error.
pub fn decode(bytes: &[u8], len: usize) -> Result<Vec<i64>> {
    let mut out = vec![0i64; len];
    decode_into(bytes, &mut out, false)?;
    Ok(out)
}

/// Decodes a block into `dst`, adding to it when `add` (a reduction step) or overwriting.
pub fn decode_into(bytes: &[u8], dst: &mut [i64], add: bool) -> Result<()> {
    if add {
        decode_with::<true>(bytes, dst)
    } else {
        decode_with::<false>(bytes, dst)
    }
}

fn decode_with<const ADD: bool>(bytes: &[u8], dst: &mut [i64]) -> Result<()> {
    let len = dst.len();
    let mut r = Reader { b: bytes, pos: 0 };
    let tag = r.byte()?;
    let rest = &bytes[1..];
    match tag {
        PLAIN => {
            if rest.len() != 8 * len {
                return Err(truncated());
            }
            for (d, c) in dst.iter_mut().zip(rest.chunks_exact(8)) {
                put::<ADD>(d, i64::from_le_bytes(c.try_into().unwrap()));
            }
            Ok(())
        }
        PACKED => {
            let w = r.byte()? as u32;
            if !(1..=64).contains(&w) {
                return Err(Error::Collective(format!("bad lane width {w}")));
            }
            let words = &bytes[r.pos..];
            if words.len() != 8 * len.div_ceil(lanes_per_word(w)) {
                return Err(truncated());
            }
            unpack_bytes::<ADD>(words, w, 0, dst);
            Ok(())
        }
        TIGHT => {
            let shift = r.byte()? as u32;
            let w = r.byte()? as u32;
            if !(1..=56).contains(&w) && w != 64 || shift > 62 {
                return Err(Error::Collective(format!(
                    "bad stream width {w} or shift {shift}"
                )));
            }
            let data = &bytes[r.pos..];
            if data.len() != stream_len(len, w) {
                return Err(truncated());
            }
            stream_values::<ADD>(data, w, shift, dst);
            Ok(())
        }
        SPARSE => {
            let nnz = r.varint()? as usize;
            let shift = r.byte()? as u32;
            if nnz > len || shift > 62 {
                return Err(Error::Collective(
                    "malformed sparse histogram message".into(),
                ));
            }
            if !ADD {
                dst.fill(0);
            }
            let mut i = 0usize;
            for _ in 0..nnz {
                i = i
                    .checked_add(r.varint()? as usize)
                    .filter(|&i| i < len)
                    .ok_or_else(|| Error::Collective("sparse index out of range".into()))?;
                put::<true>(&mut dst[i], unzigzag(r.varint()?) << shift);
            }
            if r.pos != bytes.len() {
                return Err(Error::Collective(
                    "trailing bytes in a histogram message".into(),
                ));
            }
            Ok(())
        }
        BITMAP => {
            let nnz = r.varint()? as usize;
            let shift = r.byte()? as u32;
            let w = r.byte()? as u32;
            if nnz > len || shift > 62 || !(1..=56).contains(&w) && w != 64 {
                return Err(Error::Collective(
                    "malformed bitmap histogram message".into(),
                ));
            }
            let bits_len = len.div_ceil(8);
            let rest = &bytes[r.pos..];
            if rest.len() != bits_len + stream_len(nnz, w) {
                return Err(truncated());
            }
            let (bits, data) = rest.split_at(bits_len);
            // the bitmap must mark exactly nnz bins, none past the end
            let marked: usize = bits.iter().map(|b| b.count_ones() as usize).sum();
            let overhang = bits.last().map_or(0, |&b| b >> (len % 8));
            if marked != nnz || (!len.is_multiple_of(8) && overhang != 0) {
                return Err(Error::Collective(
                    "bitmap and values disagree in a histogram message".into(),
                ));
            }
            bitmap_values::<ADD>(bits, data, w, shift, dst);
            Ok(())
        }
        VARBYTE => decode_varbyte::<ADD>(bytes, dst),
        t => Err(Error::Collective(format!("unknown histogram encoding {t}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bounded_block() -> impl Strategy<Value = (u64, Vec<i64>)> {
        (0u32..65, 0u32..20, 1u32..200).prop_flat_map(|(bits, zeros, sparsity)| {
            let bound = match bits {
                0 => 0,
                64 => u64::MAX,
                b => (1u64 << b) - 1,
            };
            let b = bound.min(i64::MAX as u64) as i64;
            // values sharing trailing zero bits, as quantised histograms do; from dense to one
            // nonzero bin in a few hundred
            let value = (-b..=b).prop_map(move |v| (v >> zeros.min(bits)) << zeros.min(bits));
            (
                Just(bound),
                proptest::collection::vec(prop_oneof![sparsity => Just(0i64), 10 => value], 0..600),
            )
        })
    }

    /// Every encoding of `values`, by name.
    fn every_encoding(values: &[i64], bound: u64) -> Vec<(&'static str, Vec<u8>)> {
        let st = stats(values);
        vec![
            ("plain", encode_plain(values)),
            ("packed", encode_packed(values, bound)),
            ("tight", encode_tight(values, st)),
            ("bitmap", encode_bitmap(values, st)),
            ("sparse", encode_sparse(values, st)),
            ("varbyte", encode_varbyte(values, st.1)),
        ]
    }

    proptest! {
        #[test]
        fn every_codec_round_trips((bound, values) in bounded_block()) {
            let len = values.len();
            for codec in [CommCodec::None, CommCodec::Packed, CommCodec::Sparse, CommCodec::Auto] {
                let bytes = encode(&values, bound, codec);
                prop_assert_eq!(decode(&bytes, len).unwrap(), values.clone(), "{:?}", codec);
            }
            // auto is within the slack of the smallest size it can know before encoding
            // (the varint pairs' is an upper bound), so never far above plain
            let shown = sizes(&values, bound);
            let varbyte = varbyte_header(len) + varbyte_data_len(&values, stats(&values).1);
            let smallest = [shown[0], shown[2], shown[3], shown[4], varbyte].into_iter().min().unwrap();
            let auto = encode(&values, bound, CommCodec::Auto).len();
            prop_assert!(auto as f64 <= SIZE_SLACK * smallest as f64, "{} vs {}", auto, smallest);
        }

        #[test]
        fn every_encoding_round_trips_and_adds((bound, values) in bounded_block(), base in any::<i32>()) {
            let len = values.len();
            for (name, bytes) in every_encoding(&values, bound) {
                prop_assert_eq!(decode(&bytes, len).unwrap(), values.clone(), "{}", name);
                // decoding into a running sum adds every value, zero bins included
                let mut sum: Vec<i64> = (0..len as i64).map(|i| base as i64 + i).collect();
                decode_into(&bytes, &mut sum, true).unwrap();
                let want: Vec<i64> = values.iter().enumerate().map(|(i, v)| base as i64 + i as i64 + v).collect();
                prop_assert_eq!(sum, want, "{} adding", name);
                // every strict prefix is refused
                for cut in [0, bytes.len() / 2, bytes.len().saturating_sub(1)] {
                    if cut < bytes.len() {
                        prop_assert!(decode(&bytes[..cut], len).is_err(), "{} prefix {}", name, cut);
                    }
                }
                let shown = sizes(&values, bound);
                match name {
                    "plain" => prop_assert_eq!(bytes.len(), shown[0]),
                    "packed" => prop_assert_eq!(bytes.len(), shown[1]),
                    "sparse" => prop_assert!(bytes.len() <= shown[2]),
                    "bitmap" => prop_assert_eq!(bytes.len(), shown[3]),
                    "tight" => prop_assert_eq!(bytes.len(), shown[4]),
                    _ => prop_assert_eq!(bytes.len(), varbyte_header(len) + varbyte_data_len(&values, stats(&values).1)),
                }
            }
        }

        #[test]
        fn sums_of_packed_words_are_packed_lane_sums(
            bits in 1u32..62,
            parts in 1usize..6,
            len in 1usize..100,
            raw in proptest::collection::vec(any::<i64>(), 600),
        ) {
            // each worker's values are bounded so that any sum over workers fits the bound
            let bound = (1u64 << bits) - 1;
            let per = (bound / parts as u64) as i64;
            let workers: Vec<Vec<i64>> = (0..parts)
                .map(|p| (0..len).map(|i| if per == 0 { 0 } else { raw[(p * len + i) % raw.len()].rem_euclid(2 * per + 1) - per }).collect())
                .collect();
            let w = lane_width(bound);
            let mut word_sum = vec![0i64; len.div_ceil(lanes_per_word(w))];
            for v in &workers {
                for (s, p) in word_sum.iter_mut().zip(pack(v, w)) {
                    *s = s.wrapping_add(p);
                }
            }
            let lane_sum: Vec<i64> = (0..len).map(|i| workers.iter().map(|v| v[i]).sum()).collect();
            prop_assert_eq!(unpack(&word_sum, w, len), lane_sum);
        }
    }

    #[test]
    fn malformed_messages_are_errors() {
        let v = vec![1i64, 0, -5, 0, 0, 7, 0];
        for (name, b) in every_encoding(&v, 8) {
            for cut in 0..b.len() {
                assert!(decode(&b[..cut], v.len()).is_err(), "{name} prefix {cut}");
            }
            // a message for another length is refused, not misread (varint pairs carry
            // indices only, so a longer block is a valid reading of them)
            if name != "sparse" {
                assert!(decode(&b, v.len() + 9).is_err(), "{name} longer");
            }
        }
        assert!(decode(&[9, 0, 0], 1).is_err());
        // a length nibble over 8 bytes
        let mut b = encode_varbyte(&v, 0);
        b[2] |= 0x0f;
        assert!(decode(&b, v.len()).is_err());
        // a bitmap marking more bins than it has values for
        let mut b = encode_bitmap(&v, stats(&v));
        let at = b.len() - stream_len(3, stream_width(7)) - 1;
        b[at] |= 0x02;
        assert!(decode(&b, v.len()).is_err());
    }

    #[test]
    fn extreme_values_round_trip() {
        for v in [
            vec![i64::MIN, i64::MAX],
            vec![i64::MIN, 0, 0, 1],
            vec![i64::MAX; 3],
            vec![-(1i64 << 62); 5],
        ] {
            for (name, b) in every_encoding(&v, u64::MAX) {
                assert_eq!(decode(&b, v.len()).unwrap(), v, "{name}");
            }
            let shown = sizes(&v, u64::MAX);
            let smallest = [shown[0], shown[2], shown[3], shown[4]]
                .into_iter()
                .min()
                .unwrap();
            let auto = encode(&v, u64::MAX, CommCodec::Auto);
            assert_eq!(decode(&auto, v.len()).unwrap(), v);
            assert!(auto.len() as f64 <= SIZE_SLACK * smallest as f64);
        }
    }

    #[test]
    fn sparse_blocks_are_sent_small() {
        // one nonzero bin in ten thousand: a few bytes, not one per bin
        let mut v = vec![0i64; 10_000];
        v[4321] = -3 << 20;
        let b = encode(&v, 1 << 40, CommCodec::Auto);
        assert!(b.len() < 16, "{}", b.len());
        assert_eq!(decode(&b, v.len()).unwrap(), v);
        // dense narrow values: at most their width plus a bit each
        let v: Vec<i64> = (0..4096).map(|i| (i % 200) - 100).collect();
        let b = encode(&v, 1 << 40, CommCodec::Auto);
        assert!(b.len() * 8 <= (9 + 1) * 4096 + 64, "{}", b.len());
    }

    #[test]
    fn narrow_values_pack_tightly() {
        assert_eq!(lane_width(0), 1);
        assert_eq!(lane_width(1), 2);
        assert_eq!(lane_width(127), 8);
        assert_eq!(lane_width(128), 9);
        assert_eq!(lane_width(u64::MAX), 64);
        let v: Vec<i64> = (0..64).map(|i| i - 32).collect();
        assert!(encode(&v, 127, CommCodec::Packed).len() <= 2 + 8 * 8);
    }
}
