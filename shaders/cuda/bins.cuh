// Reading bins; prepended to the kernels that read the binned shard.

// Bin of feature f of row r: rows are packed little-end first into u32 words, 2^word_shift
// bins of 2^bin_shift bits a word, so the lookup is shifts and masks (no runtime division).
__device__ __forceinline__ u32 bin_of(const BinParams& bp, const u32* __restrict__ bins, u32 r, u32 f) {
    u32 w = bins[(u64)r * bp.row_words + (f >> bp.word_shift)];
    u32 slot = f & ((1u << bp.word_shift) - 1u);
    return (w >> (slot << bp.bin_shift)) & ((1u << bp.bin_bits) - 1u);
}
