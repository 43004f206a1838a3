// Uniform parameter blocks. The Rust twins live in crates/sapwood-wgpu/src/layout.rs and a
// unit test compares every offset and size, so the two cannot drift apart silently.

// gradients.wgsl
struct GradParams {
    n: u32,
    k: u32,
    // the core's objective_code: 0 squared error, 1 logistic, 2 softmax, 3 absolute error,
    // 4 quantile, 5 Huber, 6 Poisson, 7 gamma, 8 Tweedie
    kind: u32,
    has_weights: u32,
    sigmoid_len: u32,
    exp_len: u32,
    // the loss's constants as f32 bits (Objective::constant_bits)
    c0: u32,
    c1: u32,
}

// quantise.wgsl
struct QuantParams {
    n: u32,
    k: u32,
    group: u32,
    lowbit: u32,
    g_shift: i32,
    h_shift: i32,
    // 0: the histogram value is the exact value
    g_drop: u32,
    h_drop: u32,
    g_key: u32,
    h_key: u32,
    row_lo: u32,
    row_hi: u32,
}

// sample_rows.wgsl
struct SampleParams {
    n: u32,
    key: u32,
    // a row is kept when its hash is below the threshold
    threshold: u32,
    keep_all: u32,
    row_lo: u32,
    row_hi: u32,
    pad0: u32,
    pad1: u32,
}

// kernels that read bins: hist_shared, hist_global, partition, predict
struct BinParams {
    n_features: u32,
    // u32 words per row of bins; every row starts on a word
    row_words: u32,
    // 8 or 16
    bin_bits: u32,
    total_bins: u32,
    // the bound chunk of bins holds rows chunk_lo..chunk_hi
    chunk_lo: u32,
    chunk_hi: u32,
    k: u32,
    group: u32,
}
