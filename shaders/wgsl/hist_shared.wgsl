// Histograms of a batch of nodes with workgroup-shared integer atomics. Workgroup (x, y, z)
// takes a slice of node z's rows and the features of tile y, whose bins fit the adapter's
// workgroup storage; it sums into shared memory, then adds its partial sums to the global
// histogram. Each (Σg, Σh) entry is a pair of i64 held as (lo, hi) u32 words: a 32-bit
// atomic add on lo, and a carry into hi when lo wraps, give the exact 64-bit sum in any
// order.

// Replaced by the loader with the tile size the adapter's workgroup storage allows.
const TILE_WORDS: u32 = 4096u;

@group(0) @binding(0) var<uniform> bp: BinParams;
@group(0) @binding(1) var<storage, read> bins: array<u32>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read> gh: array<u32>;
@group(0) @binding(4) var<storage, read> rows: array<u32>;
// (start, len) of each node's rows in `rows`
@group(0) @binding(5) var<storage, read> nodes: array<u32>;
// (first feature, end feature, first bin, end bin) of each tile
@group(0) @binding(6) var<storage, read> tiles: array<u32>;
// 4 words per bin per node: (Σg lo, Σg hi, Σh lo, Σh hi), i.e. the i64 pairs little-endian
@group(0) @binding(7) var<storage, read_write> hist: array<atomic<u32>>;

var<workgroup> tile: array<atomic<u32>, TILE_WORDS>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let f0 = tiles[4u * wg.y];
    let f1 = tiles[4u * wg.y + 1u];
    let b0 = tiles[4u * wg.y + 2u];
    let words = 4u * (tiles[4u * wg.y + 3u] - b0);
    for (var i = lid; i < words; i = i + WG) {
        atomicStore(&tile[i], 0u);
    }
    workgroupBarrier();
    let start = nodes[2u * wg.z];
    let len = nodes[2u * wg.z + 1u];
    for (var q = wg.x * WG + lid; q < len; q = q + nwg.x * WG) {
        let r = rows[start + q];
        if (r < bp.chunk_lo || r >= bp.chunk_hi) {
            continue;
        }
        let local = r - bp.chunk_lo;
        let g = vec2<u32>(gh[4u * r], gh[4u * r + 1u]);
        let h = vec2<u32>(gh[4u * r + 2u], gh[4u * r + 3u]);
        for (var f = f0; f < f1; f = f + 1u) {
            let j = 4u * (offsets[f] + bin_of(local, f) - b0);
            let cg = carry_into_hi(atomicAdd(&tile[j], g.x), g);
            if (cg != 0u) {
                atomicAdd(&tile[j + 1u], cg);
            }
            let ch = carry_into_hi(atomicAdd(&tile[j + 2u], h.x), h);
            if (ch != 0u) {
                atomicAdd(&tile[j + 3u], ch);
            }
        }
    }
    workgroupBarrier();
    let out = 4u * (wg.z * bp.total_bins + b0);
    for (var e = lid; 2u * e < words; e = e + WG) {
        let lo = atomicLoad(&tile[2u * e]);
        let hi = atomicLoad(&tile[2u * e + 1u]);
        if ((lo | hi) != 0u) {
            let j = out + 2u * e;
            let c = carry_into_hi(atomicAdd(&hist[j], lo), vec2<u32>(lo, hi));
            if (c != 0u) {
                atomicAdd(&hist[j + 1u], c);
            }
        }
    }
}
