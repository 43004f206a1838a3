//! The logistic loss's gradients sixteen rows at a time, in 512-bit lanes where the CPU has
//! AVX-512: the same IEEE operations as the row-by-row code, so the same bits (but for a
//! NaN's sign and payload, which no IEEE operation fixes: a NaN label or weight gives a NaN
//! gradient either way, which quantises to 0 and never counts as a maximum).
#![allow(unsafe_code)]

use super::{ftz, logistic_with, rows_by};

/// Writes the logistic gradient and hessian of every row (`logistic_with` of each, label and
/// weight flushed as [`rows_by`] flushes them) into `out`, sixteen rows at a time where the
/// CPU has AVX-512 F and `t` is the sigmoid table.
pub(super) fn logistic_rows(
    t: &[u32],
    margins: &[f32],
    labels: &[f32],
    weights: Option<&[f32]>,
    out: &mut [[f32; 2]],
) {
    #[cfg(target_arch = "x86_64")]
    if t.len() == TABLE_LEN
        && crate::simd::avx512_allowed()
        && std::arch::is_x86_feature_detected!("avx512f")
    {
        let n = out.len().min(margins.len()).min(labels.len());
        let n = weights.map_or(n, |w| n.min(w.len()));
        let whole = n / LANES * LANES;
        // SAFETY: the CPU has AVX-512 F (checked above); the table has TABLE_LEN entries.
        unsafe {
            logistic_avx512(
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
    rows_by(margins, labels, weights, out, |m, y, w| {
        logistic_with(t, m, y, w)
    });
}

/// Rows a step.
const LANES: usize = 16;

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
    let abs_mask = _mm512_set1_epi32(0x7fff_ffff);
    let smallest = _mm512_set1_ps(f32::MIN_POSITIVE);
    let ftz = |x: __m512| {
        let a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), abs_mask));
        // NaN compares false, as `x.abs() < MIN_POSITIVE` does
        _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, smallest), zero)
    };
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
    let unweighted = _mm512_set1_ps(ftz_scalar_one());
    let even = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let odd = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (s, o) in out.chunks_exact_mut(LANES).enumerate() {
        let at = s * LANES;
        // SAFETY: every slice holds whole steps (the caller cuts them), so each unaligned
        // load reads 16 f32 inside it and each store writes 16 pairs inside `o`; every
        // gathered index is at most TABLE_LEN - 1 (shown below).
        unsafe {
            let m = _mm512_loadu_ps(margins.as_ptr().add(at));
            let y = ftz(_mm512_loadu_ps(labels.as_ptr().add(at)));
            let w = match weights {
                Some(w) => ftz(_mm512_loadu_ps(w.as_ptr().add(at))),
                None => unweighted,
            };
            let m = _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(m, m), zero);
            let m = _mm512_min_ps(_mm512_max_ps(ftz(m), lo), hi);
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
            let g = ftz(_mm512_mul_ps(ftz(_mm512_sub_ps(p, y)), w));
            let h = _mm512_max_ps(_mm512_mul_ps(p, _mm512_sub_ps(one, p)), min_hessian);
            let h = ftz(_mm512_mul_ps(h, w));
            let dst = o.as_mut_ptr().cast::<f32>();
            _mm512_storeu_ps(dst, _mm512_permutex2var_ps(g, even, h));
            _mm512_storeu_ps(dst.add(LANES), _mm512_permutex2var_ps(g, odd, h));
        }
    }
}

/// The weight of an unweighted row, flushed as [`rows_by`] flushes it.
fn ftz_scalar_one() -> f32 {
    ftz(1.0)
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

    /// `logistic_avx512` on the whole steps of the rows and the row-by-row loss on all of
    /// them, or None where the CPU lacks AVX-512 F (the lanes are then never used).
    fn both(m: &[f32], y: &[f32], w: Option<&[f32]>) -> Option<[Vec<[f32; 2]>; 2]> {
        let t = super::super::sigmoid_table();
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("no AVX-512 F on this CPU: the lanes are not compared");
            return None;
        }
        let whole = m.len() / LANES * LANES;
        let mut lanes = vec![[7.0f32; 2]; m.len()];
        // SAFETY: the CPU has AVX-512 F; the slices hold whole steps; the table is the
        // sigmoid table
        unsafe {
            logistic_avx512(
                t,
                &m[..whole],
                &y[..whole],
                w.map(|w| &w[..whole]),
                &mut lanes[..whole],
            )
        };
        // the rest as `logistic_rows` does it, through the dispatch
        logistic_rows(
            t,
            &m[whole..],
            &y[whole..],
            w.map(|w| &w[whole..]),
            &mut lanes[whole..],
        );
        let mut plain = vec![[7.0f32; 2]; m.len()];
        rows_by(m, y, w, &mut plain, |m, y, w| logistic_with(t, m, y, w));
        Some([lanes, plain])
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
            let Some([lanes, plain]) = both(&m, &y, weighted.then_some(&w[..])) else {
                return Ok(());
            };
            for (j, (a, b)) in lanes.iter().zip(&plain).enumerate() {
                prop_assert_eq!(
                    [bits(a[0]), bits(a[1])],
                    [bits(b[0]), bits(b[1])],
                    "row {} margin {} label {}", j, m[j], y[j]
                );
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
            let Some([lanes, plain]) = both(&m, &ys, weighted.then_some(&w[..])) else {
                return;
            };
            for (j, (a, b)) in lanes.iter().zip(&plain).enumerate() {
                assert_eq!(
                    [a[0].to_bits(), a[1].to_bits()],
                    [b[0].to_bits(), b[1].to_bits()],
                    "margin {} label {y}",
                    m[j]
                );
            }
        }
    }
}
