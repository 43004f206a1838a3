//! A row of ranking pairs eight pairs at a time, in 512-bit lanes where the CPU has
//! AVX-512: the same IEEE operations as [`PairTerms::terms`] and the same sums as
//! [`PairTerms::add_row_with`], so the same bits (but for a NaN's sign and payload, which
//! no IEEE operation fixes).
#![allow(unsafe_code)]

use super::{lanes_total, PairLogistic, PairTerms, RankLoss, RankSums, SUM_LANES};

/// Entries of the sigmoid table: one every 2^-8 over [-20, 20], both ends included.
const TABLE_LEN: usize =
    ((2 * crate::objective::SIGMOID_RANGE as usize) << crate::objective::SIGMOID_STEP_BITS) + 1;

// the lanes shift and mask by 16: the fraction bits of a table step
const _: () =
    assert!(crate::objective::MARGIN_FRAC_BITS - crate::objective::SIGMOID_STEP_BITS == 16);

/// The sigmoid table as the lanes read it: entry i holds t[i] in its low half and
/// t[i + 1] − t[i] in its high half (0 for the last), so that one 64-bit gather a lane
/// fetches what two 32-bit gathers did (the gathers were most of the lanes' time).
fn steps() -> &'static [u64] {
    static STEPS: std::sync::LazyLock<Vec<u64>> = std::sync::LazyLock::new(|| {
        let t = crate::objective::sigmoid_table();
        (0..t.len())
            .map(|i| {
                let next = t[(i + 1).min(t.len() - 1)];
                u64::from(t[i]) | (u64::from(next.wrapping_sub(t[i])) << 32)
            })
            .collect()
    });
    &STEPS
}

/// One query's ranks as the lanes read them: labels and scores widened to f64 (exactly),
/// so that a pair's eight lanes load as one vector each.
pub(super) struct PairLanes<'a> {
    terms: &'a PairTerms<'a>,
    steps: &'static [u64],
    ys: Vec<f64>,
    ss: Vec<f64>,
}

impl<'a> PairLanes<'a> {
    /// The lanes of `terms`, or None where they do not apply: a CPU without AVX-512 F,
    /// `SAPWOOD_PORTABLE`, MAP's pairs (a walk over the ranks between), another logistic
    /// than [`crate::objective::sigmoid_table`], or slices shorter than the query.
    pub(super) fn new(terms: &'a PairTerms<'a>) -> Option<Self> {
        let PairLogistic::Table(table) = terms.logistic else {
            return None;
        };
        let sigmoid = crate::objective::sigmoid_table();
        if terms.loss == RankLoss::Map || !std::ptr::eq(table, sigmoid) || !available() {
            return None;
        }
        debug_assert_eq!(sigmoid.len(), TABLE_LEN);
        // the lanes load every rank's entry of these unchecked
        let n = terms.ys.len();
        let ranked = terms.ss.len() == n && terms.discounts.len() >= n;
        if !ranked || (terms.loss == RankLoss::Ndcg && terms.gains.len() < n) {
            return None;
        }
        Some(PairLanes {
            terms,
            steps: steps(),
            ys: terms.ys.iter().map(|&y| y as f64).collect(),
            ss: terms.ss.iter().map(|&s| s as f64).collect(),
        })
    }

    /// [`PairTerms::add_row_with`] in lanes: the same sums, bit for bit.
    pub(super) fn add_row(&self, a: usize, sums: &mut RankSums, sum_lambda: &mut f64) {
        let n = self.ys.len();
        assert!(
            a < n && sums.g.len() >= n && sums.h.len() >= n,
            "rank {a} of {n}, sums for {} and {} ranks",
            sums.g.len(),
            sums.h.len()
        );
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `new` checked that the CPU has AVX-512 F and AVX2, that the logistic is
        // the sigmoid table (whose steps have TABLE_LEN entries) and that every slice the
        // lanes read holds n ranks; the sums hold n ranks (above)
        unsafe {
            self.add_row_avx512(a, sums, sum_lambda)
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.terms
            .add_row_with(a, sums, sum_lambda, |gap| self.terms.logistic.at(gap))
    }

    /// [`Self::add_row`] on the ranks `a + 1..n`, eight at a time (lane j of a step holds
    /// the rank a + 1 + 8k + j, as [`PairTerms::add_row_with`] sums it), the last step
    /// masked:
    /// - the pair's Δ as `terms` computes it for (hi, lo) — for NDCG |(gₐ − g_b)(dₐ − d_b)|,
    ///   which a swap of the two only negates inside the absolute value — then damped by
    ///   the score gap of (hi, lo), taken as `terms` takes it (one subtraction a way, the
    ///   higher label's score first);
    /// - the logistic as [`crate::objective::sigmoid_fixed_in`] reads the table: the gap
    ///   rounded to f32, NaN to 0, flushed, clamped to ±20, times 2^24 (exact), converted
    ///   to i32 to nearest even, then the index, the fraction and the interpolation in u32
    ///   (from [`steps`]: the last entry's step is 0, its fraction 0 too, which is the
    ///   scalar code's value there), clamped to [1, 2^24 − 1] and scaled by 2^-24 (exact);
    /// - λ and h in the order `terms` multiplies, then zeros for equal labels (and the
    ///   masked lanes), which change no sum: a sum that starts at +0 and adds terms is
    ///   never -0, so adding +0 leaves it as it is.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2")]
    unsafe fn add_row_avx512(&self, a: usize, sums: &mut RankSums, sum_lambda: &mut f64) {
        use std::arch::x86_64::*;
        let t = self.terms;
        let n = self.ys.len();
        let ndcg = t.loss == RankLoss::Ndcg;
        let (ya, sa) = (_mm512_set1_pd(self.ys[a]), _mm512_set1_pd(self.ss[a]));
        let (ga, da) = if ndcg {
            (t.gains[a], t.discounts[a])
        } else {
            (0.0, 0.0)
        };
        let (ga, da) = (_mm512_set1_pd(ga), _mm512_set1_pd(da));
        let inv_idcg = _mm512_set1_pd(t.inv_idcg);
        let one = _mm512_set1_pd(1.0);
        let scale = _mm512_set1_pd(t.hessian_scale);
        let damping = _mm512_set1_pd(0.01);
        let min_hessian = _mm512_set1_pd(1e-16);
        let prob_unit = _mm512_set1_pd(crate::objective::PROB_UNIT);
        let abs = |x: __m512d| _mm512_abs_pd(x);
        let neg = |x: __m512d| {
            _mm512_castsi512_pd(_mm512_xor_si512(
                _mm512_castpd_si512(x),
                _mm512_set1_epi64(i64::MIN),
            ))
        };
        // the f32 part of the logistic, on eight lanes
        let range = crate::objective::SIGMOID_RANGE as f32;
        let (lo, hi) = (_mm256_set1_ps(-range), _mm256_set1_ps(range));
        let abs_mask = _mm256_set1_epi32(0x7fff_ffff);
        let smallest = _mm256_set1_ps(f32::MIN_POSITIVE);
        let zero_ps = _mm256_setzero_ps();
        let unit = _mm256_set1_ps((1u32 << crate::objective::MARGIN_FRAC_BITS) as f32);
        let offset = _mm256_set1_epi32(
            crate::objective::SIGMOID_RANGE << crate::objective::MARGIN_FRAC_BITS,
        );
        let frac_mask = _mm256_set1_epi32((1 << 16) - 1);
        let one_i = _mm256_set1_epi32(1);
        let top = _mm256_set1_epi32(crate::objective::ONE as i32 - 1);
        let steps = self.steps.as_ptr().cast::<i64>();
        let zero = _mm512_setzero_pd();
        let (mut own_g, mut own_h, mut own_l) = (zero, zero, zero);
        let mut b = a + 1;
        while b < n {
            let left = n - b;
            let mask: __mmask8 = if left >= 8 { 0xff } else { (1u8 << left) - 1 };
            // SAFETY: the mask covers only ranks below n, inside every slice (each holds n
            // entries); every gathered index is at most TABLE_LEN - 1, the steps' last
            // (the margin is clamped to ±20, so u >> 16 ≤ 40 · 2^8)
            unsafe {
                let yb = _mm512_maskz_loadu_pd(mask, self.ys.as_ptr().add(b));
                let sb = _mm512_maskz_loadu_pd(mask, self.ss.as_ptr().add(b));
                let equal = _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(ya, yb);
                let a_higher = _mm512_cmp_pd_mask::<_CMP_GT_OQ>(ya, yb);
                let delta = if ndcg {
                    let gb = _mm512_maskz_loadu_pd(mask, t.gains.as_ptr().add(b));
                    let db = _mm512_maskz_loadu_pd(mask, t.discounts.as_ptr().add(b));
                    abs(_mm512_mul_pd(
                        abs(_mm512_mul_pd(_mm512_sub_pd(ga, gb), _mm512_sub_pd(da, db))),
                        inv_idcg,
                    ))
                } else {
                    one
                };
                let diff =
                    _mm512_mask_mov_pd(_mm512_sub_pd(sb, sa), a_higher, _mm512_sub_pd(sa, sb));
                let delta = if t.damp {
                    _mm512_div_pd(delta, _mm512_add_pd(abs(diff), damping))
                } else {
                    delta
                };
                // the logistic of the gap, from the table
                let m = _mm512_cvtpd_ps(diff);
                let m = _mm256_blendv_ps(m, zero_ps, _mm256_cmp_ps::<_CMP_UNORD_Q>(m, m));
                let m_abs = _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(m), abs_mask));
                let m = _mm256_blendv_ps(m, zero_ps, _mm256_cmp_ps::<_CMP_LT_OQ>(m_abs, smallest));
                let m = _mm256_min_ps(_mm256_max_ps(m, lo), hi);
                let fixed = _mm256_cvtps_epi32(_mm256_mul_ps(m, unit));
                let u = _mm256_add_epi32(fixed, offset);
                let i = _mm256_srli_epi32::<16>(u);
                let f = _mm256_and_si256(u, frac_mask);
                let entry = _mm512_i32gather_epi64::<8>(i, steps);
                let t0 = _mm512_cvtepi64_epi32(entry);
                let rise = _mm512_cvtepi64_epi32(_mm512_srli_epi64::<32>(entry));
                let step = _mm256_srli_epi32::<16>(_mm256_mullo_epi32(rise, f));
                let p = _mm256_add_epi32(t0, step);
                let p = _mm256_min_epu32(_mm256_max_epu32(p, one_i), top);
                let sigmoid = _mm512_mul_pd(_mm512_cvtepi32_pd(p), prob_unit);
                let lambda = _mm512_mul_pd(_mm512_sub_pd(sigmoid, one), delta);
                let hess = _mm512_mul_pd(
                    _mm512_mul_pd(
                        _mm512_max_pd(
                            _mm512_mul_pd(sigmoid, _mm512_sub_pd(one, sigmoid)),
                            min_hessian,
                        ),
                        delta,
                    ),
                    scale,
                );
                let signed = _mm512_mask_mov_pd(neg(lambda), a_higher, lambda);
                let keep = !equal & mask;
                let (signed, hess, lambda) = (
                    _mm512_maskz_mov_pd(keep, signed),
                    _mm512_maskz_mov_pd(keep, hess),
                    _mm512_maskz_mov_pd(keep, lambda),
                );
                own_g = _mm512_add_pd(own_g, signed);
                own_h = _mm512_add_pd(own_h, hess);
                own_l = _mm512_add_pd(own_l, lambda);
                let g = sums.g.as_mut_ptr().add(b);
                let h = sums.h.as_mut_ptr().add(b);
                _mm512_mask_storeu_pd(
                    g,
                    mask,
                    _mm512_sub_pd(_mm512_maskz_loadu_pd(mask, g), signed),
                );
                _mm512_mask_storeu_pd(h, mask, _mm512_add_pd(_mm512_maskz_loadu_pd(mask, h), hess));
            }
            b += 8;
        }
        let lanes = |v: __m512d| {
            let mut out = [0.0f64; SUM_LANES];
            // SAFETY: eight f64 into eight
            unsafe { _mm512_storeu_pd(out.as_mut_ptr(), v) };
            lanes_total(&out)
        };
        sums.g[a] += lanes(own_g);
        sums.h[a] += lanes(own_h);
        *sum_lambda -= lanes(own_l);
    }
}

/// Whether the lanes may run here.
fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::avx512_allowed()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores that meet every case of the logistic: ties, the table's ends and beyond,
    /// tiny gaps and subnormals; with `non_finite`, infinities and NaN too (whose NaN
    /// terms then reach most sums, so the finite scores are checked on their own).
    fn scores(n: usize, seed: u64, non_finite: bool) -> Vec<f32> {
        let finite = [
            0.0f32, -0.0, 20.0, -20.0, 19.999998, 1e-40, -1e-40, 1e30, 0.37,
        ];
        let more = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
        let special: Vec<f32> = if non_finite {
            finite.iter().chain(&more).copied().collect()
        } else {
            finite.to_vec()
        };
        (0..n)
            .map(|i| {
                let h = crate::hash::hash64(seed, crate::hash::Stream::RankPairs, 0, i as u64);
                if h.is_multiple_of(5) {
                    special[(h / 5 % special.len() as u64) as usize]
                } else {
                    ((h >> 20) % 4001) as f32 / 100.0 - 20.0
                }
            })
            .collect()
    }

    #[test]
    fn lanes_give_the_rows_sums_bit_for_bit() {
        if !available() {
            eprintln!("no AVX-512 F here (or SAPWOOD_PORTABLE): the lanes are not compared");
            return;
        }
        let table = crate::objective::sigmoid_table();
        let cases = [
            (1usize, 1u64),
            (2, 2),
            (9, 3),
            (16, 4),
            (17, 5),
            (203, 6),
            (203, 7),
        ];
        for ((n, seed), non_finite) in cases.into_iter().flat_map(|c| [(c, false), (c, true)]) {
            let ss = scores(n, seed, non_finite);
            let ys: Vec<f32> = (0..n).map(|i| ((i * 7 + i / 3) % 5) as f32).collect();
            let gains: Vec<f64> = ys
                .iter()
                .map(|&y| super::super::Gains::Exponential.of(y))
                .collect();
            let discounts = super::super::discounts(n);
            let each = [RankLoss::Ndcg, RankLoss::Pairwise]
                .into_iter()
                .flat_map(|l| [(l, false), (l, true)])
                .flat_map(|c| [(c, 2.0), (c, 1.0)]);
            for ((loss, damp), hessian_scale) in each {
                {
                    let terms = PairTerms {
                        loss,
                        ys: &ys,
                        ss: &ss,
                        gains: &gains,
                        discounts: &discounts,
                        inv_idcg: 0.0123,
                        damp,
                        n_rel: &[],
                        acc: &[],
                        logistic: PairLogistic::Table(table),
                        hessian_scale,
                    };
                    let lanes = PairLanes::new(&terms).expect("lanes for the sigmoid table");
                    let fresh = || RankSums {
                        g: vec![0.0; n],
                        h: vec![0.0; n],
                    };
                    let (mut want, mut got) = (fresh(), fresh());
                    let (mut want_l, mut got_l) = (0.0f64, 0.0f64);
                    for a in 0..n {
                        terms.add_row_with(a, &mut want, &mut want_l, |gap| {
                            PairLogistic::Table(table).at(gap)
                        });
                        lanes.add_row(a, &mut got, &mut got_l);
                        let same = |w: f64, g: f64| {
                            w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan())
                        };
                        assert!(
                            same(want_l, got_l),
                            "{loss:?} damp {damp} scale {hessian_scale} n {n} row {a}"
                        );
                        for r in 0..n {
                            assert!(
                                same(want.g[r], got.g[r]) && same(want.h[r], got.h[r]),
                                "{loss:?} damp {damp} scale {hessian_scale} n {n} after row \
                                 {a}, rank {r}: \
                                 {} {} vs {} {} (scores {} {}, labels {} {})",
                                want.g[r],
                                want.h[r],
                                got.g[r],
                                got.h[r],
                                ss[a],
                                ss[r],
                                ys[a],
                                ys[r]
                            );
                        }
                    }
                }
            }
        }
        // the lanes are not taken for MAP nor for another logistic
        let exact = |d: f64| 1.0 / (1.0 + (-d).exp());
        let base = PairTerms {
            loss: RankLoss::Map,
            ys: &[1.0, 0.0],
            ss: &[0.0, 1.0],
            gains: &[],
            discounts: &[],
            inv_idcg: 1.0,
            damp: false,
            n_rel: &[],
            acc: &[],
            logistic: PairLogistic::Table(table),
            hessian_scale: 2.0,
        };
        assert!(PairLanes::new(&base).is_none());
        let function = PairTerms {
            loss: RankLoss::Pairwise,
            logistic: PairLogistic::Function(&exact),
            ..base
        };
        assert!(PairLanes::new(&function).is_none());
        let copy = table.to_vec();
        let copied = PairTerms {
            loss: RankLoss::Pairwise,
            logistic: PairLogistic::Table(&copy),
            ..base
        };
        assert!(PairLanes::new(&copied).is_none());
    }
}
