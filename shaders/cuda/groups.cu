// The group encoding of whole messages (codec/groups.rs in sapwood-collective), as
// groups.wgsl: every 32 values of a message (fewer at its end) at their own shift and width,
// a header byte (width, 0x80 when sparse), a shift byte, for a sparse group a 32-bit bitmap
// of its nonzero values, then the zigzagged shifted values (all, or only the marked ones) as
// a little-endian bit stream. `write` 0 stores each group's size in `sizes`; the host turns
// them into byte offsets (an exclusive scan) and `write` 1 writes each group at its offset
// in `out`, zeroed first.
//
// A group is a warp, one value per lane: its OR of values and of zigzags are warp
// reductions (codec.cuh's warp_or: redux.sync from sm_80, shuffles on sm_75) and its bitmap a
// ballot, so no shared memory and no atomics but the writes.

#define FULL_WARP 0xffffffffu

extern "C" __global__ void __launch_bounds__(256) groups(
    // values per message
    u32 len,
    // groups of all messages
    u32 n_groups,
    u32 write,
    const u64* __restrict__ values,
    // sizes in bytes (write 0) or byte offsets (write 1), one per group
    u32* __restrict__ sizes,
    u32* __restrict__ out)
{
    const u32 per_message = (len + 31u) / 32u;
    const u32 j = threadIdx.x & 31u;
    const u32 warps = gridDim.x * (blockDim.x / 32u);
    // g is the same on every lane of a warp: the loop and its branches are warp-uniform
    for (u32 g = blockIdx.x * (blockDim.x / 32u) + threadIdx.x / 32u; g < n_groups; g += warps) {
        const u32 m = g / per_message;
        const u32 first = (g % per_message) * 32u;
        const u32 n = min(32u, len - first);
        const u64 v = j < n ? values[(u64)m * len + first + j] : 0ull;
        const u64 z = zigzag64(v);
        const u64 or_v = ((u64)warp_or((u32)(v >> 32)) << 32) | (u64)warp_or((u32)v);
        const u64 or_z = ((u64)warp_or((u32)(z >> 32)) << 32) | (u64)warp_or((u32)z);
        const u32 mask = __ballot_sync(FULL_WARP, v != 0ull);
        u32 shift = 0u;
        u32 w = 0u;
        if (or_v != 0ull) {
            shift = (u32)__ffsll((i64)or_v) - 1u;
            // with the low `shift` bits of every value zero, zigzag(v) >> shift is
            // zigzag(v >> shift)
            w = 64u - (u32)__clzll((i64)(or_z >> shift));
        }
        const u32 k = __popc(mask);
        const bool sparse = w != 0u && 5u * (32u + k * w) <= 4u * n * w;
        if (write == 0u) {
            if (j == 0u) {
                sizes[g] = sparse ? 6u + (k * w + 7u) / 8u
                                  : (w == 0u ? 1u : 2u + (n * w + 7u) / 8u);
            }
            continue;
        }
        if (w == 0u) {
            continue;
        }
        const u32 off = sizes[g];
        const u64 word = off / 4u;
        const u32 bit = 8u * (off % 4u);
        if (j == 0u) {
            const u32 head = w | (sparse ? 0x80u : 0u);
            or_bits(out, word, bit, (u64)(head | (shift << 8)));
            if (sparse) {
                or_bits(out, word, bit + 16u, (u64)mask);
            }
        }
        // a sparse group writes only its marked values, each at its rank
        const u32 rank = sparse ? __popc(mask & ((1u << j) - 1u)) : j;
        if (v != 0ull) {
            or_bits(out, word, bit + (sparse ? 48u : 16u) + rank * w, z >> shift);
        }
    }
}
