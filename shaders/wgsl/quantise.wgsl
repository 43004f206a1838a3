// The values each row adds to the histograms of the tree being grown (core: start_tree):
// exact fixed point X = round_ties_even(v * 2^shift) computed from the f32's bits, and in
// low-bit mode q = floor((X + noise) / 2^drop) with hashed noise. Values are i64 pairs.

@group(0) @binding(0) var<uniform> p: QuantParams;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
// (g lo, g hi, h lo, h hi) per row: what the histograms add
@group(0) @binding(2) var<storage, read_write> gh: array<u32>;
// the same layout: exact values kept for leaf refits in low-bit mode
@group(0) @binding(3) var<storage, read_write> exact: array<u32>;

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
