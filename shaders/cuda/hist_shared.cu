// Histograms of a batch of nodes with shared-memory 64-bit integer atomics. Block (x, y, z)
// takes a slice of node z's rows and the features of tile y, whose bins fit the block's
// dynamic shared memory; it sums into shared memory, then adds its partial sums to the
// global histogram. Entries are (Σg, Σh) i64 pairs; two's complement addition of u64 is the
// exact i64 sum in any order.

extern "C" __global__ void __launch_bounds__(256) hist_shared(
    BinParams bp,
    const u32* __restrict__ bins,
    const u32* __restrict__ offsets,
    const i64* __restrict__ gh,
    const u32* __restrict__ rows,
    // (start, len) of each node's rows in `rows`
    const u32* __restrict__ nodes,
    // (first feature, end feature, first bin, end bin) of each tile
    const u32* __restrict__ tiles,
    // 2 i64 per bin per node
    u64* __restrict__ hist)
{
    extern __shared__ u64 tile[];
    const u32 f0 = tiles[4u * blockIdx.y];
    const u32 f1 = tiles[4u * blockIdx.y + 1u];
    const u32 b0 = tiles[4u * blockIdx.y + 2u];
    const u32 entries = 2u * (tiles[4u * blockIdx.y + 3u] - b0);
    for (u32 i = threadIdx.x; i < entries; i += blockDim.x) {
        tile[i] = 0ull;
    }
    __syncthreads();
    const u32 start = nodes[2u * blockIdx.z];
    const u32 len = nodes[2u * blockIdx.z + 1u];
    for (u32 q = blockIdx.x * blockDim.x + threadIdx.x; q < len; q += gridDim.x * blockDim.x) {
        u32 r = rows[start + q];
        u64 g = (u64)gh[2u * (u64)r];
        u64 h = (u64)gh[2u * (u64)r + 1u];
        for (u32 f = f0; f < f1; ++f) {
            u32 j = 2u * (offsets[f] + bin_of(bp, bins, r, f) - b0);
            atomicAdd(&tile[j], g);
            atomicAdd(&tile[j + 1u], h);
        }
    }
    __syncthreads();
    u64 out = 2ull * ((u64)blockIdx.z * bp.total_bins + b0);
    for (u32 e = threadIdx.x; e < entries; e += blockDim.x) {
        u64 v = tile[e];
        if (v != 0ull) {
            atomicAdd(&hist[out + e], v);
        }
    }
}
