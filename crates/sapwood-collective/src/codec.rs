//! Exact encodings of i64 blocks for the wire.
//!
//! Every reduced value is bounded before anything is sent (global rows × largest quantised
//! magnitude), so the narrowest lane width that holds it is known: values are packed several
//! per 64-bit word as one signed mixed-radix number (lane i weighted by 2^(w·i)). A plain
//! integer sum of packed words is the packed form of the lane-wise sums, so a transport that
//! can only add 64-bit integers (MPI, NCCL) reduces compressed data. Sparse blocks (deep
//! nodes, categoricals) drop zero bins and write the rest as varints, after removing the
//! trailing zero bits every value shares.

use sapwood_core::params::CommCodec;
use sapwood_core::{Error, Result};

const PLAIN: u8 = 0;
const PACKED: u8 = 1;
const SPARSE: u8 = 2;
const BITMAP: u8 = 3;

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
    let k = lanes_per_word(w);
    values
        .chunks(k)
        .map(|lanes| {
            lanes.iter().enumerate().fold(0i64, |acc, (i, &v)| {
                acc.wrapping_add(v.wrapping_shl(w * i as u32))
            })
        })
        .collect()
}

/// Unpacks `len` lanes of width `w` from words (sums of packed words unpack to lane sums).
pub fn unpack(words: &[i64], w: u32, len: usize) -> Vec<i64> {
    let k = lanes_per_word(w);
    let mut out = Vec::with_capacity(len);
    for &word in words {
        let mut rest = word;
        for _ in 0..k {
            if out.len() == len {
                break;
            }
            if w == 64 {
                out.push(rest);
                break;
            }
            let lane = (rest << (64 - w)) >> (64 - w);
            out.push(lane);
            rest = rest.wrapping_sub(lane) >> w;
        }
    }
    out
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

/// One pass over a block: nonzero count, shared trailing zeros, largest magnitude.
fn stats(values: &[i64]) -> (usize, u32, u64) {
    let (mut nnz, mut or, mut max) = (0usize, 0i64, 0u64);
    for &v in values {
        nnz += (v != 0) as usize;
        or |= v;
        max = max.max(v.unsigned_abs());
    }
    let shift = if or == 0 {
        0
    } else {
        or.trailing_zeros().min(62)
    };
    (nnz, shift, max)
}

/// Size in bytes of each encoding of `values`: plain, packed, sparse varints (an upper
/// estimate: every value at the largest magnitude's length) and sparse bitmap, from one pass.
pub fn sizes(values: &[i64], bound: u64) -> [usize; 4] {
    let plain = 1 + 8 * values.len();
    let packed = 2 + 8 * values.len().div_ceil(lanes_per_word(lane_width(bound)));
    let (nnz, shift, max) = stats(values);
    let gap = varint_len((values.len() / nnz.max(1)) as u64);
    let varints =
        2 + varint_len(nnz as u64) + nnz * (gap + varint_len(zigzag(-((max >> shift) as i64))));
    let w = lane_width(max >> shift);
    let bitmap =
        3 + varint_len(nnz as u64) + values.len().div_ceil(8) + 8 * nnz.div_ceil(lanes_per_word(w));
    [plain, packed, varints, bitmap]
}

/// Encodes `values`, every one of which (and every sum of them across workers) lies in
/// [-bound, bound], with `codec` (`Auto`: the smallest).
pub fn encode(values: &[i64], bound: u64, codec: CommCodec) -> Vec<u8> {
    let tag = match codec {
        CommCodec::None => PLAIN,
        CommCodec::Packed => PACKED,
        CommCodec::Sparse => {
            let s = sizes(values, bound);
            if s[2] < s[3] {
                SPARSE
            } else {
                BITMAP
            }
        }
        CommCodec::Auto => {
            let s = sizes(values, bound);
            [PLAIN, PACKED, SPARSE, BITMAP][(0..4).min_by_key(|&i| (s[i], i)).unwrap()]
        }
    };
    let mut out = vec![tag];
    match tag {
        PLAIN => {
            out.reserve(8 * values.len());
            for v in values {
                out.extend(v.to_le_bytes());
            }
        }
        BITMAP => {
            // zero bins as one bit each, the rest packed at the width their largest needs
            let (nnz, shift, max) = stats(values);
            let w = lane_width(max >> shift);
            put_varint(&mut out, nnz as u64);
            out.push(shift as u8);
            out.push(w as u8);
            let mut bits = vec![0u8; values.len().div_ceil(8)];
            let mut kept = Vec::with_capacity(nnz);
            for (i, &v) in values.iter().enumerate() {
                if v != 0 {
                    bits[i / 8] |= 1 << (i % 8);
                    kept.push(v >> shift);
                }
            }
            out.extend_from_slice(&bits);
            out.reserve(8 * nnz.div_ceil(lanes_per_word(w)));
            for word in pack(&kept, w) {
                out.extend(word.to_le_bytes());
            }
        }
        PACKED => {
            let w = lane_width(bound);
            out.push(w as u8);
            for word in pack(values, w) {
                out.extend(word.to_le_bytes());
            }
        }
        _ => {
            let (nnz, shift, _) = stats(values);
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
        }
    }
    out
}

/// Decodes a block of `len` values; malformed input is an error.
pub fn decode(bytes: &[u8], len: usize) -> Result<Vec<i64>> {
    let mut out = vec![0i64; len];
    decode_into(bytes, &mut out, false)?;
    Ok(out)
}

/// Decodes a block into `dst`, adding to it when `add` (a reduction step) or overwriting.
pub fn decode_into(bytes: &[u8], dst: &mut [i64], add: bool) -> Result<()> {
    let len = dst.len();
    let mut r = Reader { b: bytes, pos: 0 };
    let tag = r.byte()?;
    let rest = &bytes[1..];
    let put = |d: &mut i64, v: i64| {
        if add {
            *d += v
        } else {
            *d = v
        }
    };
    match tag {
        PLAIN => {
            if rest.len() != 8 * len {
                return Err(truncated());
            }
            for (d, c) in dst.iter_mut().zip(rest.chunks_exact(8)) {
                put(d, i64::from_le_bytes(c.try_into().unwrap()));
            }
            Ok(())
        }
        PACKED => {
            let w = r.byte()? as u32;
            if !(1..=64).contains(&w) {
                return Err(Error::Collective(format!("bad lane width {w}")));
            }
            let words = &bytes[2..];
            if words.len() != 8 * len.div_ceil(lanes_per_word(w)) {
                return Err(truncated());
            }
            let words: Vec<i64> = words
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            for (d, v) in dst.iter_mut().zip(unpack(&words, w, len)) {
                put(d, v);
            }
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
            if !add {
                dst.fill(0);
            }
            let mut i = 0usize;
            for _ in 0..nnz {
                i = i
                    .checked_add(r.varint()? as usize)
                    .filter(|&i| i < len)
                    .ok_or_else(|| Error::Collective("sparse index out of range".into()))?;
                dst[i] += unzigzag(r.varint()?) << shift;
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
            if nnz > len || shift > 62 || !(1..=64).contains(&w) {
                return Err(Error::Collective(
                    "malformed bitmap histogram message".into(),
                ));
            }
            let bits_len = len.div_ceil(8);
            let rest = &bytes[r.pos..];
            let n_words = nnz.div_ceil(lanes_per_word(w));
            if rest.len() != bits_len + 8 * n_words {
                return Err(truncated());
            }
            let (bits, words) = rest.split_at(bits_len);
            let words: Vec<i64> = words
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let kept = unpack(&words, w, nnz);
            if !add {
                dst.fill(0);
            }
            let disagree =
                || Error::Collective("bitmap and values disagree in a histogram message".into());
            let mut k = 0usize;
            for (byte_i, &b) in bits.iter().enumerate() {
                let mut b = b;
                while b != 0 {
                    let i = byte_i * 8 + b.trailing_zeros() as usize;
                    b &= b - 1;
                    if i >= len || k >= nnz {
                        return Err(disagree());
                    }
                    dst[i] += kept[k] << shift;
                    k += 1;
                }
            }
            if k != nnz {
                return Err(disagree());
            }
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
        (0u32..63).prop_flat_map(|bits| {
            let bound = if bits == 0 { 0 } else { (1u64 << bits) - 1 };
            let b = bound as i64;
            (
                Just(bound),
                proptest::collection::vec(prop_oneof![3 => Just(0i64), 7 => -b..=b], 0..300),
            )
        })
    }

    proptest! {
        #[test]
        fn every_codec_round_trips((bound, values) in bounded_block()) {
            let len = values.len();
            for codec in [CommCodec::None, CommCodec::Packed, CommCodec::Sparse, CommCodec::Auto] {
                let bytes = encode(&values, bound, codec);
                prop_assert_eq!(decode(&bytes, len).unwrap(), values.clone(), "{:?}", codec);
            }
            // auto picks by estimate: never worse than plain, and the estimate bounds sparse
            let s = sizes(&values, bound);
            prop_assert!(encode(&values, bound, CommCodec::Auto).len() <= s[0]);
            prop_assert!(encode(&values, bound, CommCodec::Sparse).len() <= s[2].max(s[3]));
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
        let v = vec![1i64, 0, -5, 0, 0, 7];
        for codec in [CommCodec::None, CommCodec::Packed, CommCodec::Sparse] {
            let b = encode(&v, 8, codec);
            for cut in 0..b.len() {
                assert!(
                    decode(&b[..cut], v.len()).is_err(),
                    "{codec:?} prefix {cut}"
                );
            }
        }
        assert!(decode(&[9, 0, 0], 1).is_err());
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
