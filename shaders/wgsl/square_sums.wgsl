// Each node's sum of its rows' squared gradients at the squares' shift (core: square_sums),
// for the noise within a categorical node's levels. Workgroup (x, y) sums a slice of node
// y's rows: each thread adds its rows' terms in registers, then adds its partial sum to the
// node's total. The block is quantise's: k, group, and the squares' shift as g_shift.

@group(0) @binding(0) var<uniform> p: QuantParams;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read> nodes: array<u32>;
// (lo, hi) per node
@group(0) @binding(4) var<storage, read_write> sums: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let start = nodes[2u * wg.y];
    let len = nodes[2u * wg.y + 1u];
    var s = vec2<u32>(0u, 0u);
    for (var q = wg.x * WG + lid; q < len; q = q + nwg.x * WG) {
        let r = rows[start + q];
        s = add64(s, vec2<u32>(square_term(grad[2u * (r * p.k + p.group)], p.g_shift), 0u));
    }
    if ((s.x | s.y) != 0u) {
        let j = 2u * wg.y;
        let c = carry_into_hi(atomicAdd(&sums[j], s.x), s);
        if (c != 0u) {
            atomicAdd(&sums[j + 1u], c);
        }
    }
}
