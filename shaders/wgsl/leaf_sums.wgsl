// Exact (Σg, Σh) of each node's rows (core: exact_sums), for refitting leaves in low-bit
// mode. Workgroup (x, y) sums a slice of node y's rows: each thread adds its rows in
// registers with 64-bit pair arithmetic, then adds its partial sums to the node's total.

@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read> rows: array<u32>;
@group(0) @binding(2) var<storage, read> nodes: array<u32>;
// 4 words per node: (Σg lo, Σg hi, Σh lo, Σh hi)
@group(0) @binding(3) var<storage, read_write> sums: array<atomic<u32>>;

fn add_at(j: u32, v: vec2<u32>) {
    let c = carry_into_hi(atomicAdd(&sums[j], v.x), v);
    if (c != 0u) {
        atomicAdd(&sums[j + 1u], c);
    }
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let start = nodes[2u * wg.y];
    let len = nodes[2u * wg.y + 1u];
    var g = vec2<u32>(0u, 0u);
    var h = vec2<u32>(0u, 0u);
    for (var q = wg.x * WG + lid; q < len; q = q + nwg.x * WG) {
        let r = rows[start + q];
        g = add64(g, vec2<u32>(values[4u * r], values[4u * r + 1u]));
        h = add64(h, vec2<u32>(values[4u * r + 2u], values[4u * r + 3u]));
    }
    if ((g.x | g.y) != 0u) {
        add_at(4u * wg.y, g);
    }
    if ((h.x | h.y) != 0u) {
        add_at(4u * wg.y + 2u, h);
    }
}
