// Histograms of a batch of nodes with shared-memory integer atomics. Block (x, y, z) takes a
// slice of node z's rows and the features of tile y, whose bins fit the block's dynamic
// shared memory; it sums into shared memory, then adds its partial sums to the global
// histogram. Entries are (Σg, Σh) i64 pairs; two's complement addition of u64 is the exact
// i64 sum in any order.
//
// Shared memory holds each i64 as (lo, hi) u32 words, as the WGSL twin does: a 64-bit shared
// atomic add compiles to a compare-and-swap loop on sm_80 and sm_90 (ATOMS.CAST.SPIN.64, two
// per feature per row, retried by every lane that lost), while a 32-bit add on lo and the
// carry (plus hi) added to hi, skipped when 0, are native adds and exact in any order. Before
// adding, the lanes of a warp that hit one bin (a skewed feature: every row missing, a binary
// feature) sum their values with shuffles so that one lane per bin adds; a neighbour test
// takes that path only when two lanes may collide. tests/nvrtc.rs checks the SASS.

#define FULL_WARP 0xffffffffu

// Adds v to the i64 held as (lo, hi) at w[0], w[1].
__device__ __forceinline__ void add_pair(u32* w, u64 v) {
    u32 lo = (u32)v;
    u32 hi = (u32)(v >> 32);
    if (lo != 0u) {
        u32 old = atomicAdd(&w[0], lo);
        hi += old + lo < old ? 1u : 0u;
    }
    if (hi != 0u) {
        atomicAdd(&w[1], hi);
    }
}

// Sums g and h over the lanes of `peers` (the lanes with this lane's key, this lane among
// them) into the lowest lane of peers; every lane of the warp calls it (the loop and its
// shuffles are warp-uniform). Each round a lane adds the partial sum of its next remaining
// peer above it, and the peers at odd positions drop out, so log2(peers) rounds suffice.
__device__ __forceinline__ void sum_over_peers(u32 peers, u32 lane, u64& g, u64& h) {
    u32 pos = __popc(peers & ((1u << lane) - 1u));
    // peers above this lane (for lane 31, 2u << 31 is 0 and so is the mask)
    u32 above = peers & ~((2u << lane) - 1u);
    while (__any_sync(FULL_WARP, above != 0u)) {
        u32 next = __ffs(above);
        u32 src = next != 0u ? next - 1u : lane;
        u64 tg = __shfl_sync(FULL_WARP, g, src);
        u64 th = __shfl_sync(FULL_WARP, h, src);
        if (next != 0u) {
            g += tg;
            h += th;
        }
        above &= ~__ballot_sync(FULL_WARP, (pos & 1u) != 0u);
        pos >>= 1;
    }
}

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
    // 4 words per bin: (Σg lo, Σg hi, Σh lo, Σh hi)
    extern __shared__ u32 tile[];
    const u32 f0 = tiles[4u * blockIdx.y];
    const u32 f1 = tiles[4u * blockIdx.y + 1u];
    const u32 b0 = tiles[4u * blockIdx.y + 2u];
    const u32 words = 4u * (tiles[4u * blockIdx.y + 3u] - b0);
    for (u32 i = threadIdx.x; i < words; i += blockDim.x) {
        tile[i] = 0u;
    }
    __syncthreads();
    const u32 start = nodes[2u * blockIdx.z];
    const u32 len = nodes[2u * blockIdx.z + 1u];
    const u32 lane = threadIdx.x & 31u;
    const u32 below = (1u << lane) - 1u;
    // the loop bound is uniform across the warp, as its shuffles and votes require
    for (u32 base = blockIdx.x * blockDim.x + (threadIdx.x - lane); base < len;
         base += gridDim.x * blockDim.x) {
        const u32 q = base + lane;
        const bool active = q < len;
        u32 r = 0u;
        u64 g = 0ull;
        u64 h = 0ull;
        if (active) {
            r = rows[start + q];
            g = (u64)gh[2u * (u64)r];
            h = (u64)gh[2u * (u64)r + 1u];
        }
        for (u32 f = f0; f < f1; ++f) {
            // the entry in the tile; idle lanes share a key no bin has, and add nothing
            const u32 key = active ? offsets[f] + bin_of(bp, bins, r, f) - b0 : 0xffffffffu;
            const u32 neighbour = __shfl_xor_sync(FULL_WARP, key, 1u);
            u64 sg = g;
            u64 sh = h;
            bool leader = true;
            if (__any_sync(FULL_WARP, active && key == neighbour)) {
                const u32 peers = __match_any_sync(FULL_WARP, key);
                sum_over_peers(peers, lane, sg, sh);
                leader = (peers & below) == 0u;
            }
            if (active && leader) {
                add_pair(&tile[4u * key], sg);
                add_pair(&tile[4u * key + 2u], sh);
            }
        }
    }
    __syncthreads();
    const u64 out = 2ull * ((u64)blockIdx.z * bp.total_bins + b0);
    for (u32 e = threadIdx.x; 2u * e < words; e += blockDim.x) {
        const u64 v = ((u64)tile[2u * e + 1u] << 32) | (u64)tile[2u * e];
        if (v != 0ull) {
            atomicAdd(&hist[out + e], v);
        }
    }
}
