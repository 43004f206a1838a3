// The values each row adds to the histograms of the tree being grown (core: start_tree):
// exact fixed point X = round_ties_even(v * 2^shift) computed from the f32's bits, and in
// low-bit mode q = floor((X + noise) / 2^drop) with hashed noise. Values are i64 pairs.

@group(0) @binding(0) var<uniform> p: QuantParams;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
// (g lo, g hi, h lo, h hi) per row: what the histograms add
@group(0) @binding(2) var<storage, read_write> gh: array<u32>;
// the same layout: exact values kept for leaf refits in low-bit mode
@group(0) @binding(3) var<storage, read_write> exact: array<u32>;

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

// The core's `Scale::hist_value` for drop >= 1: noise is the top `drop` bits of hash64.
fn lowbit(x: vec2<u32>, drop: u32, key: u32, row: vec2<u32>) -> vec2<u32> {
    let lo = hash32(key, row);
    let hi = mix32(lo ^ 0x68e31da4u);
    var noise: vec2<u32>;
    if (drop <= 32u) {
        noise = vec2<u32>(hi >> (32u - drop), 0u);
    } else {
        let s = 64u - drop;
        noise = vec2<u32>((lo >> s) | (hi << (32u - s)), hi >> s);
    }
    return sar64(add64(x, noise), drop);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = gid.x; i < p.n; i = i + nwg.x * WG) {
        let j = 2u * (i * p.k + p.group);
        let xg = quantise_exact(grad[j], p.g_shift);
        let xh = quantise_exact(grad[j + 1u], p.h_shift);
        var qg = xg;
        var qh = xh;
        if (p.lowbit != 0u) {
            let row = global_row(p.row_lo, p.row_hi, i);
            if (p.g_drop != 0u) {
                qg = lowbit(xg, p.g_drop, p.g_key, row);
            }
            if (p.h_drop != 0u) {
                qh = lowbit(xh, p.h_drop, p.h_key, row);
            }
            exact[4u * i] = xg.x;
            exact[4u * i + 1u] = xg.y;
            exact[4u * i + 2u] = xh.x;
            exact[4u * i + 3u] = xh.y;
        }
        gh[4u * i] = qg.x;
        gh[4u * i + 1u] = qg.y;
        gh[4u * i + 2u] = qh.x;
        gh[4u * i + 3u] = qh.y;
    }
}
