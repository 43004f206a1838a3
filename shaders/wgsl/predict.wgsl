// Routes every row of the bound chunk through one tree by its bins and adds the leaf's value
// to the row's margin of the tree's group: m = ftz(m + value), in tree order (core:
// update_margins and Model::predict_binned). Routing by bins gives in-bag rows the leaf the
// partition gave them, so the same kernel serves training and prediction.

@group(0) @binding(0) var<uniform> bp: BinParams;
@group(0) @binding(1) var<storage, read> bins: array<u32>;
// per node: feature, kind (0 numeric, 1 categorical, 2 leaf), default_left, left, right,
// bin, cat_off, cat_len
@group(0) @binding(2) var<storage, read> tree: array<u32>;
@group(0) @binding(3) var<storage, read> values: array<f32>;
@group(0) @binding(4) var<storage, read> cats: array<u32>;
@group(0) @binding(5) var<storage, read_write> margins: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = bp.chunk_hi - bp.chunk_lo;
    for (var local = gid.x; local < n; local = local + nwg.x * WG) {
        var id = 0u;
        // children come after parents, so a path is shorter than the node count; the bound
        // only guards against a malformed tree hanging the device
        let n_nodes = arrayLength(&values);
        for (var step = 0u; step < n_nodes; step = step + 1u) {
            let t = 8u * id;
            let kind = tree[t + 1u];
            if (kind == 2u) {
                break;
            }
            let bin = bin_of(local, tree[t]);
            if (goes_left(bin, kind, tree[t + 2u], tree[t + 5u], tree[t + 6u], tree[t + 7u])) {
                id = tree[t + 3u];
            } else {
                id = tree[t + 4u];
            }
        }
        let j = (bp.chunk_lo + local) * bp.k + bp.group;
        margins[j] = ftz(margins[j] + values[id]);
    }
}
