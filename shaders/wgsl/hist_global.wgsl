// The global-memory fallback of hist_shared.wgsl, for a tile whose bins do not fit the
// workgroup storage (a feature with very many bins): the same exact 64-bit carry-adds, made
// straight on the global histogram.

@group(0) @binding(0) var<uniform> bp: BinParams;
@group(0) @binding(1) var<storage, read> bins: array<u32>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read> gh: array<u32>;
@group(0) @binding(4) var<storage, read> rows: array<u32>;
@group(0) @binding(5) var<storage, read> nodes: array<u32>;
@group(0) @binding(6) var<storage, read> tiles: array<u32>;
@group(0) @binding(7) var<storage, read_write> hist: array<atomic<u32>>;

fn add_at(j: u32, v: vec2<u32>) {
    let c = carry_into_hi(atomicAdd(&hist[j], v.x), v);
    if (c != 0u) {
        atomicAdd(&hist[j + 1u], c);
    }
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let f0 = tiles[4u * wg.y];
    let f1 = tiles[4u * wg.y + 1u];
    let start = nodes[2u * wg.z];
    let len = nodes[2u * wg.z + 1u];
    let out = 4u * wg.z * bp.total_bins;
    for (var q = wg.x * WG + lid; q < len; q = q + nwg.x * WG) {
        let r = rows[start + q];
        if (r < bp.chunk_lo || r >= bp.chunk_hi) {
            continue;
        }
        let local = r - bp.chunk_lo;
        let g = vec2<u32>(gh[4u * r], gh[4u * r + 1u]);
        let h = vec2<u32>(gh[4u * r + 2u], gh[4u * r + 3u]);
        for (var f = f0; f < f1; f = f + 1u) {
            let j = out + 4u * (offsets[f] + bin_of(local, f));
            add_at(j, g);
            add_at(j + 2u, h);
        }
    }
}
