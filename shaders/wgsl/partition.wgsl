// Moves the rows of each split node to its children (core: apply_splits). Workgroup (x, y)
// takes a slice of split y's rows: it counts its left and right rows in workgroup memory,
// reserves room for them with one global atomic per side, and writes left rows from the
// front of the node's range and right rows from the back into `moved`. The host copies the
// ranges back into `rows` and reads the counters. Order within a child does not matter.

@group(0) @binding(0) var<uniform> bp: BinParams;
@group(0) @binding(1) var<storage, read> bins: array<u32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read_write> moved: array<u32>;
// per split: start, len, feature, kind, default_left, bin, cat_off, cat_len
@group(0) @binding(4) var<storage, read> splits: array<u32>;
@group(0) @binding(5) var<storage, read> cats: array<u32>;
// per split: rows sent left, rows sent right
@group(0) @binding(6) var<storage, read_write> counters: array<atomic<u32>>;

var<workgroup> wg_left: atomic<u32>;
var<workgroup> wg_right: atomic<u32>;
var<workgroup> wg_base: vec2<u32>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let s = 8u * wg.y;
    let start = splits[s];
    let len = splits[s + 1u];
    let feature = splits[s + 2u];
    // the loop bound is uniform across the workgroup, as its barriers require
    for (var base = wg.x * WG; base < len; base = base + nwg.x * WG) {
        if (lid == 0u) {
            atomicStore(&wg_left, 0u);
            atomicStore(&wg_right, 0u);
        }
        workgroupBarrier();
        let q = base + lid;
        var r = 0u;
        var in_chunk = false;
        var left = false;
        var slot = 0u;
        if (q < len) {
            r = rows[start + q];
            in_chunk = r >= bp.chunk_lo && r < bp.chunk_hi;
        }
        if (in_chunk) {
            let bin = bin_of(r - bp.chunk_lo, feature);
            left = goes_left(bin, splits[s + 3u], splits[s + 4u], splits[s + 5u], splits[s + 6u], splits[s + 7u]);
            if (left) {
                slot = atomicAdd(&wg_left, 1u);
            } else {
                slot = atomicAdd(&wg_right, 1u);
            }
        }
        workgroupBarrier();
        if (lid == 0u) {
            let nl = atomicLoad(&wg_left);
            let nr = atomicLoad(&wg_right);
            wg_base = vec2<u32>(atomicAdd(&counters[2u * wg.y], nl), atomicAdd(&counters[2u * wg.y + 1u], nr));
        }
        let b = workgroupUniformLoad(&wg_base);
        if (in_chunk) {
            if (left) {
                moved[start + b.x + slot] = r;
            } else {
                moved[start + len - 1u - (b.y + slot)] = r;
            }
        }
    }
}
