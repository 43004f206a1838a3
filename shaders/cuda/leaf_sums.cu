// Exact (Σg, Σh) of each node's rows (core: exact_sums), for refitting leaves in low-bit
// mode. Block (x, y) sums a slice of node y's rows: each thread adds its rows in registers,
// a warp shuffle combines the warp, and one lane per warp adds to the node's total.

extern "C" __global__ void __launch_bounds__(256) leaf_sums(
    const i64* __restrict__ values,
    const u32* __restrict__ rows,
    const u32* __restrict__ nodes,
    // 2 i64 per node: (Σg, Σh)
    u64* __restrict__ sums)
{
    const u32 start = nodes[2u * blockIdx.y];
    const u32 len = nodes[2u * blockIdx.y + 1u];
    u64 g = 0ull;
    u64 h = 0ull;
    for (u32 q = blockIdx.x * blockDim.x + threadIdx.x; q < len; q += gridDim.x * blockDim.x) {
        u32 r = rows[start + q];
        g += (u64)values[2u * (u64)r];
        h += (u64)values[2u * (u64)r + 1u];
    }
    for (u32 o = 16u; o > 0u; o >>= 1) {
        g += __shfl_down_sync(0xffffffffu, g, o);
        h += __shfl_down_sync(0xffffffffu, h, o);
    }
    if ((threadIdx.x & 31u) == 0u) {
        if (g != 0ull) {
            atomicAdd(&sums[2u * blockIdx.y], g);
        }
        if (h != 0ull) {
            atomicAdd(&sums[2u * blockIdx.y + 1u], h);
        }
    }
}
