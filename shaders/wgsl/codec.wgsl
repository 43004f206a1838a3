// Helpers of the histogram encoders (pack.wgsl, groups.wgsl): their parameter block and the
// 64-bit shifts and zigzag of the codecs in sapwood-collective, on (lo, hi) pairs of u32.

// Parameters of both encoders. `values` is the length of every message (2 * total_bins for
// a node's histogram), `messages` how many follow one another in the source, `groups` the
// groups of 32 values of all of them (groups.wgsl), `write` 0 for the pass that measures
// each group and 1 for the pass that writes it.
struct CodecParams {
    values: u32,
    messages: u32,
    groups: u32,
    write: u32,
}

// Logical shift left by s in 0..63 (WGSL shifts by 32 or more are not defined).
fn shl64(a: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) {
        return a;
    }
    if (s >= 32u) {
        return vec2<u32>(0u, a.x << (s - 32u));
    }
    return vec2<u32>(a.x << s, (a.y << s) | (a.x >> (32u - s)));
}

// Logical shift right by s in 0..63.
fn shr64(a: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) {
        return a;
    }
    if (s >= 32u) {
        return vec2<u32>(a.y >> (s - 32u), 0u);
    }
    return vec2<u32>((a.x >> s) | (a.y << (32u - s)), a.y >> s);
}

// The codecs' zigzag: (v << 1) ^ (v >> 63), so that small magnitudes of either sign are
// small unsigned numbers.
fn zigzag64(v: vec2<u32>) -> vec2<u32> {
    let sign = u32(i32(v.y) >> 31u);
    return vec2<u32>((v.x << 1u) ^ sign, ((v.y << 1u) | (v.x >> 31u)) ^ sign);
}

// Trailing zero bits of a nonzero 64-bit value.
fn ctz64(a: vec2<u32>) -> u32 {
    if (a.x != 0u) {
        return countTrailingZeros(a.x);
    }
    return 32u + countTrailingZeros(a.y);
}

// Bits needed for an unsigned 64-bit value (0 for 0).
fn bit_len64(a: vec2<u32>) -> u32 {
    if (a.y != 0u) {
        return 64u - countLeadingZeros(a.y);
    }
    return 32u - countLeadingZeros(a.x);
}
