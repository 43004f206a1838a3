// Helpers shared by every kernel; the loader prepends this file (and params.wgsl) to each
// kernel's source, so it holds no bindings and no entry point.
//
// Every float decision is made on bits: a shader compiler may assume that NaN and subnormals
// never occur in floating-point comparisons, while the CPU reference sees them.

// Threads per workgroup of every kernel: the portable minimum of 256 invocations.
const WG: u32 = 256u;

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
