// Routes every row through one tree by its bins and adds the leaf's value to the row's
// margin of the tree's group: m = ftz(m + value) in f32, in tree order (core:
// update_margins and Model::predict_binned). Routing by bins gives in-bag rows the leaf the
// partition gave them, so the same kernel serves training and prediction.

extern "C" __global__ void __launch_bounds__(256) predict(
    BinParams bp,
    const u32* __restrict__ bins,
    // per node: feature, kind (0 numeric, 1 categorical, 2 leaf), default_left, left, right,
    // bin, cat_off, cat_len
    const u32* __restrict__ tree,
    const float* __restrict__ values,
    const u32* __restrict__ cats,
    u32 n_nodes,
    float* __restrict__ margins)
{
    for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < bp.n_rows; r += gridDim.x * blockDim.x) {
        u32 id = 0u;
        // children come after parents, so a path is shorter than the node count; the bound
        // only guards against a malformed tree hanging the device
        for (u32 step = 0u; step < n_nodes; ++step) {
            const u32* t = tree + 8u * id;
            u32 kind = t[1];
            if (kind == 2u) {
                break;
            }
            u32 bin = bin_of(bp, bins, r, t[0]);
            id = goes_left(cats, bin, kind, t[2], t[5], t[6], t[7]) ? t[3] : t[4];
        }
        u64 j = (u64)r * bp.k + bp.group;
        margins[j] = ftz(__fadd_rn(margins[j], values[id]));
    }
}
