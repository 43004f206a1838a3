//! The group encoding in 512-bit lanes (AVX-512 VBMI): a group's 32 values are four
//! registers from load to store, and its bits are placed by byte permutes instead of one
//! shift and OR per value.
//!
//! A group's scan is four compares (its bitmap and nonzero count) and two OR reductions
//! (its shift and width); a sparse group's values are compressed to the front of their
//! registers, and expanded back into their bins on decode.
//!
//! Eight values of width `w` take exactly `w` bytes, so a group's four batches of eight start
//! at bytes 0, w, 2w and 3w, and value j of a batch always starts at bit j·w of its batch.
//! Shifted left by (j·w) mod 8 in its 64-bit lane, value j is the lane's low bytes, to be
//! placed from byte ⌊j·w / 8⌋ on. For 7 ≤ w ≤ 56 a shifted value fits its lane and two
//! values of the same parity never share a byte, so one byte permute places the even values
//! and one the odd ones, and an OR joins the byte they may share. Unpacking reads each
//! value's eight bytes with one permute and shifts them back. Below 7 bits a batch is one
//! 64-bit word: the values are shifted to their bits and ORed, and read back from the word
//! broadcast to every lane. Groups wider than 56 bits are packed and unpacked by the scalar
//! routines; every width writes and reads the same bytes.

use std::arch::x86_64::*;

use sapwood_core::Result;

use super::groups::{
    decode_groups, encode_groups, scalar_pack, scalar_place, sparse_pays, Head, GROUP, MAX_DATA,
    SPARSE_GROUP,
};

/// Narrowest width the lanes pack.
pub(super) const MIN_WIDTH: usize = 1;
/// Narrowest width placed by byte permutes: from 7 bits on, the next value of a parity
/// starts at least 8 bits past one's last bit, so in a later byte. Narrower batches are one
/// 64-bit word (eight values of at most 6 bits), shifted into place whole.
const PERMUTED: usize = 7;
/// Widest width the lanes handle: a value shifted by up to 7 bits still fits 64.
pub(super) const MAX_WIDTH: usize = 56;

/// The permutes and shifts of one width.
#[derive(Clone, Copy)]
struct Perm {
    /// byte 8j + t of a batch's lanes: byte ⌊j·w / 8⌋ + t of the batch (unpacking)
    load: [u8; 64],
    /// byte i of a batch: the lane byte of the even value it holds
    even: [u8; 64],
    /// the bytes of a batch an even value holds
    even_keep: u64,
    /// as `even`, for the odd values
    odd: [u8; 64],
    /// as `even_keep`, for the odd values
    odd_keep: u64,
    /// (j·w) mod 8 for each value j of a batch; j·w for a narrow one
    shifts: [u64; 8],
    /// whether the batch is one word (w < [`PERMUTED`]) rather than permuted bytes
    narrow: bool,
}

const NO_PERM: Perm = Perm {
    load: [0; 64],
    even: [0; 64],
    even_keep: 0,
    odd: [0; 64],
    odd_keep: 0,
    shifts: [0; 8],
    narrow: false,
};

const fn perm(w: usize) -> Perm {
    let mut p = NO_PERM;
    if w < PERMUTED {
        p.narrow = true;
        let mut j = 0;
        while j < 8 {
            p.shifts[j] = (j * w) as u64;
            j += 1;
        }
        return p;
    }
    let mut j = 0;
    while j < 8 {
        let (first, at) = (j * w / 8, j * w % 8);
        p.shifts[j] = at as u64;
        let mut t = 0;
        while t < 8 {
            p.load[8 * j + t] = (first + t) as u8;
            t += 1;
        }
        // the bytes value j's bits reach, shifted by `at`
        let used = (at + w).div_ceil(8);
        let mut t = 0;
        while t < used {
            let byte = first + t;
            if j % 2 == 0 {
                p.even[byte] = (8 * j + t) as u8;
                p.even_keep |= 1 << byte;
            } else {
                p.odd[byte] = (8 * j + t) as u8;
                p.odd_keep |= 1 << byte;
            }
            t += 1;
        }
        j += 1;
    }
    p
}

/// The permutes of every width the lanes handle (no others are ever looked up).
static PERMS: [Perm; MAX_WIDTH + 1] = {
    let mut t = [NO_PERM; MAX_WIDTH + 1];
    let mut w = MIN_WIDTH;
    while w <= MAX_WIDTH {
        t[w] = perm(w);
        w += 1;
    }
    t
};

/// Whether this CPU runs the lanes.
pub(super) fn available() -> bool {
    sapwood_core::simd::avx512_allowed()
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("lzcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
}

/// Appends the group encoding of `values` to `out`; returns how many values are nonzero:
/// the bytes of the scalar `groups::encode_inlined`.
///
/// # Safety
/// The CPU must have the lanes' features ([`available`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt,lzcnt,bmi1")]
#[allow(unsafe_code)]
pub(super) unsafe fn encode(values: &[i64], out: &mut Vec<u8>) -> usize {
    encode_groups(values, out, |group, len, out| {
        // SAFETY: the CPU has the lanes' features (this function's), and `encode_groups`
        // reserved each group's worst case
        unsafe { encode_group(group, len, out) }
    })
}

/// Encodes a group whose first `len` values are the block's (the rest are zero padding);
/// returns how many are nonzero.
///
/// # Safety
/// The lanes' features, and room in `out` for the group's worst case, 6 + 256 bytes (it
/// writes at most 6 + 3 · 56 + 64).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt,lzcnt,bmi1")]
#[allow(unsafe_code)]
unsafe fn encode_group(group: &[i64; GROUP], len: usize, out: &mut Vec<u8>) -> usize {
    // SAFETY: loads read the group's 32 values, or the 40 of `kept`; stores write `kept`,
    // or `out` from its length on: the header (at most 6 bytes), then a batch of 64 bytes
    // at k·w (k < 4, w <= 56) past it, within the room the caller reserved
    unsafe {
        let src = group.as_ptr();
        let (mut v, mut nz) = ([_mm512_setzero_si512(); 4], [0u8; 4]);
        for k in 0..4 {
            v[k] = _mm512_loadu_si512(src.add(8 * k).cast());
            nz[k] = _mm512_test_epi64_mask(v[k], v[k]);
        }
        let mask = u32::from_le_bytes(nz);
        let at = out.len();
        let base = out.as_mut_ptr().add(at);
        if mask == 0 {
            base.write(0);
            out.set_len(at + 1);
            return 0;
        }
        // zigzag: (v << 1) ^ (v >> 63); with the low `shift` bits of v zero,
        // zigzag(v) >> shift == zigzag(v >> shift)
        let mut z = [_mm512_setzero_si512(); 4];
        for k in 0..4 {
            z[k] = _mm512_xor_si512(_mm512_slli_epi64::<1>(v[k]), _mm512_srai_epi64::<63>(v[k]));
        }
        let (or, or_zigzag) = or_both(v, z);
        let shift = or.trailing_zeros();
        let w = 64 - (or_zigzag >> shift).leading_zeros() as usize;
        let by = _mm_cvtsi32_si128(shift as i32);
        for x in &mut z {
            *x = _mm512_srl_epi64(*x, by);
        }
        let k = mask.count_ones() as usize;
        let (head, count) = if sparse_pays(k, w, len) {
            // each batch's nonzero values to the front of its register, stored one after
            // the other, and read back as batches of eight
            let mut kept = [0u64; GROUP + 8];
            let mut off = 0;
            for j in 0..4 {
                let packed = _mm512_maskz_compress_epi64(nz[j], z[j]);
                _mm512_storeu_si512(kept.as_mut_ptr().add(off).cast(), packed);
                off += nz[j].count_ones() as usize;
            }
            for (j, x) in z.iter_mut().enumerate() {
                // (four loads always: a constant index keeps the batches in registers)
                *x = _mm512_loadu_si512(kept.as_ptr().add(8 * j).cast());
            }
            let [m0, m1, m2, m3] = mask.to_le_bytes();
            let header = [w as u8 | SPARSE_GROUP, shift as u8, m0, m1, m2, m3];
            std::ptr::copy_nonoverlapping(header.as_ptr(), base, header.len());
            (header.len(), k)
        } else {
            base.write(w as u8);
            base.add(1).write(shift as u8);
            (2, len)
        };
        if (MIN_WIDTH..=MAX_WIDTH).contains(&w) {
            let p = Placing::of(w);
            // whole registers, so that the batches stay in registers
            p.put(z[0], base.add(head));
            if count > 8 {
                p.put(z[1], base.add(head + w));
            }
            if count > 16 {
                p.put(z[2], base.add(head + 2 * w));
            }
            if count > 24 {
                p.put(z[3], base.add(head + 3 * w));
            }
        } else {
            let mut values = [0u64; GROUP];
            for (j, &x) in z.iter().enumerate() {
                _mm512_storeu_si512(values.as_mut_ptr().add(8 * j).cast(), x);
            }
            out.set_len(at + head);
            scalar_pack(w, &values, out);
        }
        out.set_len(at + head + (count * w).div_ceil(8));
        k
    }
}

/// The OR of every lane of four registers `a`, and of four registers `b`: one reduction
/// tree for both, each step halving both at once.
///
/// # Safety
/// AVX-512 F (it is inlined into functions that have it).
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn or_both(a: [__m512i; 4], b: [__m512i; 4]) -> (u64, u64) {
    // SAFETY: register operations only
    unsafe {
        let a = _mm512_or_si512(_mm512_or_si512(a[0], a[1]), _mm512_or_si512(a[2], a[3]));
        let b = _mm512_or_si512(_mm512_or_si512(b[0], b[1]), _mm512_or_si512(b[2], b[3]));
        // 128-bit quarters: (a0 | a2, a1 | a3, b0 | b2, b1 | b3)
        let x = _mm512_or_si512(
            _mm512_shuffle_i64x2::<0b01_00_01_00>(a, b),
            _mm512_shuffle_i64x2::<0b11_10_11_10>(a, b),
        );
        // (a's quarter, -, b's quarter, -)
        let x = _mm512_or_si512(x, _mm512_shuffle_i64x2::<0b10_11_00_01>(x, x));
        // each quarter's two lanes
        let x = _mm512_or_si512(x, _mm512_shuffle_epi32::<0b01_00_11_10>(x));
        let lo = _mm512_castsi512_si128(x);
        let hi = _mm512_extracti32x4_epi32::<2>(x);
        (_mm_cvtsi128_si64(lo) as u64, _mm_cvtsi128_si64(hi) as u64)
    }
}

/// The permutes of one width in registers, to place a group's batches with.
#[derive(Clone, Copy)]
struct Placing {
    narrow: bool,
    shifts: __m512i,
    even: __m512i,
    even_keep: u64,
    odd: __m512i,
    odd_keep: u64,
}

impl Placing {
    /// The permutes of width `w` (in `MIN_WIDTH..=MAX_WIDTH`).
    ///
    /// # Safety
    /// AVX-512 F (it is inlined into functions that have it).
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn of(w: usize) -> Placing {
        let p = &PERMS[w];
        // SAFETY: loads of 64-byte arrays
        unsafe {
            Placing {
                narrow: p.narrow,
                shifts: _mm512_loadu_si512(p.shifts.as_ptr().cast()),
                even: _mm512_loadu_si512(p.even.as_ptr().cast()),
                even_keep: p.even_keep,
                odd: _mm512_loadu_si512(p.odd.as_ptr().cast()),
                odd_keep: p.odd_keep,
            }
        }
    }

    /// Stores eight values below 2^w (one register) packed at width `w` as the first w of
    /// 64 bytes written at `to` (the rest are the next batch's to overwrite, or past the
    /// data).
    ///
    /// # Safety
    /// The lanes' features (it is inlined into functions that have them); `to` writable for
    /// 64 bytes.
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn put(self, v: __m512i, to: *mut u8) {
        // SAFETY: the caller's
        unsafe {
            let v = _mm512_sllv_epi64(v, self.shifts);
            if self.narrow {
                // the values' bits are apart: their OR is the batch's word
                let word = _mm512_reduce_or_epi64(v) as u64;
                return to.cast::<u64>().write_unaligned(word.to_le());
            }
            let placed = _mm512_or_si512(
                _mm512_maskz_permutexvar_epi8(self.even_keep, self.even, v),
                _mm512_maskz_permutexvar_epi8(self.odd_keep, self.odd, v),
            );
            _mm512_storeu_si512(to.cast(), placed);
        }
    }
}

/// Eight values packed at width `w` from `from` (which is readable for 64 bytes), unzigzagged
/// and shifted left by `by`.
///
/// # Safety
/// The lanes' features; `from` readable for 64 bytes; `p` the permutes of `w`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[allow(unsafe_code)]
unsafe fn take_batch(p: &Perm, w: usize, from: *const u8, by: __m128i) -> __m512i {
    let shifts = _mm512_loadu_si512(p.shifts.as_ptr().cast());
    let mask = _mm512_set1_epi64(((1u64 << w) - 1) as i64);
    // SAFETY: the caller's
    let lanes = if p.narrow {
        // the batch's word in every lane, each shifted to its own value
        _mm512_set1_epi64(u64::from_le(unsafe { from.cast::<u64>().read_unaligned() }) as i64)
    } else {
        let load = _mm512_loadu_si512(p.load.as_ptr().cast());
        _mm512_permutexvar_epi8(load, unsafe { _mm512_loadu_si512(from.cast()) })
    };
    let u = _mm512_and_si512(_mm512_srlv_epi64(lanes, shifts), mask);
    // unzigzag: (u >> 1) ^ -(u & 1)
    let v = _mm512_xor_si512(
        _mm512_srli_epi64::<1>(u),
        _mm512_sub_epi64(
            _mm512_setzero_si512(),
            _mm512_and_si512(u, _mm512_set1_epi64(1)),
        ),
    );
    _mm512_sll_epi64(v, by)
}

/// Decodes the groups in `data` (everything after the tag) into `dst`, adding when `ADD`:
/// the scalar `groups::decode_scalar`, with the same checks and errors.
///
/// # Safety
/// The CPU must have the lanes' features ([`available`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt,lzcnt,bmi1")]
#[allow(unsafe_code)]
pub(super) unsafe fn decode<const ADD: bool>(data: &[u8], dst: &mut [i64]) -> Result<()> {
    decode_groups::<ADD>(data, dst, |head, src, group| {
        // SAFETY: the CPU has the lanes' features (this function's)
        unsafe { place::<ADD>(head, src, group) }
    })
}

/// Puts a group's values into its bins (adding when `ADD`), `head.w` bits each at the start
/// of `src`.
///
/// # Safety
/// The lanes' features.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,popcnt,lzcnt,bmi1")]
#[allow(unsafe_code)]
unsafe fn place<const ADD: bool>(head: &Head, src: &[u8; MAX_DATA], group: &mut [i64]) {
    let w = head.w;
    if !(MIN_WIDTH..=MAX_WIDTH).contains(&w) {
        return scalar_place::<ADD>(head, src, group);
    }
    let p = &PERMS[w];
    let by = _mm_cvtsi32_si128(head.shift as i32);
    // SAFETY: loads read 64 bytes of `src` at k·w <= 3 · MAX_WIDTH (at most 232 of its 256
    // bytes), 64 bytes of `kept` from an offset of at most 32 of its 40 values, or the
    // group's bins; stores write the group's bins (masked to its length) or `kept`
    unsafe {
        if head.count == GROUP {
            // (only a whole group has 32 values)
            for k in 0..GROUP / 8 {
                let v = take_batch(p, w, src.as_ptr().add(k * w), by);
                let at = group.as_mut_ptr().add(8 * k);
                let v = if ADD {
                    _mm512_add_epi64(_mm512_loadu_si512(at.cast()), v)
                } else {
                    v
                };
                _mm512_storeu_si512(at.cast(), v);
            }
            return;
        }
        // a sparse group, or a short last one: its values one after the other, then each
        // batch's expanded into the bins its bitmap marks
        let mut kept = [0i64; GROUP + 8];
        for k in 0..head.count.div_ceil(8) {
            let v = take_batch(p, w, src.as_ptr().add(k * w), by);
            _mm512_storeu_si512(kept.as_mut_ptr().add(8 * k).cast(), v);
        }
        let (len, mut off) = (group.len(), 0);
        for k in 0..len.div_ceil(8) {
            let m = (head.mask >> (8 * k)) as u8;
            let lanes = u8::MAX >> (8 * (k + 1)).saturating_sub(len);
            let v = _mm512_maskz_expand_epi64(m, _mm512_loadu_si512(kept.as_ptr().add(off).cast()));
            let at = group.as_mut_ptr().add(8 * k);
            let v = if ADD {
                _mm512_add_epi64(_mm512_maskz_loadu_epi64(lanes, at), v)
            } else {
                v
            };
            _mm512_mask_storeu_epi64(at, lanes, v);
            off += m.count_ones() as usize;
        }
    }
}

/// Appends 32 values below 2^w packed at width `w` by [`Placing::put`] (4w bytes): the width
/// test's view of the batches.
#[cfg(test)]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[allow(unsafe_code)]
unsafe fn pack(w: usize, u: &[u64; GROUP], out: &mut Vec<u8>) {
    assert!((MIN_WIDTH..=MAX_WIDTH).contains(&w));
    out.reserve(3 * MAX_WIDTH + 64);
    let at = out.len();
    // SAFETY: loads read eight values of `u`; stores write 64 bytes from at + k·w, k < 4,
    // within the room reserved above
    unsafe {
        for k in 0..GROUP / 8 {
            let v = _mm512_loadu_si512(u.as_ptr().add(8 * k).cast());
            Placing::of(w).put(v, out.as_mut_ptr().add(at + k * w));
        }
        out.set_len(at + 4 * w);
    }
}

/// Reads 32 values at width `w` from the start of `src` by [`take_batch`] into `dst`
/// (adding when `ADD`): the width test's view of the batches.
#[cfg(test)]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[allow(unsafe_code)]
unsafe fn unpack<const ADD: bool>(
    w: usize,
    src: &[u8; MAX_DATA],
    shift: u32,
    dst: &mut [i64; GROUP],
) {
    assert!((MIN_WIDTH..=MAX_WIDTH).contains(&w));
    let by = _mm_cvtsi32_si128(shift as i32);
    // SAFETY: loads read 64 bytes of `src` at k·w <= 3 · MAX_WIDTH, or eight values of
    // `dst`; stores write eight values of `dst`
    unsafe {
        for k in 0..GROUP / 8 {
            let v = take_batch(&PERMS[w], w, src.as_ptr().add(k * w), by);
            let at = dst.as_mut_ptr().add(8 * k);
            let v = if ADD {
                _mm512_add_epi64(_mm512_loadu_si512(at.cast()), v)
            } else {
                v
            };
            _mm512_storeu_si512(at.cast(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::groups::{decode_scalar, encode_inlined, scalar_pack, scalar_unpack};
    use super::*;

    /// splitmix64: numbers with every bit pattern, the same each run.
    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let z = (*state ^ (*state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Whether the lanes can run here; a test that needs them returns early where they
    /// cannot, unless `SAPWOOD_REQUIRE_AVX512` says they must.
    fn lanes_here() -> bool {
        if !available() {
            assert!(
                std::env::var_os("SAPWOOD_REQUIRE_AVX512").is_none(),
                "SAPWOOD_REQUIRE_AVX512 is set but this CPU lacks AVX-512 VBMI"
            );
            eprintln!("skipped: no AVX-512 VBMI");
        }
        available()
    }

    /// Both decoders on one message, put and added onto `start`: the same result (or the
    /// same error).
    fn decoders_agree(msg: &[u8], start: &[i64]) -> Option<Vec<i64>> {
        let mut out = None;
        for add in [false, true] {
            let (mut a, mut b) = (start.to_vec(), start.to_vec());
            // SAFETY: the caller checked that the CPU has the lanes
            #[allow(unsafe_code)]
            let lanes = unsafe {
                if add {
                    decode::<true>(msg, &mut a)
                } else {
                    decode::<false>(msg, &mut a)
                }
            };
            let scalar = if add {
                decode_scalar::<true>(msg, &mut b)
            } else {
                decode_scalar::<false>(msg, &mut b)
            };
            match (lanes, scalar) {
                (Ok(()), Ok(())) => assert_eq!(a, b, "add {add}"),
                (Err(x), Err(y)) => assert_eq!(x.to_string(), y.to_string()),
                (x, y) => panic!("lanes {x:?}, scalar {y:?}"),
            }
            if !add {
                out = Some(a);
            }
        }
        out
    }

    #[test]
    fn lanes_encode_and_decode_every_kind_of_group_as_the_scalar_body() {
        if !lanes_here() {
            return;
        }
        let mut state = 1u64;
        // every width, with every count of nonzero values that changes which batches are
        // stored (dense and sparse groups alike), in whole groups and a short last one
        for bits in 0..62u32 {
            for k in [0, 1, 3, 8, 9, 16, 17, 24, 25, 31, 32] {
                for len in [96, 101] {
                    let shift = if bits < 56 {
                        [0, 1, 5][bits as usize % 3]
                    } else {
                        0
                    };
                    let values: Vec<i64> = (0..len)
                        .map(|i| {
                            // k bins of every 32 (7 is coprime to 32), at different places
                            // in each group
                            if ((i % 32) * 7 + i / 32) % 32 >= k {
                                return 0;
                            }
                            let v = (splitmix(&mut state) as i64) >> (63 - bits);
                            (if v == 0 { 1 } else { v }) << shift
                        })
                        .collect();
                    let (mut lanes, mut scalar) = (Vec::new(), Vec::new());
                    // SAFETY: the CPU has the lanes (checked above)
                    #[allow(unsafe_code)]
                    let nnz = unsafe { encode(&values, &mut lanes) };
                    assert_eq!(nnz, encode_inlined(&values, &mut scalar));
                    assert_eq!(lanes, scalar, "{bits} bits, {k} a group, {len} values");
                    let start: Vec<i64> = (0..len).map(|_| splitmix(&mut state) as i64).collect();
                    let back = decoders_agree(&lanes, &start).expect("a valid message");
                    assert_eq!(back, values, "{bits} bits, {k} a group, {len} values");
                }
            }
        }
    }

    #[test]
    fn lanes_decode_any_message_as_the_scalar_decoder() {
        if !lanes_here() {
            return;
        }
        let mut state = 7u64;
        // headers the encoder never writes too (a sparse group marking every bin or none,
        // sparse groups of every width, any shift), random value bits, and cut messages
        for case in 0..3000 {
            let len = 1 + splitmix(&mut state) as usize % 200;
            let mut msg = Vec::new();
            for start in (0..len).step_by(GROUP) {
                let n = GROUP.min(len - start);
                let r = splitmix(&mut state);
                if r.is_multiple_of(5) {
                    msg.push(0);
                    continue;
                }
                let (w, shift) = (1 + (r >> 8) % 64, (r >> 16) % 64);
                let count = if r % 5 <= 2 {
                    let mask = match (r >> 24) % 4 {
                        0 => 0,
                        1 => u32::MAX,
                        _ => (r >> 32) as u32,
                    } & (u32::MAX >> (GROUP - n));
                    msg.extend_from_slice(&[w as u8 | SPARSE_GROUP, shift as u8]);
                    msg.extend_from_slice(&mask.to_le_bytes());
                    mask.count_ones() as usize
                } else {
                    msg.extend_from_slice(&[w as u8, shift as u8]);
                    n
                };
                msg.extend(
                    (0..(count * w as usize).div_ceil(8)).map(|_| splitmix(&mut state) as u8),
                );
            }
            if case % 4 == 3 {
                let cut = splitmix(&mut state) as usize % (msg.len() + 1);
                msg.truncate(cut);
            }
            let start: Vec<i64> = (0..len).map(|_| splitmix(&mut state) as i64).collect();
            decoders_agree(&msg, &start);
        }
    }

    #[test]
    fn lanes_pack_and_unpack_as_the_scalar_routines_at_every_width() {
        if !lanes_here() {
            return;
        }
        let mut state = 0u64;
        let mut next = || splitmix(&mut state);
        for w in MIN_WIDTH..=MAX_WIDTH {
            for case in 0..50 {
                let mut u = [0u64; GROUP];
                for (j, x) in u.iter_mut().enumerate() {
                    // full-width values, the largest, zeros and sparse groups
                    *x = match (case + j) % 4 {
                        0 => (1u64 << w) - 1,
                        1 if case % 3 == 0 => 0,
                        _ => next() >> (64 - w),
                    };
                }
                let (mut lanes, mut scalar) = (vec![1u8, 2], vec![1u8, 2]);
                // SAFETY: the CPU has the lanes' features (checked above)
                #[allow(unsafe_code)]
                unsafe {
                    pack(w, &u, &mut lanes)
                };
                scalar_pack(w, &u, &mut scalar);
                assert_eq!(lanes, scalar, "width {w}");
                let mut src = [0u8; MAX_DATA];
                src[..4 * w].copy_from_slice(&lanes[2..]);
                // bytes past the group's are another group's: never part of a value
                for b in &mut src[4 * w..] {
                    *b = next() as u8;
                }
                for shift in [0, 3, 63 - w as u32] {
                    let start: [i64; GROUP] = std::array::from_fn(|_| next() as i64);
                    for add in [false, true] {
                        let (mut a, mut b) = (start, start);
                        // SAFETY: as above
                        #[allow(unsafe_code)]
                        unsafe {
                            if add {
                                unpack::<true>(w, &src, shift, &mut a)
                            } else {
                                unpack::<false>(w, &src, shift, &mut a)
                            }
                        };
                        scalar_unpack(w, &src, shift, &mut b, add);
                        assert_eq!(a, b, "width {w}, shift {shift}, add {add}");
                    }
                }
            }
        }
    }
}
