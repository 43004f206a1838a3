// Reading bins and routing rows; prepended to the kernels that bind `bins` and `bp`.

// Bin of feature f of the row at `local` (row index within the bound chunk).
fn bin_of(local: u32, f: u32) -> u32 {
    let per_word = 32u / bp.bin_bits;
    let w = bins[local * bp.row_words + f / per_word];
    return (w >> ((f % per_word) * bp.bin_bits)) & ((1u << bp.bin_bits) - 1u);
}
