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
        sum += term / i as f64;
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
}
