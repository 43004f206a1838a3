// The in-bag rows of a tree (core: start_tree's row sampling): rows whose RowSample hash is
// below the threshold, compacted into `rows`. Order within the list does not matter (every
// sum over it is an integer sum), so workgroups append in whatever order they reach the
// counter; with every row in the bag the list is simply 0..n.

@group(0) @binding(0) var<uniform> p: SampleParams;
@group(0) @binding(1) var<storage, read_write> rows: array<u32>;
@group(0) @binding(2) var<storage, read_write> count: array<atomic<u32>>;

var<workgroup> wg_count: atomic<u32>;
var<workgroup> wg_base: u32;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if (p.keep_all != 0u) {
        for (var i = wg.x * WG + lid; i < p.n; i = i + nwg.x * WG) {
            rows[i] = i;
        }
        return;
    }
    // the loop bound is uniform across the workgroup, as its barriers require
    for (var base = wg.x * WG; base < p.n; base = base + nwg.x * WG) {
        if (lid == 0u) {
            atomicStore(&wg_count, 0u);
        }
        workgroupBarrier();
        let i = base + lid;
        var keep = false;
        if (i < p.n) {
            keep = hash32(p.key, global_row(p.row_lo, p.row_hi, i)) < p.threshold;
        }
        var slot = 0u;
        if (keep) {
            slot = atomicAdd(&wg_count, 1u);
        }
        workgroupBarrier();
        if (lid == 0u) {
            wg_base = atomicAdd(&count[0], atomicLoad(&wg_count));
        }
        let start = workgroupUniformLoad(&wg_base);
        if (keep) {
            rows[start + slot] = i;
        }
    }
}
