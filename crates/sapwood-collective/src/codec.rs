//! Exact encodings of i64 blocks for the wire.
//!
//! Every reduced value is bounded before anything is sent (global rows × largest quantised
//! magnitude), so the narrowest lane width that holds it is known: `packed` puts values
//! several per 64-bit word as one signed mixed-radix number (lane i weighted by 2^(w·i)). A
//! plain integer sum of packed words is the packed form of the lane-wise sums, so a transport
//! that can only add 64-bit integers (MPI, NCCL) reduces compressed data.
//!
//! The other encodings remove the trailing zero bits values share (quantised sums are
//! multiples of a power of two), zigzag the values and write them
//! - in groups of 32, each group at its own shift and width, empty groups as one byte and
//!   mostly empty ones as a bitmap plus their nonzero values (`groups`; what `auto` sends),
//! - as a bitmap of the block's nonzero bins and a bit stream of those, or
//! - as (index gap, value) varint pairs, for blocks that are almost all zero.
//!
//! `sparse` chooses between the last two per block (among those within [`SIZE_SLACK`] of
//! the smaller, the cheaper to encode and decode); `auto` sends groups, or varint pairs for a
//! block that is almost all zero when they are smaller.

use sapwood_core::params::CommCodec;
use sapwood_core::wire::{varint_len, ByteReader, PutBytes};
use sapwood_core::{Error, Result};

const PLAIN: u8 = 0;
const PACKED: u8 = 1;
const SPARSE: u8 = 2;
const BITMAP: u8 = 3;
const GROUPS: u8 = 6;

mod group_choice;
#[cfg(target_arch = "x86_64")]
mod group_lanes;
mod groups;

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
        .map(|lanes| pack_word(lanes, w))
        .collect()
}

/// One word holding `lanes` as a signed mixed-radix number.
#[inline(always)]
fn pack_word(lanes: &[i64], w: u32) -> i64 {
    lanes.iter().enumerate().fold(0i64, |acc, (i, &v)| {
        acc.wrapping_add(v.wrapping_shl(w * i as u32))
    })
}

/// Appends the words packing `values` at width `w`, little-endian.
fn pack_bytes(values: &[i64], w: u32, out: &mut Vec<u8>) {
    let k = lanes_per_word(w);
    let at = out.len();
    out.resize(at + 8 * values.len().div_ceil(k), 0);
    for (o, lanes) in out[at..].chunks_exact_mut(8).zip(values.chunks(k)) {
        o.copy_from_slice(&pack_word(lanes, w).to_le_bytes());
    }
}

/// Unpacks `len` lanes of width `w` from words (sums of packed words unpack to lane sums).
pub fn unpack(words: &[i64], w: u32, len: usize) -> Vec<i64> {
    let w = w.clamp(1, 64);
    let mut out = vec![0i64; len];
    for (lanes, &word) in out.chunks_mut(lanes_per_word(w)).zip(words) {
        unpack_word::<false>(word, w, lanes);
    }
    out
}

/// Checks that `words` are the packing of `data.len()` values in segments of `segment`,
/// segment i at `widths[i]` (what `allreduce_packed` is handed), before any is summed.
pub fn check_segments(words: usize, widths: &[u32], segment: usize, data: usize) -> Result<()> {
    let segment = segment.max(1);
    let segments = data.div_ceil(segment);
    let expected: usize = (0..segments)
        .zip(widths)
        .map(|(i, &w)| {
            let len = segment.min(data - i * segment);
            len.div_ceil(lanes_per_word(w.clamp(1, 64)))
        })
        .sum();
    if widths.len() != segments || words != expected {
        return Err(sapwood_core::Error::Collective(format!(
            "{words} packed words at {} widths for {segments} segments of {segment} values \
             (they take {expected} words)",
            widths.len()
        )));
    }
    Ok(())
}

/// Unpacks summed words, segments of `segment` values one after another each at its width
/// (as [`check_segments`] accepted them), into `data`.
pub fn unpack_segments(words: &[i64], widths: &[u32], segment: usize, data: &mut [i64]) {
    let mut at = 0;
    for (seg, &w) in data.chunks_mut(segment.max(1)).zip(widths) {
        let w = w.clamp(1, 64);
        let n = seg.len().div_ceil(lanes_per_word(w));
        seg.copy_from_slice(&unpack(&words[at..at + n], w, seg.len()));
        at += n;
    }
}

/// Unpacks `dst.len()` lanes of width `w` from little-endian words into `dst` (adding to
/// it when `ADD`).
fn unpack_bytes<const ADD: bool>(bytes: &[u8], w: u32, dst: &mut [i64]) {
    for (lanes, word) in dst.chunks_mut(lanes_per_word(w)).zip(bytes.chunks_exact(8)) {
        unpack_word::<ADD>(i64::from_le_bytes(word.try_into().unwrap()), w, lanes);
    }
}

/// The lanes of one packed word (width `w` in 1..=64) into `lanes` (adding when `ADD`).
#[inline(always)]
fn unpack_word<const ADD: bool>(word: i64, w: u32, lanes: &mut [i64]) {
    if w >= 64 {
        put::<ADD>(&mut lanes[0], word);
        return;
    }
    let mut rest = word;
    for d in lanes {
        // sign-extend the low lane, then remove it (it may have borrowed from the next)
        let lane = (rest << (64 - w)) >> (64 - w);
        put::<ADD>(d, lane);
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

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// What a histogram message is called in errors.
const MESSAGE: &str = "histogram message";

/// Counts an encoded message under its encoding (its first byte).
pub fn count_block(msg: &[u8], counts: &mut sapwood_core::collective::BlockCounts) {
    match msg.first() {
        Some(&PLAIN) => counts.plain += 1,
        Some(&PACKED) => counts.packed += 1,
        Some(&SPARSE) => counts.sparse += 1,
        Some(&BITMAP) => counts.bitmap += 1,
        Some(&GROUPS) => counts.groups += 1,
        _ => {}
    }
}

fn truncated() -> Error {
    Error::Collective(format!("truncated {MESSAGE}"))
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
/// sparse varints (an upper estimate: every value at the largest magnitude's length) and
/// sparse bitmap. (The group encoding's size is known only by encoding.)
pub fn sizes(values: &[i64], bound: u64) -> [usize; 4] {
    sizes_from(values.len(), bound, stats(values))
}

fn sizes_from(len: usize, bound: u64, (nnz, shift, max): (usize, u32, u64)) -> [usize; 4] {
    let plain = 1 + 8 * len;
    let packed = 2 + 8 * len.div_ceil(lanes_per_word(lane_width(bound)));
    // an upper bound: no gap exceeds the block, no value twice the largest magnitude
    let gap = varint_len(len as u64);
    let varints =
        2 + varint_len(nnz as u64) + nnz * (gap + varint_len((max >> shift).saturating_mul(2)));
    let w = stream_width(max >> shift);
    let bitmap = 3 + varint_len(nnz as u64) + len.div_ceil(8) + stream_len(nnz, w);
    [plain, packed, varints, bitmap]
}

/// Encodes `values`, every one of which (and every sum of them across workers) lies in
/// [-bound, bound], with `codec` (`Sparse`: a zero-suppressing encoding chosen by size and
/// speed; `Auto`: groups, or varint pairs when a block is almost all zero and they are
/// smaller).
pub fn encode(values: &[i64], bound: u64, codec: CommCodec) -> Vec<u8> {
    Encoder::new(codec).encode(values, bound)
}

/// The group encoding of `values` without its tag byte (what `auto` sends for a block that
/// is not almost all zero): the reference the device encoders are tested against.
pub fn encode_groups(values: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    group_choice::encode(values, &mut out);
    out
}

/// The message of a block a device group-encoded (`payload`, the bytes after the tag, as
/// [`encode_groups`] gives them): what the host sends without touching the values.
pub fn groups_message(payload: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(1 + payload.len());
    msg.push(GROUPS);
    msg.extend_from_slice(payload);
    msg
}

/// Messages an encoder keeps for reuse; more than a worker has in flight at once is waste.
const SPARE_MESSAGES: usize = 16;

/// Encodes blocks with one codec into the memory of messages already decoded: a fresh
/// buffer for every message would fault in new pages every time (the group encoding's
/// buffer is sized for its worst case, since its size is known only once it is written).
#[derive(Debug)]
pub struct Encoder {
    codec: CommCodec,
    spare: Vec<Vec<u8>>,
}

impl Encoder {
    /// An encoder for `codec`.
    pub fn new(codec: CommCodec) -> Self {
        Encoder {
            codec,
            spare: Vec::new(),
        }
    }

    /// The codec it encodes with.
    pub fn codec(&self) -> CommCodec {
        self.codec
    }

    /// Takes back a message once it has been decoded, to carry a later one.
    pub fn recycle(&mut self, msg: Vec<u8>) {
        if self.spare.len() < SPARE_MESSAGES {
            self.spare.push(msg);
        }
    }

    /// Encodes `values`, every one of which (and every sum of them across workers) lies in
    /// [-bound, bound], as [`encode`] describes.
    pub fn encode(&mut self, values: &[i64], bound: u64) -> Vec<u8> {
        let mut out = self.spare.pop().unwrap_or_default();
        out.clear();
        match self.codec {
            CommCodec::None => encode_plain(values, &mut out),
            CommCodec::Packed => encode_packed(values, bound, &mut out),
            CommCodec::Sparse => {
                let st = stats(values);
                let s = sizes_from(values.len(), bound, st);
                let candidates = [(SPARSE, s[2]), (BITMAP, s[3])];
                let smallest = s[2].min(s[3]);
                let (len, nnz) = (values.len() as f64, st.0 as f64);
                let tag = candidates
                    .iter()
                    .filter(|c| c.1 as f64 <= SIZE_SLACK * smallest as f64)
                    .min_by(|a, b| cost(a.0, len, nnz).total_cmp(&cost(b.0, len, nnz)))
                    .unwrap()
                    .0;
                match tag {
                    SPARSE => encode_sparse(values, st, &mut out),
                    _ => encode_bitmap(values, st, &mut out),
                }
            }
            CommCodec::Auto => {
                out.push(GROUPS);
                let nnz = group_choice::encode(values, &mut out);
                // a block almost all zero costs the groups a byte per 32 bins; pairs may
                // be less
                if nnz * 8 < values.len() {
                    let st = stats(values);
                    if sizes_from(values.len(), bound, st)[2] < out.len() {
                        out.clear();
                        encode_sparse(values, st, &mut out);
                    }
                }
            }
        }
        out
    }
}

/// Within this factor of the smaller zero-suppressing encoding, the cheaper to encode and
/// decode is sent: the exchange is on every worker's critical path, and on fast links a
/// slower codec costs more than a few percent more bytes.
pub const SIZE_SLACK: f64 = 1.25;

/// Rough encode plus decode time in ns of a zero-suppressing encoding of `len` values, `nnz`
/// of them nonzero (from per-encoding timings on this project's 2-core machine; only their
/// order matters).
fn cost(tag: u8, len: f64, nnz: f64) -> f64 {
    match tag {
        BITMAP => 2.5 * len + 2.0 * nnz,
        _ => 0.5 * len + 15.0 * nnz,
    }
}

fn encode_plain(values: &[i64], out: &mut Vec<u8>) {
    out.push(PLAIN);
    let at = out.len();
    out.resize(at + 8 * values.len(), 0);
    for (o, v) in out[at..].chunks_exact_mut(8).zip(values) {
        o.copy_from_slice(&v.to_le_bytes());
    }
}

fn encode_packed(values: &[i64], bound: u64, out: &mut Vec<u8>) {
    let w = lane_width(bound);
    out.extend_from_slice(&[PACKED, w as u8]);
    pack_bytes(values, w, out);
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

/// Zero bins as one bit each, the rest as a bit stream at the width their largest needs.
fn encode_bitmap(values: &[i64], (nnz, shift, max): (usize, u32, u64), out: &mut Vec<u8>) {
    let w = stream_width(max >> shift);
    out.push(BITMAP);
    out.put_varint(nnz as u64);
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
    put_stream(&kept[..k], w, shift, out);
}

/// (index gap, value) varint pairs of the nonzero bins.
fn encode_sparse(values: &[i64], (nnz, shift, _): (usize, u32, u64), out: &mut Vec<u8>) {
    out.push(SPARSE);
    out.reserve(2 + 4 * nnz);
    out.put_varint(nnz as u64);
    out.push(shift as u8);
    let mut last = 0usize;
    for (i, &v) in values.iter().enumerate() {
        if v != 0 {
            out.put_varint((i - last) as u64);
            out.put_varint(zigzag(v >> shift));
            last = i;
        }
    }
}

/// The `n` bytes at `pos` as a little-endian word, without reading past the end.
fn tail_word(data: &[u8], pos: usize, n: usize) -> u64 {
    let mut w = [0u8; 8];
    w[..n].copy_from_slice(&data[pos..pos + n]);
    u64::from_le_bytes(w)
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
    let mut r = ByteReader::new(bytes, MESSAGE);
    let tag = r.u8()?;
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
            let w = r.u8()? as u32;
            if !(1..=64).contains(&w) {
                return Err(Error::Collective(format!("bad lane width {w}")));
            }
            let words = r.rest();
            if words.len() != 8 * len.div_ceil(lanes_per_word(w)) {
                return Err(truncated());
            }
            unpack_bytes::<ADD>(words, w, dst);
            Ok(())
        }
        GROUPS => group_choice::decode::<ADD>(rest, dst),
        SPARSE => {
            let nnz = r.varint()? as usize;
            let shift = r.u8()? as u32;
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
            if !r.is_empty() {
                return Err(Error::Collective(
                    "trailing bytes in a histogram message".into(),
                ));
            }
            Ok(())
        }
        BITMAP => {
            let nnz = r.varint()? as usize;
            let shift = r.u8()? as u32;
            let w = r.u8()? as u32;
            if nnz > len || shift > 62 || !(1..=56).contains(&w) && w != 64 {
                return Err(Error::Collective(
                    "malformed bitmap histogram message".into(),
                ));
            }
            let bits_len = len.div_ceil(8);
            let rest = r.rest();
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
        let with = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut out = Vec::new();
            f(&mut out);
            out
        };
        vec![
            ("plain", with(&|o| encode_plain(values, o))),
            ("packed", with(&|o| encode_packed(values, bound, o))),
            ("bitmap", with(&|o| encode_bitmap(values, st, o))),
            ("sparse", with(&|o| encode_sparse(values, st, o))),
            (
                "groups",
                with(&|o| {
                    o.push(GROUPS);
                    group_choice::encode(values, o);
                }),
            ),
        ]
    }

    /// The size of the group encoding worked out value by value: per 32 values (or fewer, at
    /// the end), one byte if all are zero, else two (plus four for a bitmap, used when it
    /// saves a fifth) and the values at the smallest width and largest shift that hold them.
    fn reference_groups_len(values: &[i64]) -> usize {
        1 + values
            .chunks(32)
            .map(|g| {
                let nonzero: Vec<i64> = g.iter().copied().filter(|&v| v != 0).collect();
                if nonzero.is_empty() {
                    return 1;
                }
                let shift = (0..64)
                    .rev()
                    .find(|&s| {
                        nonzero
                            .iter()
                            .all(|&v| v % (1i128 << s) as i64 == 0 || s == 63 && v == i64::MIN)
                    })
                    .unwrap();
                let w = nonzero
                    .iter()
                    .map(|&v| 64 - zigzag(v >> shift).leading_zeros() as usize)
                    .max()
                    .unwrap();
                let (k, r) = (nonzero.len(), g.len());
                if 5 * (32 + k * w) <= 4 * r * w {
                    6 + (k * w).div_ceil(8)
                } else {
                    2 + (r * w).div_ceil(8)
                }
            })
            .sum::<usize>()
    }

    proptest! {
        #[test]
        fn every_codec_round_trips((bound, values) in bounded_block()) {
            let len = values.len();
            for codec in [CommCodec::None, CommCodec::Packed, CommCodec::Sparse, CommCodec::Auto] {
                let bytes = encode(&values, bound, codec);
                prop_assert_eq!(decode(&bytes, len).unwrap(), values.clone(), "{:?}", codec);
            }
            // auto sends groups or smaller varint pairs, never more than a sparse group's 6
            // header bytes per 32 values above plain, and the sparse codec stays within the slack of its smaller option
            let shown = sizes(&values, bound);
            let auto = encode(&values, bound, CommCodec::Auto).len();
            prop_assert!(auto <= reference_groups_len(&values));
            prop_assert!(auto <= shown[0] + 6 * len.div_ceil(32), "{} vs {}", auto, shown[0]);
            let sparse = encode(&values, bound, CommCodec::Sparse).len();
            prop_assert!(sparse as f64 <= SIZE_SLACK * shown[2].min(shown[3]) as f64);
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
                    _ => prop_assert_eq!(bytes.len(), reference_groups_len(&values)),
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
            // a message for a longer block is refused, not misread (varint pairs carry
            // indices only, so a longer block is a valid reading of them; groups pad their
            // last group with zeros, so only lengths past it are told apart)
            if name != "sparse" {
                assert!(decode(&b, v.len() + 32).is_err(), "{name} longer");
            }
        }
        assert!(decode(&[9, 0, 0], 1).is_err());
        // groups: a width over 64, a shift over 63, a sparse group of width 0, a bitmap
        // marking bins past the end, trailing bytes
        assert!(decode(&[GROUPS, 65, 0], 32).is_err());
        assert!(decode(&[GROUPS, 1, 64, 0, 0, 0, 0], 32).is_err());
        assert!(decode(&[GROUPS, 0x80], 32).is_err());
        assert!(decode(&[GROUPS, 0x81, 0, 0x80, 0, 0, 0, 1], 7).is_err());
        assert!(decode(&[GROUPS, 0x81, 0, 0x40, 0, 0, 0, 1], 7).is_ok());
        assert!(decode(&[GROUPS, 0, 0], 32).is_err());
        // a short last group takes the bytes of its own values only
        assert_eq!(
            encode(&[1; 7], 8, CommCodec::Auto),
            [GROUPS, 2, 0, 0xaa, 0x2a]
        );
        assert!(decode(&[GROUPS, 2, 0, 0xaa, 0x2a, 0], 7).is_err());
        // a bitmap marking more bins than it has values for
        let mut b = Vec::new();
        encode_bitmap(&v, stats(&v), &mut b);
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
            let auto = encode(&v, u64::MAX, CommCodec::Auto);
            assert_eq!(decode(&auto, v.len()).unwrap(), v);
            assert!(auto.len() <= reference_groups_len(&v));
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
