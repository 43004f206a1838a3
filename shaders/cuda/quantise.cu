// The values each row adds to the histograms of the tree being grown (core: start_tree):
// exact fixed point X = round_ties_even(v * 2^shift) as i64, saturating like Rust's `as`
// (NaN to 0, +inf and values from 2^63 up to i64::MAX, -inf and values below -2^63 to
// i64::MIN), and in low-bit mode q = floor((X + noise) / 2^drop) with the top `drop` bits of
// hash64 as noise (two's complement, wrapping as the core's release build does). gh and exact
// hold (g, h) i64 pairs per row.

// The core's `Scale::hist_value` for drop in 1..=62.
__device__ __forceinline__ i64 lowbit(i64 x, u32 drop, u32 key, u64 row) {
    u64 noise = hash64(key, row) >> (64u - drop);
    return (i64)((u64)x + noise) >> drop;
}

extern "C" __global__ void __launch_bounds__(256) quantise(
    QuantParams p,
    const float* __restrict__ grad,
    i64* __restrict__ gh,
    i64* __restrict__ exact)
{
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
        u64 j = 2ull * ((u64)i * p.k + p.group);
        i64 xg = quantise_exact(grad[j], p.g_scale);
        i64 xh = quantise_exact(grad[j + 1u], p.h_scale);
        i64 qg = xg;
        i64 qh = xh;
        if (p.lowbit != 0u) {
            u64 row = p.row_offset + i;
            if (p.g_drop != 0u) {
                qg = lowbit(xg, p.g_drop, p.g_key, row);
            }
            if (p.h_drop != 0u) {
                qh = lowbit(xh, p.h_drop, p.h_key, row);
            }
            exact[2u * (u64)i] = xg;
            exact[2u * (u64)i + 1u] = xh;
        }
        gh[2u * (u64)i] = qg;
        gh[2u * (u64)i + 1u] = qh;
    }
}
