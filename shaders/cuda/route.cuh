// Routing a row by a split; prepended to partition.cu and predict.cu.

// The core's `SplitRule::goes_left`. kind 0 numeric (bins 1..=bin go left), 1 categorical
// (bins in the set at cats[cat_off .. cat_off + cat_len] go left); bin 0 is missing.
__device__ __forceinline__ bool goes_left(const u32* __restrict__ cats, u32 bin, u32 kind,
                                          u32 default_left, u32 split_bin, u32 cat_off,
                                          u32 cat_len) {
    if (bin == 0u) {
        return default_left != 0u;
    }
    if (kind == 0u) {
        return bin <= split_bin;
    }
    u32 w = bin >> 5;
    if (w >= cat_len) {
        return false;
    }
    return ((cats[cat_off + w] >> (bin & 31u)) & 1u) != 0u;
}
