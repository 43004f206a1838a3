// Parameter blocks, passed to the kernels by value. The Rust twins live in
// crates/sapwood-cuda/src/layout.rs; a test compiles static_asserts generated from the Rust
// layout with NVRTC, so the two cannot drift apart silently.

// gradients.cu
struct GradParams {
    u32 n;
    u32 k;
    // the core's objective_code: 0 squared error, 1 logistic, 2 softmax, 3 absolute error,
    // 4 quantile, 5 Huber, 6 Poisson, 7 gamma, 8 Tweedie
    u32 kind;
    u32 has_weights;
    u32 sigmoid_len;
    u32 exp_len;
    // the loss's constants as f32 bits (Objective::constant_bits)
    u32 c0;
    u32 c1;
};

// quantise.cu
struct QuantParams {
    u32 n;
    u32 k;
    u32 group;
    u32 lowbit;
    // 2^shift as f64 (detmath::pow2, computed on the host)
    double g_scale;
    double h_scale;
    // 0: the histogram value is the exact value
    u32 g_drop;
    u32 h_drop;
    u32 g_key;
    u32 h_key;
    // global index of the shard's first row
    u64 row_offset;
};

// sample_rows.cu
struct SampleParams {
    u32 n;
    u32 key;
    // a row is kept when its hash is below the threshold
    u32 threshold;
    u32 keep_all;
    u64 row_offset;
};

// kernels that read bins: hist_shared, hist_global, partition, predict
struct BinParams {
    u32 n_rows;
    // u32 words per row of bins; every row starts on a word
    u32 row_words;
    // 8 or 16
    u32 bin_bits;
    u32 total_bins;
    u32 k;
    u32 group;
    // log2 of the bins a word holds (2 for 8-bit bins, 1 for 16-bit ones)
    u32 word_shift;
    // log2 of bin_bits
    u32 bin_shift;
};
