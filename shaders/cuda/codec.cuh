// Helpers of the histogram encoders (pack.cu, groups.cu): the zigzag of the codecs in
// sapwood-collective and the OR of a bit field into a stream of u32 words.

// The codecs' zigzag: (v << 1) ^ (v >> 63), so that small magnitudes of either sign are
// small unsigned numbers.
__device__ __forceinline__ u64 zigzag64(u64 v) {
    return (v << 1) ^ (u64)((i64)v >> 63);
}

// ORs the (up to 64) bits of v into the stream `out` at bit `bit` of word `word`. Groups of
// the encoding start on any byte, so neighbours may share a word: the writes are atomic.
__device__ __forceinline__ void or_bits(u32* out, u64 word, u32 bit, u64 v) {
    const u64 i = word + bit / 32u;
    const u32 s = bit % 32u;
    const u32 w0 = (u32)(v << s);
    const u32 w1 = s == 0u ? (u32)(v >> 32) : (u32)(v >> (32u - s));
    const u32 w2 = s == 0u ? 0u : (u32)(v >> (64u - s));
    if (w0 != 0u) {
        atomicOr(&out[i], w0);
    }
    if (w1 != 0u) {
        atomicOr(&out[i + 1u], w1);
    }
    if (w2 != 0u) {
        atomicOr(&out[i + 2u], w2);
    }
}
