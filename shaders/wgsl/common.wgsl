// Helpers shared by every kernel; the loader prepends this file (and params.wgsl) to each
// kernel's source, so it holds no bindings and no entry point.
//
// Every float decision is made on bits: a shader compiler may assume that NaN and subnormals
// never occur in floating-point comparisons, while the CPU reference sees them.

// Threads per workgroup of every kernel: the portable minimum of 256 invocations.
const WG: u32 = 256u;

// The core's bound on a square term's root: 2^SQUARE_ROOT_BITS.
const SQUARE_BOUND: u32 = 32768u;

// Whether an f32 is NaN.
fn is_nan_f32(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// Subnormals and -0 become +0, as the core's `ftz` does.
fn ftz(x: f32) -> f32 {
    if ((bitcast<u32>(x) & 0x7fffffffu) < 0x00800000u) {
        return 0.0;
    }
    return x;
}

// Two's complement 64-bit integers are (lo, hi) pairs of u32: portable WGSL has no i64.
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn neg64(a: vec2<u32>) -> vec2<u32> {
    let lo = ~a.x + 1u;
    return vec2<u32>(lo, ~a.y + select(0u, 1u, lo == 0u));
}

// Arithmetic shift right by s in 0..63 (WGSL shifts by 32 or more are not defined).
fn sar64(a: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) {
        return a;
    }
    let sign = u32(i32(a.y) >> 31u);
    if (s >= 32u) {
        return vec2<u32>(u32(i32(a.y) >> (s - 32u)), sign);
    }
    return vec2<u32>((a.x >> s) | (a.y << (32u - s)), u32(i32(a.y) >> s));
}

const I64_MAX: vec2<u32> = vec2<u32>(0xffffffffu, 0x7fffffffu);
const I64_MIN: vec2<u32> = vec2<u32>(0u, 0x80000000u);

// The core's `quantise_exact`: (v as f64 * 2^shift).round_ties_even() as i64, saturating
// like Rust's `as` (NaN to 0, +inf and values from 2^63 up to i64::MAX, -inf and values below
// -2^63 to i64::MIN). The f32 is m * 2^e with an integer m < 2^24, so the product is exact and
// only the final rounding (or shifting) needs care. No float-to-integer conversion is used:
// WGSL's saturating u32()/i32() leave NaN to the driver.
fn quantise_exact(v: f32, shift: i32) -> vec2<u32> {
    let bits = bitcast<u32>(v);
    let neg = (bits >> 31u) != 0u;
    let e_bits = (bits >> 23u) & 0xffu;
    var m = bits & 0x7fffffu;
    if (e_bits == 0xffu) {
        if (m != 0u) {
            return vec2<u32>(0u, 0u);
        }
        return select(I64_MAX, I64_MIN, neg);
    }
    var e = -149;
    if (e_bits != 0u) {
        m = m | 0x800000u;
        e = i32(e_bits) - 150;
    }
    if (m == 0u) {
        return vec2<u32>(0u, 0u);
    }
    // detmath::pow2 clamps the shift to -1022..=1023 (which decides nothing for an f32: from
    // 2^-1022 every product rounds to 0, from 2^1023 every one saturates); clamping here too
    // keeps e + shift from wrapping for shifts near i32::MIN or i32::MAX
    let s = e + clamp(shift, -1022, 1023);
    var mag = vec2<u32>(0u, 0u);
    if (s >= 0) {
        let len = 32u - countLeadingZeros(m);
        if (u32(s) + len > 63u) {
            return select(I64_MAX, I64_MIN, neg);
        }
        if (s >= 32) {
            mag = vec2<u32>(0u, m << u32(s - 32));
        } else if (s == 0) {
            mag = vec2<u32>(m, 0u);
        } else {
            mag = vec2<u32>(m << u32(s), m >> u32(32 - s));
        }
    } else {
        let r = u32(-s);
        // m < 2^24: for r >= 32 the value is below 2^-8 and rounds to 0
        if (r < 32u) {
            var q = m >> r;
            let rem = m & ((1u << r) - 1u);
            let half = 1u << (r - 1u);
            if (rem > half || (rem == half && (q & 1u) == 1u)) {
                q = q + 1u;
            }
            mag = vec2<u32>(q, 0u);
        }
    }
    if (neg) {
        return neg64(mag);
    }
    return mag;
}

// A row's term of its node's sum of squares (the core's `square_term`): r², r the exact
// fixed point of v clamped to ±2^15, so the term (at most 2^30) fits a u32.
fn square_term(v: f32, shift: i32) -> u32 {
    var r = quantise_exact(v, shift);
    if ((r.y >> 31u) != 0u) {
        r = neg64(r);
    }
    var m = r.x;
    if (r.y != 0u || m > SQUARE_BOUND) {
        m = SQUARE_BOUND;
    }
    return m * m;
}

// An exact 64-bit atomic add of v to a (lo, hi) pair of u32 atomics is `atomicAdd(lo, v.x)`,
// then adding this word (v.y plus lo's carry, from lo's old value) to hi, skipped when 0.
// Only the arithmetic is shared: WGSL (and naga) reject storage and workgroup pointer
// parameters, so the atomics stay at the call sites.
fn carry_into_hi(old_lo: u32, v: vec2<u32>) -> u32 {
    return v.y + select(0u, 1u, old_lo + v.x < old_lo);
}

// The core's `hash::mix32` (lowbias32).
fn mix32(x0: u32) -> u32 {
    var x = x0;
    x = x ^ (x >> 16u);
    x = x * 0x7feb352du;
    x = x ^ (x >> 15u);
    x = x * 0x846ca68bu;
    x = x ^ (x >> 16u);
    return x;
}

// The core's `HashKey::hash32` of a 64-bit index given as (lo, hi).
fn hash32(key: u32, index: vec2<u32>) -> u32 {
    return mix32(mix32(key ^ index.x) ^ index.y);
}

// Global row index (row_offset + i) as a 64-bit pair.
fn global_row(offset_lo: u32, offset_hi: u32, i: u32) -> vec2<u32> {
    return add64(vec2<u32>(offset_lo, offset_hi), vec2<u32>(i, 0u));
}
