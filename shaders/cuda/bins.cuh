// Reading bins; prepended to the kernels that read the binned shard.

// Bin of feature f of row r: rows are packed little-end first into u32 words.
__device__ __forceinline__ u32 bin_of(const BinParams& bp, const u32* __restrict__ bins, u32 r, u32 f) {
    u32 per_word = 32u / bp.bin_bits;
    u32 w = bins[(u64)r * bp.row_words + f / per_word];
    return (w >> ((f % per_word) * bp.bin_bits)) & ((1u << bp.bin_bits) - 1u);
}
