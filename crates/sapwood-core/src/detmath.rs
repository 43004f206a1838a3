//! Elementary functions from IEEE basic operations only, so every machine gets the same bits.
//!
//! The platform `exp`/`ln` may differ by an ulp between C libraries; values that decide a
//! model (base scores, the fixed-point lookup tables of the objectives) come from here instead.

const LN2: f64 = std::f64::consts::LN_2;

/// 2^k as f64, exact for k in -1022..=1023.
pub fn pow2(k: i32) -> f64 {
    let k = k.clamp(-1022, 1023);
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `x.round_ties_even()` without a library call. Baseline x86-64 has no rounding
/// instruction (SSE4.1), so the standard method calls `rint`, which cost 4% of training in the
/// per-row quantisation. Adding and subtracting 2^52 rounds |x| < 2^52 to an integer in the
/// default rounding mode (ties to even), and every f64 of magnitude 2^52 or more already is
/// one; NaN and infinities pass through. Equal to the standard method for every input.
#[inline(always)]
pub fn round_ties_even(x: f64) -> f64 {
    const BIG: f64 = 4_503_599_627_370_496.0; // 2^52
    let a = x.abs();
    if a < BIG {
        ((a + BIG) - BIG).copysign(x)
    } else {
        x
    }
}

/// [`round_ties_even`] for f32 (2^23 is where every f32 is an integer).
#[inline(always)]
pub fn round_ties_even_f32(x: f32) -> f32 {
    const BIG: f32 = 8_388_608.0; // 2^23
    let a = x.abs();
    if a < BIG {
        ((a + BIG) - BIG).copysign(x)
    } else {
        x
    }
}

/// e^x, reproducible to the bit on every machine (relative error below 1e-15).
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    if x < -745.0 {
        return 0.0;
    }
    let k = (x / LN2).round();
    let r = x - k * LN2;
    let mut term = 1.0f64;
    let mut sum = 1.0f64;
    for i in 1..=24 {
        term = term * r / i as f64;
        // |r| < 1, so no later term is larger than this one: once adding it either way
        // leaves the sum as it is, so would every later term, and the series can stop
        // with the bits the full 24 terms give (a term of either sign: past a power of
        // two the spacing below the sum is half the spacing above)
        if sum + term.abs() == sum && sum - term.abs() == sum {
            break;
        }
        sum += term;
    }
    let k = k as i32;
    // two steps keep each factor representable near the ends of the range
    let half = k / 2;
    sum * pow2(half) * pow2(k - half)
}

/// Natural logarithm for x > 0, reproducible to the bit (relative error below 1e-15).
pub fn ln(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_infinite() {
        return x;
    }
    // x = m * 2^e with m in [sqrt(1/2), sqrt(2))
    let mut e = 0i32;
    let mut m = x;
    while m >= std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    while m < std::f64::consts::FRAC_1_SQRT_2 {
        m *= 2.0;
        e -= 1;
    }
    // ln(m) = 2 atanh((m-1)/(m+1)), |z| < 0.172
    let z = (m - 1.0) / (m + 1.0);
    let z2 = z * z;
    let mut term = z;
    let mut sum = 0.0f64;
    let mut i = 1;
    while i < 60 {
        let t = term / i as f64;
        // every term has z's sign and none is larger than the one before: once one leaves
        // the sum as it is, so does every later one, and stopping gives the full series' bits
        if sum + t == sum {
            break;
        }
        sum += t;
        term *= z2;
        i += 2;
    }
    2.0 * sum + e as f64 * LN2
}

/// 2^x for real x, reproducible to the bit (through [`exp`]).
pub fn pow2_f(x: f64) -> f64 {
    exp(x * LN2)
}

/// log2(x) for x > 0, reproducible to the bit (through [`ln`]).
pub fn log2(x: f64) -> f64 {
    ln(x) / LN2
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn fast_rounding_equals_the_standard_method(bits in any::<u64>(), small in -1e7f64..1e7, half in -40_000i64..40_000) {
            for x in [f64::from_bits(bits), small, half as f64 + 0.5, half as f64 * 0.25] {
                let want = x.round_ties_even();
                let got = round_ties_even(x);
                prop_assert!(want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()), "{x:e}: {want:e} vs {got:e}");
                let xf = x as f32;
                let want = xf.round_ties_even();
                let got = round_ties_even_f32(xf);
                prop_assert!(want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()), "{xf:e}: {want:e} vs {got:e}");
            }
            let xf = f32::from_bits(bits as u32);
            let want = xf.round_ties_even();
            let got = round_ties_even_f32(xf);
            prop_assert!(want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()), "{xf:e}: {want:e} vs {got:e}");
        }
    }

    #[test]
    fn fast_rounding_at_the_edges() {
        let edges = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            4503599627370495.5,
            -4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            5e-324,
        ];
        for x in edges {
            assert_eq!(
                round_ties_even(x).to_bits(),
                x.round_ties_even().to_bits(),
                "{x:e}"
            );
        }
        let edges = [
            0.0f32,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            8388607.5,
            -8388607.5,
            4194303.5,
            8388608.0,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-45,
        ];
        for x in edges {
            assert_eq!(
                round_ties_even_f32(x).to_bits(),
                x.round_ties_even().to_bits(),
                "{x:e}"
            );
        }
        assert!(round_ties_even(f64::NAN).is_nan() && round_ties_even_f32(f32::NAN).is_nan());
    }

    #[test]
    fn exp_and_ln_agree_with_libm() {
        for i in -400..=400 {
            let x = i as f64 * 0.1 + 0.0371;
            let rel = (exp(x) - x.exp()).abs() / x.exp();
            assert!(rel < 1e-14, "exp({x}) rel err {rel}");
            let y = x.abs() + 1e-3;
            assert!(
                (ln(y) - y.ln()).abs() < 1e-14 * y.ln().abs().max(1.0),
                "ln({y})"
            );
        }
        assert_eq!(pow2(-3), 0.125);
    }

    /// exp as it was before the series stopped early: every one of the 24 terms.
    fn exp_full_series(x: f64) -> f64 {
        if x.is_nan() {
            return x;
        }
        if x > 709.0 {
            return f64::INFINITY;
        }
        if x < -745.0 {
            return 0.0;
        }
        let k = (x / LN2).round();
        let r = x - k * LN2;
        let (mut term, mut sum) = (1.0f64, 1.0f64);
        for i in 1..=24 {
            term = term * r / i as f64;
            sum += term;
        }
        let k = k as i32;
        let half = k / 2;
        sum * pow2(half) * pow2(k - half)
    }

    /// ln as it was before the series stopped early: every term below 60.
    fn ln_full_series(x: f64) -> f64 {
        let (mut e, mut m) = (0i32, x);
        while m >= std::f64::consts::SQRT_2 {
            m *= 0.5;
            e += 1;
        }
        while m < std::f64::consts::FRAC_1_SQRT_2 {
            m *= 2.0;
            e -= 1;
        }
        let z = (m - 1.0) / (m + 1.0);
        let (z2, mut term, mut sum, mut i) = (z * z, z, 0.0f64, 1);
        while i < 60 {
            sum += term / i as f64;
            term *= z2;
            i += 2;
        }
        2.0 * sum + e as f64 * LN2
    }

    proptest! {
        // models saved before the early stop must train and predict to the same bits:
        // every value the functions feed (the lookup tables, gains and discounts, base scores)
        // is unchanged
        #[test]
        fn series_stopped_early_give_the_full_series_bits(bits in any::<u64>(), small in -50.0f64..50.0, tiny in -1e-6f64..1e-6) {
            for x in [f64::from_bits(bits), small, tiny, small * 14.0] {
                let (want, got) = (exp_full_series(x), exp(x));
                prop_assert!(want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()), "exp({x:e}): {want:e} vs {got:e}");
                let y = x.abs();
                if y > 0.0 && y.is_finite() {
                    let (want, got) = (ln_full_series(y), ln(y));
                    prop_assert!(want.to_bits() == got.to_bits(), "ln({y:e}): {want:e} vs {got:e}");
                }
            }
        }
    }

    #[test]
    fn series_stopped_early_at_the_tables_and_ranks() {
        // the inputs the lookup tables and the ranking discounts use, every one of them
        for i in 0..=(40 << 10) {
            let x = -(i as f64) / 1024.0;
            assert_eq!(exp(x).to_bits(), exp_full_series(x).to_bits(), "exp({x})");
            assert_eq!(
                exp(-x).to_bits(),
                exp_full_series(-x).to_bits(),
                "exp({})",
                -x
            );
        }
        for r in 0..100_000 {
            let x = (r + 2) as f64;
            assert_eq!(ln(x).to_bits(), ln_full_series(x).to_bits(), "ln({x})");
        }
    }
}
