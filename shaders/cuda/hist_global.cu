// The global-memory fallback of hist_shared.cu, for a tile whose bins do not fit shared
// memory (a feature with very many bins): the same exact 64-bit adds, made straight on the
// global histogram.

extern "C" __global__ void __launch_bounds__(256) hist_global(
    BinParams bp,
    const u32* __restrict__ bins,
    const u32* __restrict__ offsets,
    const i64* __restrict__ gh,
    const u32* __restrict__ rows,
    const u32* __restrict__ nodes,
    const u32* __restrict__ tiles,
    u64* __restrict__ hist)
{
    const u32 f0 = tiles[4u * blockIdx.y];
    const u32 f1 = tiles[4u * blockIdx.y + 1u];
    const u32 start = nodes[2u * blockIdx.z];
    const u32 len = nodes[2u * blockIdx.z + 1u];
    const u64 out = 2ull * (u64)blockIdx.z * bp.total_bins;
    for (u32 q = blockIdx.x * blockDim.x + threadIdx.x; q < len; q += gridDim.x * blockDim.x) {
        u32 r = rows[start + q];
        u64 g = (u64)gh[2u * (u64)r];
        u64 h = (u64)gh[2u * (u64)r + 1u];
        for (u32 f = f0; f < f1; ++f) {
            u64 j = out + 2u * (offsets[f] + bin_of(bp, bins, r, f));
            atomicAdd(&hist[j], g);
            atomicAdd(&hist[j + 1u], h);
        }
    }
}
