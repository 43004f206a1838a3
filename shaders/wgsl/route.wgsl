// Routing a row by a split; prepended to the kernels that also bind `cats`.

// The core's `SplitRule::goes_left`. kind 0 numeric (bins 1..=bin go left), 1 categorical
// (bins in the set at cats[cat_off .. cat_off + cat_len] go left); bin 0 is missing.
fn goes_left(bin: u32, kind: u32, default_left: u32, split_bin: u32, cat_off: u32, cat_len: u32) -> bool {
    if (bin == 0u) {
        return default_left != 0u;
    }
    if (kind == 0u) {
        return bin <= split_bin;
    }
    let w = bin >> 5u;
    if (w >= cat_len) {
        return false;
    }
    return ((cats[cat_off + w] >> (bin & 31u)) & 1u) != 0u;
}
