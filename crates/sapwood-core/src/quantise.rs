//! Gradients to integers: fixed point with a globally agreed power-of-two scale.
//!
//! Power-of-two scales make every conversion exact (a product with 2^s is never rounded), so
//! the integer a backend produces does not depend on whether its hardware fuses operations.

use crate::detmath::pow2;
use crate::hash::HashKey;
use crate::params::Quantisation;

/// Bits reserved for a full reduction: |Σ over all rows| stays below 2^EXACT_SUM_BITS.
pub const EXACT_SUM_BITS: i32 = 61;

/// How one quantity (gradient or hessian) of one output group is quantised this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Exact fixed point: X = round_ties_even(v * 2^shift).
    pub shift: i32,
    /// Low-bit mode: histogram values are q = floor((X + noise) / 2^drop), noise < 2^drop.
    pub drop: Option<u32>,
    /// Bound on |value| added to a histogram per row (X, or q in low-bit mode).
    pub max_value: u64,
}

impl Scale {
    /// The scale for values with largest magnitude `max_abs` over `n_total` rows.
    pub fn agree(max_abs: f32, n_total: u64, quantisation: Quantisation) -> Self {
        let shift = exact_shift(max_abs, n_total);
        let max_exact = quantise_exact(max_abs, shift).unsigned_abs();
        match quantisation {
            Quantisation::Exact => Scale {
                shift,
                drop: None,
                max_value: max_exact,
            },
            Quantisation::Bits(bits) => {
                let qmax = (1u64 << (bits - 1)) - 1;
                let low = largest_shift_within(max_abs, qmax as f64);
                let drop = (shift - low).clamp(0, 62) as u32;
                Scale {
                    shift,
                    drop: Some(drop),
                    max_value: (max_exact >> drop) + 1,
                }
            }
        }
    }

    /// The factor turning a histogram sum into real units.
    pub fn hist_unit(&self) -> f64 {
        pow2(-(self.shift - self.drop.unwrap_or(0) as i32))
    }

    /// The factor turning an exact fixed-point sum into real units.
    pub fn exact_unit(&self) -> f64 {
        pow2(-self.shift)
    }

    /// The histogram value for one row: the exact integer, or its stochastic rounding.
    #[inline]
    pub fn hist_value(&self, exact: i64, key: HashKey, global_row: u64) -> i64 {
        match self.drop {
            None | Some(0) => exact,
            Some(_) => self.hist_value_drawn(exact, key.hash64(global_row)),
        }
    }

    /// [`Scale::hist_value`] with the row's `key.hash64(global_row)` already drawn (rows
    /// drawn a run at a time: [`HashKey::hash64_run`]).
    #[inline]
    pub fn hist_value_drawn(&self, exact: i64, hash: u64) -> i64 {
        match self.drop {
            None | Some(0) => exact,
            Some(d) => quantise_lowbit(exact, d, hash >> (64 - d)),
        }
    }
}

/// The gradient and hessian scales of one output group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupScales {
    /// Scale of gradients.
    pub grad: Scale,
    /// Scale of hessians.
    pub hess: Scale,
}

impl GroupScales {
    /// Bound on any reduced histogram entry: global rows × largest per-row value.
    pub fn hist_bound(&self, n_total: u64) -> u64 {
        n_total.saturating_mul(self.grad.max_value.max(self.hess.max_value))
    }
}

/// Largest s with max_abs * 2^s * n_total <= 2^61; 0 when max_abs is 0.
pub fn exact_shift(max_abs: f32, n_total: u64) -> i32 {
    let limit = pow2(EXACT_SUM_BITS) / n_total.max(1) as f64;
    largest_shift_within(max_abs, limit)
}

/// Largest s with max_abs * 2^s <= limit (clamped to a sane range); 0 when max_abs is 0.
fn largest_shift_within(max_abs: f32, limit: f64) -> i32 {
    let m = max_abs as f64;
    if m.is_nan() || m <= 0.0 || !m.is_finite() {
        return 0;
    }
    let ratio = limit / m;
    let mut s = ((ratio.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    s = s.clamp(-1000, 1000);
    while m * pow2(s) > limit {
        s -= 1;
    }
    while m * pow2(s + 1) <= limit && s < 1000 {
        s += 1;
    }
    s
}

/// round_ties_even(v * 2^shift) as i64: exact fixed point of an f32.
#[inline]
pub fn quantise_exact(v: f32, shift: i32) -> i64 {
    quantise_by(v, pow2(shift))
}

/// [`quantise_exact`] with the factor 2^shift at hand (`pow2(shift)`), for loops over rows.
#[inline(always)]
pub fn quantise_by(v: f32, factor: f64) -> i64 {
    crate::detmath::round_ties_even(v as f64 * factor) as i64
}

/// Largest |r| of a row in a node's sum of squares ([`square_shift`]): r² fits 30 bits.
pub const SQUARE_ROOT_BITS: u32 = 15;

/// The shift that gradients of `scale` are rounded with before they are squared and summed
/// over a node's rows ([`square_term`]): every row's |r| ≤ 2^15 and the sum over
/// `n_total` rows stays below 2^62, whatever rows a node holds. `None` where every
/// gradient is zero. The squares measure the noise within a node's categorical levels;
/// 15 bits keep that measure within 2^-14 of the exact one for the largest rows and
/// cost each row an integer product, the same on every backend.
pub fn square_shift(scale: &Scale, n_total: u64) -> Option<i32> {
    if scale.max_value == 0 {
        return None;
    }
    // |g · 2^shift| < 2^bits for every row (a low-bit value is the exact one >> drop, + 1)
    let bits =
        (u64::BITS - scale.max_value.leading_zeros()) as i32 + scale.drop.unwrap_or(0) as i32;
    // over 2^32 rows the squares lose two bits for every bit the count gains
    let count_bits = (u64::BITS - n_total.leading_zeros()) as i32;
    let spare = (count_bits - 32).max(0);
    Some(scale.shift - bits + SQUARE_ROOT_BITS as i32 - (spare + 1) / 2)
}

/// A row's term in its node's sum of squares: r² with r = round_ties_even(g · 2^shift)
/// (`factor` = 2^shift from [`square_shift`]).
#[inline]
pub fn square_term(g: f32, factor: f64) -> i64 {
    // a non-finite gradient (refused before training) must not overflow the product
    let bound = 1i64 << SQUARE_ROOT_BITS;
    let r = quantise_by(g, factor).clamp(-bound, bound);
    r * r
}

/// [`square_term`] of every row's gradient (the first of each pair) into `out`, eight rows
/// at a time in 512-bit lanes where the CPU has AVX-512 F.
pub fn square_terms_into(grad: &[[f32; 2]], factor: f64, out: &mut [u32]) {
    let n = grad.len().min(out.len());
    let (grad, out) = (&grad[..n], &mut out[..n]);
    #[cfg(target_arch = "x86_64")]
    if crate::simd::avx512_allowed() && std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has the feature `square_terms_avx512` is compiled for.
        #[allow(unsafe_code)]
        unsafe {
            square_terms_avx512(grad, factor, out)
        };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::simd::avx2() {
        // SAFETY: the CPU has AVX2 (checked by `simd::avx2`).
        #[allow(unsafe_code)]
        unsafe {
            square_terms_avx2(grad, factor, out)
        };
        return;
    }
    square_terms_scalar(grad, factor, out)
}

fn square_terms_scalar(grad: &[[f32; 2]], factor: f64, out: &mut [u32]) {
    for (o, &[g, _]) in out.iter_mut().zip(grad) {
        *o = square_term(g, factor) as u32;
    }
}

/// [`square_terms_scalar`] eight rows at a time. The product is the same IEEE operation;
/// clamping to ±2^15 before rounding to nearest-even gives what rounding then clamping
/// gives (the bounds are integers), infinities and products past the range land on the
/// bounds as Rust's saturating `as` then the clamp send them, NaN is zeroed as `as` zeroes
/// it, and the square of an integer below 2^15 is exact in f64.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(unsafe_code)]
unsafe fn square_terms_avx512(grad: &[[f32; 2]], factor: f64, out: &mut [u32]) {
    use std::arch::x86_64::*;
    let bound = (1u32 << SQUARE_ROOT_BITS) as f64;
    let (lo, hi) = (_mm512_set1_pd(-bound), _mm512_set1_pd(bound));
    let lanes = _mm512_set1_pd(factor);
    // the gradients, lanes 0, 2, .., 14 of a row pair's 16 floats
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    let whole = grad.len() / 8 * 8;
    let (grad, grest) = grad.split_at(whole);
    let (out, orest) = out.split_at_mut(whole);
    for (g, o) in grad.chunks_exact(8).zip(out.chunks_exact_mut(8)) {
        // SAFETY: `g` holds 8 pairs of f32 (64 bytes) and `o` 8 u32 (32 bytes); the loads
        // and stores are unaligned.
        unsafe {
            let pairs = _mm512_loadu_ps(g.as_ptr().cast());
            let v = _mm512_castps512_ps256(_mm512_permutexvar_ps(evens, pairs));
            let x = _mm512_mul_pd(_mm512_cvtps_pd(v), lanes);
            let ordered = _mm512_cmp_pd_mask::<_CMP_ORD_Q>(x, x);
            let x = _mm512_maskz_mov_pd(ordered, _mm512_min_pd(_mm512_max_pd(x, lo), hi));
            let r = _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
            let sq = _mm512_cvttpd_epu32(_mm512_mul_pd(r, r));
            _mm256_storeu_si256(o.as_mut_ptr().cast(), sq);
        }
    }
    square_terms_scalar(grest, factor, orest);
}

/// [`square_terms_avx512`] four rows at a time in AVX2's lanes, by the same operations
/// (the square, below 2^30, converts to i32 exactly).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn square_terms_avx2(grad: &[[f32; 2]], factor: f64, out: &mut [u32]) {
    use std::arch::x86_64::*;
    let bound = (1u32 << SQUARE_ROOT_BITS) as f64;
    let (lo, hi) = (_mm256_set1_pd(-bound), _mm256_set1_pd(bound));
    let lanes = _mm256_set1_pd(factor);
    // the gradients, lanes 0, 2, 4, 6 of a row pair's 8 floats
    let evens = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
    let whole = grad.len() / 4 * 4;
    let (grad, grest) = grad.split_at(whole);
    let (out, orest) = out.split_at_mut(whole);
    for (g, o) in grad.chunks_exact(4).zip(out.chunks_exact_mut(4)) {
        // SAFETY: `g` holds 4 pairs of f32 (32 bytes) and `o` 4 u32 (16 bytes); the loads
        // and stores are unaligned.
        unsafe {
            let pairs = _mm256_loadu_ps(g.as_ptr().cast());
            let v = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(pairs, evens));
            let x = _mm256_mul_pd(_mm256_cvtps_pd(v), lanes);
            let ordered = _mm256_cmp_pd::<_CMP_ORD_Q>(x, x);
            let x = _mm256_and_pd(ordered, _mm256_min_pd(_mm256_max_pd(x, lo), hi));
            let r = _mm256_round_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
            let sq = _mm256_cvttpd_epi32(_mm256_mul_pd(r, r));
            _mm_storeu_si128(o.as_mut_ptr().cast(), sq);
        }
    }
    square_terms_scalar(grest, factor, orest);
}

/// [`quantise_by`] of every row's gradient and hessian (`factors`: 2^shift of each), four
/// rows at a time in 512-bit lanes where the CPU has AVX-512 DQ (in 256-bit ones where it
/// has AVX2).
pub fn quantise_pairs(grad: &[[f32; 2]], factors: [f64; 2], out: &mut [[i64; 2]]) {
    let n = grad.len().min(out.len());
    let (grad, out) = (&grad[..n], &mut out[..n]);
    #[cfg(target_arch = "x86_64")]
    if crate::simd::avx512_allowed()
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
    {
        // SAFETY: the CPU has the features `quantise_pairs_avx512` is compiled for.
        #[allow(unsafe_code)]
        unsafe {
            quantise_pairs_avx512(grad, factors, out)
        };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::simd::avx2() {
        // SAFETY: the CPU has AVX2 (checked by `simd::avx2`).
        #[allow(unsafe_code)]
        unsafe {
            quantise_pairs_avx2(grad, factors, out)
        };
        return;
    }
    quantise_pairs_scalar(grad, factors, out)
}

#[inline(always)]
fn quantise_pairs_scalar(grad: &[[f32; 2]], [gf, hf]: [f64; 2], out: &mut [[i64; 2]]) {
    for (o, &[g, h]) in out.iter_mut().zip(grad) {
        *o = [quantise_by(g, gf), quantise_by(h, hf)];
    }
}

/// [`quantise_pairs_scalar`] four rows at a time: the product is the same IEEE operation,
/// and converting with round-to-nearest-even gives the integer `round_ties_even` then `as`
/// give wherever the value fits an i64. A lane that does not (NaN, infinite, 2^63 or more)
/// converts to i64::MIN, the conversion's "indefinite" value, and sends its four rows to the
/// scalar code, whose `as` saturates; so does a lane of exactly -2^63, which fits, and the
/// scalar code gives the same i64::MIN.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
#[allow(unsafe_code)]
unsafe fn quantise_pairs_avx512(grad: &[[f32; 2]], [gf, hf]: [f64; 2], out: &mut [[i64; 2]]) {
    use std::arch::x86_64::*;
    let factor = _mm512_setr_pd(gf, hf, gf, hf, gf, hf, gf, hf);
    let indefinite = _mm512_set1_epi64(i64::MIN);
    let whole = grad.len() / 4 * 4;
    let (grad, grest) = grad.split_at(whole);
    let (out, orest) = out.split_at_mut(whole);
    for (g, o) in grad.chunks_exact(4).zip(out.chunks_exact_mut(4)) {
        // SAFETY: `g` holds 4 pairs of f32 (32 bytes) and `o` 4 pairs of i64 (64 bytes);
        // the loads and stores are unaligned.
        let v = _mm512_cvtps_pd(unsafe { _mm256_loadu_ps(g.as_ptr().cast()) });
        let x = _mm512_mul_pd(v, factor);
        let q = _mm512_cvt_roundpd_epi64::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
        if _mm512_cmpeq_epi64_mask(q, indefinite) != 0 {
            quantise_pairs_scalar(g, [gf, hf], o);
        } else {
            unsafe { _mm512_storeu_si512(o.as_mut_ptr().cast(), q) };
        }
    }
    quantise_pairs_scalar(grest, [gf, hf], orest);
}

/// [`quantise_pairs_scalar`] four rows at a time in AVX2's lanes, which cannot convert f64
/// to i64: the product is the same IEEE operation, and where every |product| of the step
/// is below 2^51, adding 1.5 · 2^52 rounds it to the nearest integer, ties to even (the sum
/// lies in [2^52, 2^53), whose step is 1, and 1.5 · 2^52 is even), which the sum's bits less
/// those of 1.5 · 2^52 are. A step with a larger product, an infinity or a NaN goes to the
/// scalar code.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn quantise_pairs_avx2(grad: &[[f32; 2]], [gf, hf]: [f64; 2], out: &mut [[i64; 2]]) {
    use std::arch::x86_64::*;
    let factor = _mm256_setr_pd(gf, hf, gf, hf);
    let magic = _mm256_set1_pd(6_755_399_441_055_744.0);
    let limit = _mm256_set1_pd(2_251_799_813_685_248.0);
    let sign = _mm256_set1_pd(-0.0);
    // a product below 2^51 as the integer it rounds to
    let int = |x: __m256d| {
        _mm256_sub_epi64(
            _mm256_castpd_si256(_mm256_add_pd(x, magic)),
            _mm256_castpd_si256(magic),
        )
    };
    let whole = grad.len() / 4 * 4;
    let (grad, grest) = grad.split_at(whole);
    let (out, orest) = out.split_at_mut(whole);
    for (g, o) in grad.chunks_exact(4).zip(out.chunks_exact_mut(4)) {
        // SAFETY: `g` holds 4 pairs of f32 (32 bytes) and `o` 4 pairs of i64 (64 bytes);
        // the loads and stores are unaligned.
        unsafe {
            let v = _mm256_loadu_ps(g.as_ptr().cast());
            let a = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), factor);
            let b = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)), factor);
            let small = _mm256_and_pd(
                _mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_andnot_pd(sign, a), limit),
                _mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_andnot_pd(sign, b), limit),
            );
            if _mm256_movemask_pd(small) != 0b1111 {
                quantise_pairs_scalar(g, [gf, hf], o);
                continue;
            }
            let dst = o.as_mut_ptr().cast::<__m256i>();
            _mm256_storeu_si256(dst, int(a));
            _mm256_storeu_si256(dst.add(1), int(b));
        }
    }
    quantise_pairs_scalar(grest, [gf, hf], orest);
}

/// floor((x + noise) / 2^drop): unbiased stochastic rounding when noise is uniform below 2^drop.
#[inline]
pub fn quantise_lowbit(x: i64, drop: u32, noise: u64) -> i64 {
    // wraps like the GPU kernels where a saturated (non-finite) value leaves no room
    x.wrapping_add(noise as i64) >> drop
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::Stream;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn square_sums_cannot_overflow_and_keep_their_precision(
            max_abs in 1e-30f32..1e30,
            n in 1u64..1u64 << 40,
            bits in prop::option::of(2u8..=16),
        ) {
            let q = bits.map_or(Quantisation::Exact, Quantisation::Bits);
            let s = Scale::agree(max_abs, n, q);
            let shift = square_shift(&s, n).unwrap();
            let largest = square_term(max_abs, pow2(shift));
            prop_assert!(largest <= 1 << 30);
            prop_assert!((largest as i128) * (n as i128) < 1i128 << 62);
            // precise: the largest row keeps at least 13 of its 15 bits below 2^32 rows
            if n < 1 << 32 {
                prop_assert!(largest >= 1 << 26, "{largest}");
            }
            prop_assert_eq!(square_term(-max_abs, pow2(shift)), largest);
        }

        #[test]
        fn exact_sums_cannot_overflow(max_abs in 1e-30f32..1e30, n in 1u64..1u64 << 40) {
            let s = Scale::agree(max_abs, n, Quantisation::Exact);
            let worst = (s.max_value as i128) * n as i128;
            prop_assert!(worst <= 1i128 << 61);
            // and the scale is tight: one more bit would overflow the budget
            let next = quantise_exact(max_abs, s.shift + 1).unsigned_abs() as i128 * n as i128;
            prop_assert!(next > (1i128 << 61) - 2 * n as i128);
        }

        #[test]
        fn exact_quantisation_error_is_half_a_unit(v in -1e6f32..1e6, max_abs in 1e6f32..2e6, n in 1u64..1_000_000) {
            let s = Scale::agree(max_abs, n, Quantisation::Exact);
            let q = quantise_exact(v, s.shift);
            let back = q as f64 * s.exact_unit();
            prop_assert!((back - v as f64).abs() <= 0.5 * s.exact_unit());
        }

        #[test]
        fn lowbit_values_fit_their_bits(v in -1.0f32..1.0, bits in 2u8..=16, row in 0u64..1_000_000) {
            let s = Scale::agree(1.0, 1000, Quantisation::Bits(bits));
            let x = quantise_exact(v, s.shift);
            let q = s.hist_value(x, HashKey::new(3, Stream::GradNoise, 7), row);
            prop_assert!(q.unsigned_abs() <= s.max_value);
            prop_assert!(q.unsigned_abs() <= 1u64 << (bits - 1));
            // q is x / 2^drop rounded down or up
            let d = s.drop.unwrap();
            prop_assert!(q == x >> d || q == (x >> d) + 1);
        }
    }

    fn any_value() -> impl Strategy<Value = f32> {
        prop_oneof![
            Just(f32::NAN),
            Just(f32::INFINITY),
            Just(f32::NEG_INFINITY),
            Just(-0.0f32),
            Just(-1.0f32),
            Just(0.5f32),
            Just(-2.5f32),
            -1.0f32..1.0,
            any::<f32>(),
        ]
    }

    proptest! {
        #[test]
        fn pairs_in_lanes_are_quantise_by_of_each(
            grad in proptest::collection::vec((any_value(), any_value()), 0..40),
            shifts in prop_oneof![(-140i32..140, -140i32..140), Just((63, 63)), Just((64, 62))],
        ) {
            let grad: Vec<[f32; 2]> = grad.into_iter().map(|(g, h)| [g, h]).collect();
            let factors = [pow2(shifts.0), pow2(shifts.1)];
            let mut out = vec![[7i64; 2]; grad.len()];
            #[cfg(target_arch = "x86_64")]
            if crate::simd::avx512_allowed()
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512dq")
            {
                // SAFETY: the CPU has the features the lanes are compiled for
                #[allow(unsafe_code)]
                unsafe { quantise_pairs_avx512(&grad, factors, &mut out) };
            } else {
                eprintln!("no AVX-512 DQ on this CPU: the lanes are not compared");
                quantise_pairs(&grad, factors, &mut out);
            }
            #[cfg(not(target_arch = "x86_64"))]
            quantise_pairs(&grad, factors, &mut out);
            for (o, &[g, h]) in out.iter().zip(&grad) {
                prop_assert_eq!(*o, [quantise_by(g, factors[0]), quantise_by(h, factors[1])], "{} {}", g, h);
            }
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut avx2 = vec![[7i64; 2]; grad.len()];
                // SAFETY: the CPU has AVX2
                #[allow(unsafe_code)]
                unsafe { quantise_pairs_avx2(&grad, factors, &mut avx2) };
                for (o, &[g, h]) in avx2.iter().zip(&grad) {
                    prop_assert_eq!(*o, [quantise_by(g, factors[0]), quantise_by(h, factors[1])], "AVX2: {} {}", g, h);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn square_terms_in_lanes_are_square_term_of_each(
            grad in proptest::collection::vec(any_value(), 0..40),
            shift in prop_oneof![-140i32..140, Just(15), Just(16), Just(1100), Just(-1100)],
        ) {
            // values near the clamp and its ties: 2^15 ± 0.5, ± 1 at shift 0
            let near = [32767.5f32, 32768.5, -32768.5, 32769.0, -32767.5, 1.5, 2.5];
            let grad: Vec<[f32; 2]> = grad.iter().chain(&near).map(|&g| [g, 1.0]).collect();
            for shift in [shift, 0] {
                let factor = pow2(shift);
                let mut out = vec![7u32; grad.len()];
                #[cfg(target_arch = "x86_64")]
                if crate::simd::avx512_allowed() && std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has the feature the lanes are compiled for
                    #[allow(unsafe_code)]
                    unsafe { square_terms_avx512(&grad, factor, &mut out) };
                } else {
                    eprintln!("no AVX-512 F on this CPU: the lanes are not compared");
                    square_terms_into(&grad, factor, &mut out);
                }
                #[cfg(not(target_arch = "x86_64"))]
                square_terms_into(&grad, factor, &mut out);
                for (o, &[g, _]) in out.iter().zip(&grad) {
                    prop_assert_eq!(*o as i64, square_term(g, factor), "{} at shift {}", g, shift);
                }
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    let mut avx2 = vec![7u32; grad.len()];
                    // SAFETY: the CPU has AVX2
                    #[allow(unsafe_code)]
                    unsafe { square_terms_avx2(&grad, factor, &mut avx2) };
                    for (o, &[g, _]) in avx2.iter().zip(&grad) {
                        prop_assert_eq!(*o as i64, square_term(g, factor), "AVX2: {} at shift {}", g, shift);
                    }
                }
            }
        }
    }

    #[test]
    fn stochastic_rounding_is_unbiased() {
        let s = Scale::agree(1.0, 1000, Quantisation::Bits(4));
        let v = 0.3137f32;
        let x = quantise_exact(v, s.shift);
        let n = 200_000u64;
        let total: i64 = (0..n)
            .map(|r| s.hist_value(x, HashKey::new(11, Stream::GradNoise, 0), r))
            .sum();
        let mean = total as f64 / n as f64 * s.hist_unit();
        // bias far below one low-bit unit (0.125 here)
        assert!((mean - v as f64).abs() < 0.002, "mean {mean}");
    }
}
