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

// Whether the warp's ORs are one redux.sync (sm_80 and later; the simulator takes this path
// unless told to act as sm_75) or five butterfly shuffles (sm_75, Turing, which NVRTC 13 still
// targets, has no warp reduction instruction).
#if defined(__CUDA_ARCH__)
#define SAPWOOD_WARP_REDUX (__CUDA_ARCH__ >= 800)
#elif defined(SAPWOOD_SIM_SM75)
#define SAPWOOD_WARP_REDUX 0
#else
#define SAPWOOD_WARP_REDUX 1
#endif

// The OR of v over the whole warp, on every lane; every lane of the warp must call it.
__device__ __forceinline__ u32 warp_or(u32 v) {
#if SAPWOOD_WARP_REDUX
    return __reduce_or_sync(0xffffffffu, v);
#else
    for (u32 o = 16u; o > 0u; o >>= 1) {
        v |= __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
#endif
}
