//! The group encoding's bit packing in 512-bit lanes (AVX-512 VBMI): eight values a step,
//! placed by byte permutes instead of one shift and OR per value.
//!
//! Eight values of width `w` take exactly `w` bytes, so a group's four batches of eight start
//! at bytes 0, w, 2w and 3w, and value j of a batch always starts at bit j·w of its batch.
//! Shifted left by (j·w) mod 8 in its 64-bit lane, value j is the lane's low bytes, to be
//! placed from byte ⌊j·w / 8⌋ on. For 7 ≤ w ≤ 56 a shifted value fits its lane and two
//! values of the same parity never share a byte, so one byte permute places the even values
//! and one the odd ones, and an OR joins the byte they may share. Unpacking reads each
//! value's eight bytes with one permute and shifts them back. Other widths keep the scalar
//! routines; every width writes and reads the same bytes.

use std::arch::x86_64::*;

use super::groups::{GROUP, MAX_DATA};

/// Narrowest width the lanes pack: from 7 bits on, the next value of a parity starts at
/// least 8 bits past one's last bit, so in a later byte.
pub(super) const MIN_WIDTH: usize = 7;
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
    /// (j·w) mod 8 for each value j of a batch
    shifts: [u64; 8],
}

const NO_PERM: Perm = Perm {
    load: [0; 64],
    even: [0; 64],
    even_keep: 0,
    odd: [0; 64],
    odd_keep: 0,
    shifts: [0; 8],
};

const fn perm(w: usize) -> Perm {
    let mut p = NO_PERM;
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
const PERMS: [Perm; MAX_WIDTH + 1] = {
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
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
}

/// Appends 32 values below 2^w, packed at width `w`, as 4w bytes.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VBMI ([`available`]).
///
/// # Panics
/// Unless `MIN_WIDTH <= w <= MAX_WIDTH`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[allow(unsafe_code)]
pub(super) unsafe fn pack(w: usize, u: &[u64; GROUP], out: &mut Vec<u8>) {
    assert!(
        (MIN_WIDTH..=MAX_WIDTH).contains(&w),
        "a width the lanes pack"
    );
    let p = &PERMS[w];
    // each batch is stored whole, straight into the vector's spare room: the bytes past
    // its w are the next batch's to overwrite, and those past the group's 4w are never
    // counted (a copy through a buffer cost a library call a group)
    out.reserve(3 * MAX_WIDTH + 64);
    let at = out.len();
    // SAFETY: every load reads 64 bytes of a 64-byte array or of `u` (eight values from 8k,
    // k < 4); every store writes 64 bytes from at + k·w, k < 4, within the room reserved
    // above; the 4w bytes counted by `set_len` have all been written
    unsafe {
        let base = out.as_mut_ptr().add(at);
        let shifts = _mm512_loadu_si512(p.shifts.as_ptr().cast());
        let even = _mm512_loadu_si512(p.even.as_ptr().cast());
        let odd = _mm512_loadu_si512(p.odd.as_ptr().cast());
        for k in 0..GROUP / 8 {
            let v = _mm512_sllv_epi64(_mm512_loadu_si512(u.as_ptr().add(8 * k).cast()), shifts);
            let placed = _mm512_or_si512(
                _mm512_maskz_permutexvar_epi8(p.even_keep, even, v),
                _mm512_maskz_permutexvar_epi8(p.odd_keep, odd, v),
            );
            _mm512_storeu_si512(base.add(k * w).cast(), placed);
        }
        out.set_len(at + 4 * w);
    }
}

/// Reads 32 values at width `w` from the start of `src`, unzigzags and shifts them into
/// `dst` (adding, wrapping, when `ADD`): what the scalar `unpack` does.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VBMI ([`available`]).
///
/// # Panics
/// Unless `MIN_WIDTH <= w <= MAX_WIDTH`.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
#[allow(unsafe_code)]
pub(super) unsafe fn unpack<const ADD: bool>(
    w: usize,
    src: &[u8; MAX_DATA],
    shift: u32,
    dst: &mut [i64; GROUP],
) {
    assert!(
        (MIN_WIDTH..=MAX_WIDTH).contains(&w),
        "a width the lanes unpack"
    );
    let p = &PERMS[w];
    // SAFETY: every load reads 64 bytes of a 64-byte array, of `src` at k·w <= 3 · MAX_WIDTH
    // (so at most 232 of its 256 bytes), or of `dst` (eight values from 8k, k < 4), and
    // every store writes eight values of `dst`
    unsafe {
        let shifts = _mm512_loadu_si512(p.shifts.as_ptr().cast());
        let load = _mm512_loadu_si512(p.load.as_ptr().cast());
        let mask = _mm512_set1_epi64(((1u64 << w) - 1) as i64);
        let one = _mm512_set1_epi64(1);
        let by = _mm_cvtsi32_si128(shift as i32);
        for k in 0..GROUP / 8 {
            let bytes = _mm512_loadu_si512(src.as_ptr().add(k * w).cast());
            let u = _mm512_and_si512(
                _mm512_srlv_epi64(_mm512_permutexvar_epi8(load, bytes), shifts),
                mask,
            );
            // unzigzag: (u >> 1) ^ -(u & 1)
            let v = _mm512_xor_si512(
                _mm512_srli_epi64::<1>(u),
                _mm512_sub_epi64(_mm512_setzero_si512(), _mm512_and_si512(u, one)),
            );
            let v = _mm512_sll_epi64(v, by);
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
    use super::super::groups::{scalar_pack, scalar_unpack};
    use super::*;

    #[test]
    fn lanes_pack_and_unpack_as_the_scalar_routines_at_every_width() {
        if !available() {
            assert!(
                std::env::var_os("SAPWOOD_REQUIRE_AVX512").is_none(),
                "SAPWOOD_REQUIRE_AVX512 is set but this CPU lacks AVX-512 VBMI"
            );
            eprintln!("skipped: no AVX-512 VBMI");
            return;
        }
        // splitmix64: values with every bit pattern, the same each run
        let mut state = 0u64;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let z = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
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
