// Helpers shared by every kernel; the loader prepends this file (and params.cuh) to each
// kernel's source, so it holds no entry point. No CUDA header is included: NVRTC compiles
// these sources without a toolkit, so the integer types are spelled out here.
//
// Every float decision is made on bits, and every f32/f64 operation of the bit-exact
// contract is an explicit round-to-nearest intrinsic (__fadd_rn, __fmul_rn, ...), which the
// compiler never fuses; the loader also passes --fmad=false, --prec-div=true,
// --prec-sqrt=true and --ftz=false.

typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

// Threads per block of every kernel.
#define WG 256u

// Whether an f32 is NaN.
__device__ __forceinline__ bool is_nan_f32(float x) {
    return (__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u;
}

// Float-to-integer conversions, audited against Rust's `as` (saturating, NaN to 0): the PTX
// ISA rounds as asked, sends out-of-range values and infinities to the ends of the range
// (`.sat` is implied for float-to-integer), but gives NaN MININT (the top bit) when the source
// is f64 or the destination 64-bit, and 0 only otherwise. Every conversion of the first kind
// goes through these helpers, whose NaN guard sits in the same inline-PTX block as the `cvt`
// so no optimisation can separate them; tests/nvrtc.rs finds every float-to-integer `cvt` in
// the PTX of every kernel and fails on one that is not guarded so, or not in its audit table.

// round_ties_even(x) as i64, saturating, NaN to 0: Rust's `x.round_ties_even() as i64`.
__device__ __forceinline__ i64 f64_to_i64_rn(double x) {
#if defined(__CUDA_ARCH__)
    i64 r;
    asm("{\n\t"
        ".reg .pred p_nan;\n\t"
        "setp.nan.f64 p_nan, %1, %1;\n\t"
        "cvt.rni.s64.f64 %0, %1;\n\t"
        "@p_nan mov.b64 %0, 0;\n\t"
        "}"
        : "=l"(r)
        : "d"(x));
    return r;
#else
    // The CPU simulator's twin (sim/sim.h): the same value without PTX, independent of the
    // rounding mode. Truncation is exact below 2^63 in magnitude, and the fraction it drops,
    // x - trunc(x), is exact too; from 2^52 up every double is an integer.
    if (x != x) {
        return 0;
    }
    if (x >= 9223372036854775808.0) {
        return (i64)0x7fffffffffffffffll;
    }
    if (x <= -9223372036854775808.0) {
        return -(i64)0x7fffffffffffffffll - 1;
    }
    i64 r = (i64)x;
    double d = x - (double)r;
    if (d > 0.5 || (d == 0.5 && (r & 1) != 0)) {
        r += 1;
    } else if (d < -0.5 || (d == -0.5 && (r & 1) != 0)) {
        r -= 1;
    }
    return r;
#endif
}

// The core's `quantise_exact`: the product of an f32 and a power of two is exact in f64 (the
// host clamps the shift as detmath::pow2 does). cvt.rni.s64.f64 saturates, but gives a NaN
// i64::MIN where Rust gives 0: f64_to_i64_rn guards it.
__device__ __forceinline__ i64 quantise_exact(float v, double scale) {
    return f64_to_i64_rn(__dmul_rn((double)v, scale));
}

// The core's bound on a square term's root: 2^SQUARE_ROOT_BITS.
#define SQUARE_BOUND 32768ll

// A row's term of its node's sum of squares (the core's `square_term`): r², r the exact
// fixed point of v (scale 2^shift) clamped to ±2^15, so the term is at most 2^30.
__device__ __forceinline__ u64 square_term(float v, double scale) {
    i64 r = quantise_exact(v, scale);
    r = r < -SQUARE_BOUND ? -SQUARE_BOUND : (r > SQUARE_BOUND ? SQUARE_BOUND : r);
    return (u64)(r * r);
}

// trunc(x) as u32, saturating, NaN to 0: Rust's `x as u32` (the PTX gives NaN 0 here too;
// the guard states it rather than relying on it).
__device__ __forceinline__ u32 f32_to_u32_rz(float x) {
    return is_nan_f32(x) ? 0u : __float2uint_rz(x);
}

// Subnormals and -0 become +0, as the core's `ftz` does.
__device__ __forceinline__ float ftz(float x) {
    return (__float_as_uint(x) & 0x7fffffffu) < 0x00800000u ? 0.0f : x;
}

// The core's `hash::mix32` (lowbias32).
__device__ __forceinline__ u32 mix32(u32 x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

// The core's `HashKey::hash32`.
__device__ __forceinline__ u32 hash32(u32 key, u64 index) {
    return mix32(mix32(key ^ (u32)index) ^ (u32)(index >> 32));
}

// The core's `HashKey::hash64`.
__device__ __forceinline__ u64 hash64(u32 key, u64 index) {
    u32 lo = hash32(key, index);
    u32 hi = mix32(lo ^ 0x68e31da4u);
    return ((u64)hi << 32) | (u64)lo;
}
