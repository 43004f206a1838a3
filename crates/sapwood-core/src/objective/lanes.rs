//! The logistic loss's gradients sixteen rows at a time (eight in AVX2's lanes), and the
//! softmax's sixteen classes of a row at a time, in 512-bit lanes where the CPU has AVX-512
//! (256-bit ones for the logistic loss where it has AVX2 only): the same IEEE operations
//! as the row-by-row code, so the same bits (but for a NaN's sign and payload, which no IEEE
//! operation fixes: a NaN label or weight gives a NaN gradient either way, which quantises
//! to 0 and never counts as a maximum).
#![allow(unsafe_code)]

use super::{ftz, logistic_with, rows_by, softmax_row};

/// Writes the logistic gradient and hessian of every row (`logistic_with` of each, label and
/// weight flushed as [`rows_by`] flushes them) into `out`, sixteen rows at a time where the
/// CPU has AVX-512 F (eight where it has AVX2) and `t` is the sigmoid table.
pub(super) fn logistic_rows(
    t: &[u32],
    margins: &[f32],
    labels: &[f32],
    weights: Option<&[f32]>,
    out: &mut [[f32; 2]],
) {
    #[cfg(target_arch = "x86_64")]
    if t.len() == TABLE_LEN {
        // the kernel and the rows it takes a step
        let lanes: Option<(Kernel, usize)> =
            if crate::simd::avx512_allowed() && std::arch::is_x86_feature_detected!("avx512f") {
                Some((logistic_avx512, LANES))
            } else if crate::simd::avx2() {
                Some((logistic_avx2, LANES_AVX2))
            } else {
                None
            };
        if let Some((kernel, step)) = lanes {
            let n = out.len().min(margins.len()).min(labels.len());
            let n = weights.map_or(n, |w| n.min(w.len()));
            let whole = n / step * step;
            // SAFETY: the CPU has the kernel's extension (checked above); the table has
            // TABLE_LEN entries.
            unsafe {
                kernel(
                    t,
                    &margins[..whole],
                    &labels[..whole],
                    weights.map(|w| &w[..whole]),
                    &mut out[..whole],
                )
            };
            let rest = whole..n;
            rows_by(
                &margins[rest.clone()],
                &labels[rest.clone()],
                weights.map(|w| &w[rest.clone()]),
                &mut out[rest],
                |m, y, w| logistic_with(t, m, y, w),
            );
            return;
        }
    }
    rows_by(margins, labels, weights, out, |m, y, w| {
        logistic_with(t, m, y, w)
    });
}

/// A logistic kernel in lanes: [`logistic_avx512`] or [`logistic_avx2`].
#[cfg(target_arch = "x86_64")]
type Kernel = unsafe fn(&[u32], &[f32], &[f32], Option<&[f32]>, &mut [[f32; 2]]);

/// Rows a step.
const LANES: usize = 16;

/// Rows a step in AVX2's lanes.
const LANES_AVX2: usize = 8;

// the lanes shift and mask by 16: the fraction bits of a table step
const _: () = assert!(super::MARGIN_FRAC_BITS - super::SIGMOID_STEP_BITS == 16);

/// Entries of the sigmoid table: one every 2^-8 over [-20, 20], both ends included.
const TABLE_LEN: usize = ((2 * super::SIGMOID_RANGE as usize) << super::SIGMOID_STEP_BITS) + 1;

/// [`logistic_rows`] on whole steps of [`LANES`] rows, step by step as [`logistic_with`]:
/// - the margin: NaN to 0, flushed, clamped to ±20, times 2^24 (exact), converted to i32
///   rounding to nearest even (what `round_ties_even_f32` then `as i32` give: |x| < 2^31);
/// - the table index and fraction, and the interpolation in u32 (wrapping like the scalar
///   release build, though no step overflows: differences stay below 2^15). The last entry
///   is read twice instead of branching, its fraction then being 0, which is the scalar
///   code's value there;
/// - the probability clamped to [1, 2^24 - 1], converted (exact below 2^24) and scaled by
///   2^-24 (exact); then the same f32 operations, each flushed where the scalar flushes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn logistic_avx512(
    t: &[u32],
    margins: &[f32],
    labels: &[f32],
    weights: Option<&[f32]>,
    out: &mut [[f32; 2]],
) {
    use std::arch::x86_64::*;
    debug_assert_eq!(t.len(), TABLE_LEN);
    let zero = _mm512_setzero_ps();
    let range = super::SIGMOID_RANGE as f32;
    let (lo, hi) = (_mm512_set1_ps(-range), _mm512_set1_ps(range));
    let unit = _mm512_set1_ps((1u32 << super::MARGIN_FRAC_BITS) as f32);
    let offset = _mm512_set1_epi32(super::SIGMOID_RANGE << super::MARGIN_FRAC_BITS);
    let frac_mask = _mm512_set1_epi32((1 << 16) - 1);
    let one_i = _mm512_set1_epi32(1);
    let last = _mm512_set1_epi32(TABLE_LEN as i32 - 1);
    let top = _mm512_set1_epi32(super::ONE as i32 - 1);
    let prob_unit = _mm512_set1_ps(1.0 / super::ONE as f32);
    let one = _mm512_set1_ps(1.0);
    let min_hessian = _mm512_set1_ps(super::MIN_HESSIAN);
    let unweighted = _mm512_set1_ps(ftz(1.0));
    let even = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let odd = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (s, o) in out.chunks_exact_mut(LANES).enumerate() {
        let at = s * LANES;
        // SAFETY: every slice holds whole steps (the caller cuts them), so each unaligned
        // load reads 16 f32 inside it and each store writes 16 pairs inside `o`; every
        // gathered index is at most TABLE_LEN - 1 (shown below).
        unsafe {
            let m = _mm512_loadu_ps(margins.as_ptr().add(at));
            let y = flush(_mm512_loadu_ps(labels.as_ptr().add(at)));
            let w = match weights {
                Some(w) => flush(_mm512_loadu_ps(w.as_ptr().add(at))),
                None => unweighted,
            };
            let m = _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(m, m), zero);
            let m = _mm512_min_ps(_mm512_max_ps(flush(m), lo), hi);
            let fixed = _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                _mm512_mul_ps(m, unit),
            );
            // fixed + 20 * 2^24 lies in [0, 40 * 2^24], so i = u >> 16 is at most 10240
            let u = _mm512_add_epi32(fixed, offset);
            let i = _mm512_srli_epi32::<16>(u);
            let f = _mm512_and_si512(u, frac_mask);
            let next = _mm512_min_epu32(_mm512_add_epi32(i, one_i), last);
            let t0 = _mm512_i32gather_epi32::<4>(i, t.as_ptr().cast());
            let t1 = _mm512_i32gather_epi32::<4>(next, t.as_ptr().cast());
            let step = _mm512_srli_epi32::<16>(_mm512_mullo_epi32(_mm512_sub_epi32(t1, t0), f));
            let p = _mm512_add_epi32(t0, step);
            let p = _mm512_min_epu32(_mm512_max_epu32(p, one_i), top);
            let p = _mm512_mul_ps(_mm512_cvtepi32_ps(p), prob_unit);
            let g = flush(_mm512_mul_ps(flush(_mm512_sub_ps(p, y)), w));
            let h = _mm512_max_ps(_mm512_mul_ps(p, _mm512_sub_ps(one, p)), min_hessian);
            let h = flush(_mm512_mul_ps(h, w));
            let dst = o.as_mut_ptr().cast::<f32>();
            _mm512_storeu_ps(dst, _mm512_permutex2var_ps(g, even, h));
            _mm512_storeu_ps(dst.add(LANES), _mm512_permutex2var_ps(g, odd, h));
        }
    }
}

/// [`logistic_avx512`] in AVX2's eight lanes, the same operations step by step (the
/// conversion to i32 rounds as the environment does, to nearest even, as Rust leaves it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn logistic_avx2(
    t: &[u32],
    margins: &[f32],
    labels: &[f32],
    weights: Option<&[f32]>,
    out: &mut [[f32; 2]],
) {
    use std::arch::x86_64::*;
    debug_assert_eq!(t.len(), TABLE_LEN);
    let zero = _mm256_setzero_ps();
    let range = super::SIGMOID_RANGE as f32;
    let (lo, hi) = (_mm256_set1_ps(-range), _mm256_set1_ps(range));
    let unit = _mm256_set1_ps((1u32 << super::MARGIN_FRAC_BITS) as f32);
    let offset = _mm256_set1_epi32(super::SIGMOID_RANGE << super::MARGIN_FRAC_BITS);
    let frac_mask = _mm256_set1_epi32((1 << 16) - 1);
    let one_i = _mm256_set1_epi32(1);
    let last = _mm256_set1_epi32(TABLE_LEN as i32 - 1);
    let top = _mm256_set1_epi32(super::ONE as i32 - 1);
    let prob_unit = _mm256_set1_ps(1.0 / super::ONE as f32);
    let one = _mm256_set1_ps(1.0);
    let min_hessian = _mm256_set1_ps(super::MIN_HESSIAN);
    let unweighted = _mm256_set1_ps(ftz(1.0));
    for (s, o) in out.chunks_exact_mut(LANES_AVX2).enumerate() {
        let at = s * LANES_AVX2;
        // SAFETY: as in logistic_avx512, with steps of 8
        unsafe {
            let m = _mm256_loadu_ps(margins.as_ptr().add(at));
            let y = flush_avx2(_mm256_loadu_ps(labels.as_ptr().add(at)));
            let w = match weights {
                Some(w) => flush_avx2(_mm256_loadu_ps(w.as_ptr().add(at))),
                None => unweighted,
            };
            let m = _mm256_blendv_ps(m, zero, _mm256_cmp_ps::<_CMP_UNORD_Q>(m, m));
            let m = _mm256_min_ps(_mm256_max_ps(flush_avx2(m), lo), hi);
            let fixed = _mm256_cvtps_epi32(_mm256_mul_ps(m, unit));
            let u = _mm256_add_epi32(fixed, offset);
            let i = _mm256_srli_epi32::<16>(u);
            let f = _mm256_and_si256(u, frac_mask);
            let next = _mm256_min_epu32(_mm256_add_epi32(i, one_i), last);
            let t0 = _mm256_i32gather_epi32::<4>(t.as_ptr().cast(), i);
            let t1 = _mm256_i32gather_epi32::<4>(t.as_ptr().cast(), next);
            let step = _mm256_srli_epi32::<16>(_mm256_mullo_epi32(_mm256_sub_epi32(t1, t0), f));
            let p = _mm256_add_epi32(t0, step);
            let p = _mm256_min_epu32(_mm256_max_epu32(p, one_i), top);
            let p = _mm256_mul_ps(_mm256_cvtepi32_ps(p), prob_unit);
            let g = flush_avx2(_mm256_mul_ps(flush_avx2(_mm256_sub_ps(p, y)), w));
            let h = _mm256_max_ps(_mm256_mul_ps(p, _mm256_sub_ps(one, p)), min_hessian);
            let h = flush_avx2(_mm256_mul_ps(h, w));
            // (g, h) pairs of rows 0, 1, 4, 5 and of rows 2, 3, 6, 7
            let low = _mm256_unpacklo_ps(g, h);
            let high = _mm256_unpackhi_ps(g, h);
            let dst = o.as_mut_ptr().cast::<f32>();
            _mm256_storeu_ps(dst, _mm256_permute2f128_ps::<0x20>(low, high));
            _mm256_storeu_ps(
                dst.add(LANES_AVX2),
                _mm256_permute2f128_ps::<0x31>(low, high),
            );
        }
    }
}

/// Writes the softmax (g, h) of every row (`k` classes a row, [`softmax_row`] of each with
/// label and weight flushed) into `out` and raises `max` (each class's largest |g| and h),
/// sixteen classes at a time where the CPU has AVX-512 F and DQ, `k` is at most 64 and `t`
/// is the exponential table; row by row otherwise.
#[allow(clippy::too_many_arguments)]
pub(super) fn softmax_rows(
    t: &[u32],
    factor: f32,
    k: usize,
    margins: &[f32],
    labels: &[f32],
    weights: Option<&[f32]>,
    out: &mut [[f32; 2]],
    max: &mut [[f32; 2]],
) {
    #[cfg(target_arch = "x86_64")]
    if (1..=MAX_LANE_CLASSES).contains(&k)
        && t.len() == EXP_TABLE_LEN
        && max.len() == k
        && crate::simd::avx512_allowed()
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
    {
        // SAFETY: the CPU has AVX-512 F and DQ (checked above), the table has
        // EXP_TABLE_LEN entries, 1 <= k <= 64 and `max` holds k pairs.
        unsafe { softmax_avx512(t, factor, k, margins, labels, weights, out, max) };
        return;
    }
    softmax_by_rows(t, factor, k, margins, labels, weights, out, max);
}

/// [`softmax_rows`] a row at a time.
#[allow(clippy::too_many_arguments)]
fn softmax_by_rows(
    t: &[u32],
    factor: f32,
    k: usize,
    margins: &[f32],
    labels: &[f32],
    weights: Option<&[f32]>,
    out: &mut [[f32; 2]],
    max: &mut [[f32; 2]],
) {
    let rows = out.chunks_exact_mut(k).zip(margins.chunks_exact(k));
    for (i, ((row, m), &y)) in rows.zip(labels).enumerate() {
        let w = ftz(weights.map_or(1.0, |w| w[i]));
        softmax_row(t, factor, m, ftz(y), w, |c, g, h| {
            row[c] = [g, h];
            max[c][0] = max[c][0].max(g.abs());
            max[c][1] = max[c][1].max(h);
        });
    }
}

/// The most classes the softmax lanes take (their exponentials' sum then fits 32 bits).
const MAX_LANE_CLASSES: usize = 64;

/// Entries of the exponential table: one every 2^-10 over [0, 20], both ends included.
const EXP_TABLE_LEN: usize = ((super::EXP_RANGE as usize) << super::EXP_STEP_BITS) + 1;

// the lanes shift and mask by 14: the fraction bits of an exponential table step
const _: () = assert!(super::MARGIN_FRAC_BITS - super::EXP_STEP_BITS == 14);

/// [`softmax_rows`] in lanes, a row at a time, its classes sixteen to a register (the last
/// register of a row masked), step by step as [`softmax_row`]:
/// - the largest flushed margin (a lane's NaN never wins: `max` returns its second operand
///   when either is NaN, and the running maximum is never NaN); which zero it is does not
///   matter, as `max - m` is the same for both unless `m` is a zero too, and then both give
///   the exponential of 0;
/// - each class's exponential as [`super::exp_neg_fixed_in`]: the difference flushed, 0
///   where it is NaN or at least 20, else its fixed point (below 20 · 2^24 < 2^31, converted
///   rounding to nearest even) interpolated in the table in u32 (the index stays below the
///   last entry, and the step below 2^28);
/// - their sum in u32 (64 values of at most 2^24), so exact in any order, and the exact
///   quotient of each exponential times 2^24 by it, from the product with the f64
///   reciprocal (the same rounding as the scalar product) corrected by one either way in
///   u64, as [`super::Divisor`] does;
/// - the probability (exact in f32 below 2^24) and the same f32 operations, each flushed
///   where the scalar flushes; the pairs written and the maxima raised under a mask.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
#[allow(clippy::too_many_arguments)]
unsafe fn softmax_avx512(
    t: &[u32],
    factor: f32,
    k: usize,
    margins: &[f32],
    labels: &[f32],
    weights: Option<&[f32]>,
    out: &mut [[f32; 2]],
    max: &mut [[f32; 2]],
) {
    use std::arch::x86_64::*;
    debug_assert!(t.len() == EXP_TABLE_LEN && (1..=MAX_LANE_CLASSES).contains(&k));
    let zero = _mm512_setzero_ps();
    let range = _mm512_set1_ps(super::EXP_RANGE as f32);
    let unit = _mm512_set1_ps((1u32 << super::MARGIN_FRAC_BITS) as f32);
    let frac_mask = _mm512_set1_epi32((1 << 14) - 1);
    let one_i = _mm512_set1_epi32(1);
    let last = _mm512_set1_epi32(EXP_TABLE_LEN as i32 - 1);
    let prob_unit = _mm512_set1_ps(1.0 / super::ONE as f32);
    let one = _mm512_set1_ps(1.0);
    let factor = _mm512_set1_ps(factor);
    let min_hessian = _mm512_set1_ps(super::MIN_HESSIAN);
    let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let even = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let odd = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    let chunks = k.div_ceil(LANES);
    // a class's lanes: all but the last register's past k
    let lanes = |c: usize| -> u16 {
        let n = (k - c * LANES).min(LANES);
        ((1u32 << n) - 1) as u16
    };
    let rows = out.chunks_exact_mut(k).zip(margins.chunks_exact(k));
    for (i, ((row, m), &y)) in rows.zip(labels).enumerate() {
        let w = _mm512_set1_ps(ftz(weights.map_or(1.0, |w| w[i])));
        let class = ftz(y) as usize;
        // SAFETY: every load and store is masked to the row's k classes (`m`, `row` and
        // `max` hold k of them); every gathered index is at most EXP_TABLE_LEN - 1
        unsafe {
            let mut flushed = [zero; MAX_LANE_CLASSES / LANES];
            let mut top = _mm512_set1_ps(f32::NEG_INFINITY);
            for (c, f) in flushed.iter_mut().enumerate().take(chunks) {
                let x = _mm512_maskz_loadu_ps(lanes(c), m.as_ptr().add(c * LANES));
                *f = flush(x);
                let x = _mm512_mask_mov_ps(_mm512_set1_ps(f32::NEG_INFINITY), lanes(c), *f);
                top = _mm512_max_ps(x, top);
            }
            let top = _mm512_set1_ps(_mm512_reduce_max_ps(top));
            let mut e = [_mm512_setzero_si512(); MAX_LANE_CLASSES / LANES];
            let mut sum = _mm512_setzero_si512();
            for (c, e) in e.iter_mut().enumerate().take(chunks) {
                let d = flush(_mm512_sub_ps(top, flushed[c]));
                let kept = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(d, range) & lanes(c);
                let x = _mm512_mul_ps(_mm512_max_ps(d, zero), unit);
                let fixed = _mm512_cvt_roundps_epi32::<
                    { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
                >(x);
                // kept lanes: 0 <= fixed < 20 * 2^24, so the index is below the last entry
                let fixed = _mm512_maskz_mov_epi32(kept, fixed);
                let at = _mm512_srli_epi32::<14>(fixed);
                let f = _mm512_and_si512(fixed, frac_mask);
                let next = _mm512_min_epu32(_mm512_add_epi32(at, one_i), last);
                let t0 = _mm512_i32gather_epi32::<4>(at, t.as_ptr().cast());
                let t1 = _mm512_i32gather_epi32::<4>(next, t.as_ptr().cast());
                let step = _mm512_srli_epi32::<14>(_mm512_mullo_epi32(_mm512_sub_epi32(t0, t1), f));
                *e = _mm512_maskz_mov_epi32(kept, _mm512_sub_epi32(t0, step));
                sum = _mm512_add_epi32(sum, *e);
            }
            let total = (_mm512_reduce_add_epi32(sum) as u32).max(1);
            let d = _mm512_set1_epi64(i64::from(total));
            let reciprocal = _mm512_set1_pd(1.0 / f64::from(total));
            let quotient = |a: __m512i| quotient_avx512(a, d, reciprocal);
            for (c, &e) in e.iter().enumerate().take(chunks) {
                let low = _mm512_slli_epi64::<24>(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(e)));
                let high = _mm512_slli_epi64::<24>(_mm512_cvtepu32_epi64(
                    _mm512_extracti64x4_epi64::<1>(e),
                ));
                // at most 2^24 each: exact through i32 to f32
                let pk = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm512_cvtepi64_epi32(quotient(low))),
                    _mm512_cvtepi64_epi32(quotient(high)),
                );
                let p = _mm512_mul_ps(_mm512_cvtepi32_ps(pk), prob_unit);
                let ids = _mm512_add_epi32(iota, _mm512_set1_epi32((c * LANES) as i32));
                let is_class = _mm512_cmpeq_epi32_mask(ids, _mm512_set1_epi32(class as i32))
                    & u16::from(class < k).wrapping_neg();
                let target = _mm512_maskz_mov_ps(is_class, one);
                let g = flush(_mm512_mul_ps(flush(_mm512_sub_ps(p, target)), w));
                let h = _mm512_mul_ps(factor, _mm512_mul_ps(p, _mm512_sub_ps(one, p)));
                let h = flush(_mm512_mul_ps(_mm512_max_ps(h, min_hessian), w));
                let g_abs = _mm512_abs_ps(g);
                // pairs (g, h) of classes c·16.. in two registers of eight, masked to k
                let n = (k - c * LANES).min(LANES);
                let first = ((1u32 << (2 * n.min(8))) - 1) as u16;
                let second = ((1u32 << (2 * n.saturating_sub(8))) - 1) as u16;
                let dst = row.as_mut_ptr().add(c * LANES).cast::<f32>();
                let most = max.as_mut_ptr().add(c * LANES).cast::<f32>();
                for (half, (mask, index)) in [(first, even), (second, odd)].into_iter().enumerate()
                {
                    let at = half * LANES;
                    _mm512_mask_storeu_ps(dst.add(at), mask, _mm512_permutex2var_ps(g, index, h));
                    let old = _mm512_maskz_loadu_ps(mask, most.add(at));
                    // the old maximum where the new value is NaN, as `f32::max` keeps it
                    let new = _mm512_max_ps(_mm512_permutex2var_ps(g_abs, index, h), old);
                    _mm512_mask_storeu_ps(most.add(at), mask, new);
                }
            }
        }
    }
}

/// floor(a / d) of eight u64 `a` below 2^53 by one positive `d` below 2^53 in every lane,
/// as [`super::Divisor::quotient`] gives it: the product with `reciprocal` (1 / d rounded,
/// in every lane) truncated, then corrected by one either way.
///
/// # Safety
/// The CPU must have AVX-512 F and DQ.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
#[inline]
unsafe fn quotient_avx512(
    a: std::arch::x86_64::__m512i,
    d: std::arch::x86_64::__m512i,
    reciprocal: std::arch::x86_64::__m512d,
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    let q = _mm512_cvttpd_epu64(_mm512_mul_pd(_mm512_cvtepu64_pd(a), reciprocal));
    let over = _mm512_cmpgt_epu64_mask(_mm512_mullo_epi64(q, d), a);
    let q = _mm512_mask_sub_epi64(q, over, q, _mm512_set1_epi64(1));
    let q1 = _mm512_add_epi64(q, _mm512_set1_epi64(1));
    let under = _mm512_cmple_epu64_mask(_mm512_mullo_epi64(q1, d), a);
    _mm512_mask_mov_epi64(q, under, q1)
}

/// [`ftz`] in lanes: each lane whose magnitude is below the smallest normal becomes +0 (a
/// NaN compares false and stays, as `x.abs() < MIN_POSITIVE` is false for it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn flush(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let a = _mm512_abs_ps(x);
    let small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, _mm512_set1_ps(f32::MIN_POSITIVE));
    _mm512_mask_mov_ps(x, small, _mm512_setzero_ps())
}

/// [`flush`] in AVX2's lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn flush_avx2(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let a = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(i32::MAX)));
    let small = _mm256_cmp_ps::<_CMP_LT_OQ>(a, _mm256_set1_ps(f32::MIN_POSITIVE));
    _mm256_blendv_ps(x, _mm256_setzero_ps(), small)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn special() -> impl Strategy<Value = f32> {
        prop_oneof![
            Just(f32::NAN),
            Just(-f32::NAN),
            Just(f32::INFINITY),
            Just(f32::NEG_INFINITY),
            Just(0.0f32),
            Just(-0.0f32),
            Just(1e-40f32),
            Just(-1e-40f32),
            Just(20.0f32),
            Just(-20.0f32),
            Just(19.999998f32),
            -25.0f32..25.0,
            -1e-3f32..1e-3,
            any::<f32>(),
        ]
    }

    /// The logistic kernels this CPU runs, with the rows each takes a step.
    fn kernels() -> Vec<(&'static str, Kernel, usize)> {
        let mut found: Vec<(&'static str, Kernel, usize)> = Vec::new();
        if std::arch::is_x86_feature_detected!("avx512f") {
            found.push(("AVX-512", logistic_avx512, LANES));
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            found.push(("AVX2", logistic_avx2, LANES_AVX2));
        }
        if found.is_empty() {
            eprintln!("neither AVX-512 F nor AVX2 on this CPU: the lanes are not compared");
        }
        found
    }

    /// For each kernel this CPU runs, its gradients on the whole steps of the rows (the
    /// rest through the dispatch) and the row-by-row loss on all of them.
    fn both(m: &[f32], y: &[f32], w: Option<&[f32]>) -> Vec<(&'static str, [Vec<[f32; 2]>; 2])> {
        let t = super::super::sigmoid_table();
        let mut plain = vec![[7.0f32; 2]; m.len()];
        rows_by(m, y, w, &mut plain, |m, y, w| logistic_with(t, m, y, w));
        kernels()
            .into_iter()
            .map(|(name, kernel, step)| {
                let whole = m.len() / step * step;
                let mut lanes = vec![[7.0f32; 2]; m.len()];
                // SAFETY: the CPU has the kernel's extension; the slices hold whole steps;
                // the table is the sigmoid table
                unsafe {
                    kernel(
                        t,
                        &m[..whole],
                        &y[..whole],
                        w.map(|w| &w[..whole]),
                        &mut lanes[..whole],
                    )
                };
                logistic_rows(
                    t,
                    &m[whole..],
                    &y[whole..],
                    w.map(|w| &w[whole..]),
                    &mut lanes[whole..],
                );
                (name, [lanes, plain.clone()])
            })
            .collect()
    }

    /// Bits of a value, every NaN alike (their sign and payload are not specified).
    fn bits(x: f32) -> u32 {
        if x.is_nan() {
            u32::MAX
        } else {
            x.to_bits()
        }
    }

    proptest! {
        #[test]
        fn lanes_give_the_bits_of_the_row_by_row_loss(
            rows in proptest::collection::vec((special(), special(), special()), 0..70),
            weighted in any::<bool>(),
            binary_labels in any::<bool>(),
        ) {
            let m: Vec<f32> = rows.iter().map(|r| r.0).collect();
            let y: Vec<f32> = rows.iter().map(|r| if binary_labels { (r.1 > 0.0) as u8 as f32 } else { r.1 }).collect();
            let w: Vec<f32> = rows.iter().map(|r| r.2.abs()).collect();
            for (name, [lanes, plain]) in both(&m, &y, weighted.then_some(&w[..])) {
                for (j, (a, b)) in lanes.iter().zip(&plain).enumerate() {
                    prop_assert_eq!(
                        [bits(a[0]), bits(a[1])],
                        [bits(b[0]), bits(b[1])],
                        "{}: row {} margin {} label {}", name, j, m[j], y[j]
                    );
                }
            }
        }
    }

    #[test]
    fn every_fraction_of_several_table_steps_matches() {
        // every fixed-point margin (units of 2^-24) over whole table steps: at both ends, around
        // 0 and in between; then one margin every 2^-12 over the whole range and past it
        let unit = 1.0 / (1u32 << 24) as f64;
        let step = 1i64 << 16;
        let mut m: Vec<f32> = Vec::new();
        for first in [
            -20 * (1i64 << 24) - step,
            -2 * step,
            5 * (1 << 24) + 7 * step,
            20 * (1 << 24) - step,
        ] {
            m.extend((first..first + 2 * step).map(|k| (k as f64 * unit) as f32));
        }
        m.extend((-(21 << 12)..=(21 << 12)).map(|i| i as f32 / 4096.0));
        for (y, weighted) in [(1.0f32, false), (0.0, true), (0.3, true)] {
            let ys = vec![y; m.len()];
            let w: Vec<f32> = (0..m.len()).map(|i| 0.25 + (i % 7) as f32).collect();
            for (name, [lanes, plain]) in both(&m, &ys, weighted.then_some(&w[..])) {
                for (j, (a, b)) in lanes.iter().zip(&plain).enumerate() {
                    assert_eq!(
                        [a[0].to_bits(), a[1].to_bits()],
                        [b[0].to_bits(), b[1].to_bits()],
                        "{name}: margin {} label {y}",
                        m[j]
                    );
                }
            }
        }
    }

    /// The pairs a softmax wrote, and its maxima.
    type Written = (Vec<[f32; 2]>, Vec<[f32; 2]>);

    /// `softmax_avx512` and the row-by-row softmax on the same rows (`k` classes a row) from
    /// the same maxima, or None where the CPU lacks AVX-512 F and DQ.
    fn softmax_both(
        k: usize,
        m: &[f32],
        y: &[f32],
        w: Option<&[f32]>,
        factor: f32,
    ) -> Option<[Written; 2]> {
        let t = super::super::exp_table();
        if !std::arch::is_x86_feature_detected!("avx512f")
            || !std::arch::is_x86_feature_detected!("avx512dq")
        {
            eprintln!("no AVX-512 F and DQ on this CPU: the softmax lanes are not compared");
            return None;
        }
        let start: Vec<[f32; 2]> = (0..k).map(|c| [c as f32 * 0.01, 0.5]).collect();
        let (mut lanes, mut lanes_max) = (vec![[7.0f32; 2]; m.len()], start.clone());
        // SAFETY: the CPU has AVX-512 F and DQ; the table is the exponential table, k is
        // within 1..=64 and the maxima hold k pairs
        unsafe { softmax_avx512(t, factor, k, m, y, w, &mut lanes, &mut lanes_max) };
        let (mut plain, mut plain_max) = (vec![[7.0f32; 2]; m.len()], start);
        softmax_by_rows(t, factor, k, m, y, w, &mut plain, &mut plain_max);
        Some([(lanes, lanes_max), (plain, plain_max)])
    }

    proptest! {
        #[test]
        fn softmax_lanes_give_the_bits_of_the_row_by_row_loss(
            k in 1usize..=64,
            rows in 0usize..5,
            margins in proptest::collection::vec(prop_oneof![
                4 => -30.0f32..30.0,
                1 => special(),
            ], 320),
            labels in proptest::collection::vec(prop_oneof![
                8 => (0u32..70).prop_map(|c| c as f32),
                1 => special(),
            ], 5),
            weights in proptest::collection::vec(special(), 5),
            weighted in any::<bool>(),
            lightgbm in any::<bool>(),
        ) {
            let m = &margins[..rows * k];
            let (y, w) = (&labels[..rows], &weights[..rows]);
            let factor = if lightgbm { k as f32 / (k as f32 - 1.0).max(1.0) } else { 2.0 };
            let Some([(lanes, lanes_max), (plain, plain_max)]) =
                softmax_both(k, m, y, weighted.then_some(w), factor)
            else {
                return Ok(());
            };
            for (j, (a, b)) in lanes.iter().zip(&plain).enumerate() {
                prop_assert_eq!(
                    [bits(a[0]), bits(a[1])],
                    [bits(b[0]), bits(b[1])],
                    "row {} class {} margin {}", j / k, j % k, m[j]
                );
            }
            for (c, (a, b)) in lanes_max.iter().zip(&plain_max).enumerate() {
                prop_assert_eq!([bits(a[0]), bits(a[1])], [bits(b[0]), bits(b[1])], "class {}", c);
            }
        }
    }

    #[test]
    fn softmax_lanes_match_at_the_tables_ends_and_every_class_count() {
        // margins whose differences from the row's largest fall on the table's last steps,
        // at 20 and just below, and around zero; every class count from 1 to 64
        let near = [
            0.0f32, -0.0, 1e-40, -19.999998, -20.0, -20.000002, -19.0, -0.5, 25.0, -1e-3,
        ];
        for k in 1..=64usize {
            let rows = 6;
            let m: Vec<f32> = (0..rows * k)
                .map(|i| near[(i * 7 + i / k) % near.len()])
                .collect();
            let y: Vec<f32> = (0..rows).map(|r| ((r * 13) % (k + 2)) as f32).collect();
            let w: Vec<f32> = (0..rows).map(|r| 0.5 + r as f32).collect();
            for factor in [2.0f32, k as f32 / (k as f32 - 1.0).max(1.0)] {
                let Some([(lanes, lanes_max), (plain, plain_max)]) =
                    softmax_both(k, &m, &y, Some(&w), factor)
                else {
                    return;
                };
                for (j, (a, b)) in lanes.iter().zip(&plain).enumerate() {
                    assert_eq!(
                        [a[0].to_bits(), a[1].to_bits()],
                        [b[0].to_bits(), b[1].to_bits()],
                        "k {k} row {} class {}",
                        j / k,
                        j % k
                    );
                }
                assert_eq!(lanes_max, plain_max, "k {k}");
            }
        }
    }

    #[test]
    fn lane_quotients_are_the_divisors() {
        use std::arch::x86_64::*;
        if !std::arch::is_x86_feature_detected!("avx512f")
            || !std::arch::is_x86_feature_detected!("avx512dq")
        {
            return;
        }
        // sums of up to 64 exponentials of at most 2^24, and numerators e * 2^24: exact
        // multiples of the sum (where a product a shade low must step up) and their
        // neighbours, then a spread of others
        let mut lcg = crate::test_rng::lcg(0x9e37_79b9_7f4a_7c15);
        let mut next = || lcg() >> 16;
        for _ in 0..2000 {
            let d = 1 + next() % (64 << 24);
            let divisor = super::super::Divisor::new(d);
            let mut a: Vec<u64> = Vec::new();
            for _ in 0..8 {
                let q = next() % ((1u64 << 48) / d + 1);
                a.extend([q * d, (q * d).saturating_sub(1), q * d + 1]);
                a.push((next() % ((1 << 24) + 1)) << 24);
            }
            for chunk in a.chunks(8) {
                let mut lanes = [0u64; 8];
                lanes[..chunk.len()].copy_from_slice(chunk);
                // SAFETY: the CPU has AVX-512 F and DQ (checked above)
                let got: [u64; 8] = unsafe {
                    let q = quotient_avx512(
                        _mm512_loadu_si512(lanes.as_ptr().cast()),
                        _mm512_set1_epi64(d as i64),
                        _mm512_set1_pd(1.0 / d as f64),
                    );
                    std::mem::transmute(q)
                };
                for (&x, &q) in lanes.iter().zip(&got) {
                    assert_eq!(q, divisor.quotient(x), "{x} / {d}");
                    assert_eq!(q, x / d, "{x} / {d}");
                }
            }
        }
    }
}
