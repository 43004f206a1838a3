// Packed lanes of whole messages (codec::pack in sapwood-collective): word t of message m
// holds its values t·L .. t·L + L - 1 (L = 64 / w), value j weighted by 2^(w·j), summed with
// wrapping 64-bit adds, so a plain integer sum of packed words is the packed lane-wise sum.
// Block (x, m) packs a slice of message m's words, one word per thread.

extern "C" __global__ void __launch_bounds__(256) pack(
    // values per message
    u32 len,
    const u64* __restrict__ values,
    // per message: lane width (clamped to 1..=64 here, as the codec does), first output word
    const u32* __restrict__ plan,
    u64* __restrict__ words)
{
    const u32 m = blockIdx.y;
    const u32 w = min(max(plan[2u * m], 1u), 64u);
    const u64 at = plan[2u * m + 1u];
    const u32 lanes = 64u / w;
    const u32 n = (len + lanes - 1u) / lanes;
    const u64 base = (u64)m * len;
    for (u32 t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x) {
        const u32 first = t * lanes;
        const u32 count = min(lanes, len - first);
        u64 acc = 0ull;
        // w * j < 64: no shift is out of range
        for (u32 j = 0u; j < count; ++j) {
            acc += values[base + first + j] << (w * j);
        }
        words[at + t] = acc;
    }
}
