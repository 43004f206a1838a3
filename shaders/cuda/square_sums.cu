// Each node's sum of its rows' squared gradients at the squares' shift (core: square_sums),
// for the noise within a categorical node's levels. Block (x, y) sums a slice of node y's
// rows: each thread adds its rows' terms in registers, a warp shuffle combines the warp, and
// one lane per warp adds to the node's total. The block is quantise's: k, group, and the
// squares' scale 2^shift as g_scale.

extern "C" __global__ void __launch_bounds__(256) square_sums(
    QuantParams p,
    const float* __restrict__ grad,
    const u32* __restrict__ rows,
    const u32* __restrict__ nodes,
    // one per node
    u64* __restrict__ sums)
{
    const u32 start = nodes[2u * blockIdx.y];
    const u32 len = nodes[2u * blockIdx.y + 1u];
    u64 s = 0ull;
    for (u32 q = blockIdx.x * blockDim.x + threadIdx.x; q < len; q += gridDim.x * blockDim.x) {
        u64 r = rows[start + q];
        s += square_term(grad[2ull * (r * p.k + p.group)], p.g_scale);
    }
    for (u32 o = 16u; o > 0u; o >>= 1) {
        s += __shfl_down_sync(0xffffffffu, s, o);
    }
    if ((threadIdx.x & 31u) == 0u && s != 0ull) {
        atomicAdd(&sums[blockIdx.y], s);
    }
}
