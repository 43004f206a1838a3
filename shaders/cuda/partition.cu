// Moves the rows of each split node to its children (core: apply_splits). Block (x, y) takes
// a slice of split y's rows: it counts its left and right rows in shared memory, reserves
// room for them with one global atomic per side, and writes left rows from the front of the
// node's range and right rows from the back into `moved`. The host copies the ranges back
// into `rows` (on the stream, no wait) and reads the counters. Order within a child does not
// matter: every later use is an integer sum or a per-row update.

extern "C" __global__ void __launch_bounds__(256) partition(
    BinParams bp,
    const u32* __restrict__ bins,
    const u32* __restrict__ rows,
    u32* __restrict__ moved,
    // per split: start, len, feature, kind, default_left, bin, cat_off, cat_len
    const u32* __restrict__ splits,
    const u32* __restrict__ cats,
    // per split: rows sent left, rows sent right
    u32* __restrict__ counters)
{
    __shared__ u32 block_left;
    __shared__ u32 block_right;
    __shared__ u32 base_left;
    __shared__ u32 base_right;
    const u32* s = splits + 8u * blockIdx.y;
    const u32 start = s[0];
    const u32 len = s[1];
    const u32 feature = s[2];
    // the loop bound is uniform across the block, as its barriers require
    for (u32 base = blockIdx.x * blockDim.x; base < len; base += gridDim.x * blockDim.x) {
        if (threadIdx.x == 0u) {
            block_left = 0u;
            block_right = 0u;
        }
        __syncthreads();
        u32 q = base + threadIdx.x;
        bool active = q < len;
        u32 r = 0u;
        bool left = false;
        u32 slot = 0u;
        if (active) {
            r = rows[start + q];
            u32 bin = bin_of(bp, bins, r, feature);
            left = goes_left(cats, bin, s[3], s[4], s[5], s[6], s[7]);
            slot = atomicAdd(left ? &block_left : &block_right, 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0u) {
            base_left = atomicAdd(&counters[2u * blockIdx.y], block_left);
            base_right = atomicAdd(&counters[2u * blockIdx.y + 1u], block_right);
        }
        __syncthreads();
        if (active) {
            if (left) {
                moved[start + base_left + slot] = r;
            } else {
                moved[start + len - 1u - (base_right + slot)] = r;
            }
        }
        __syncthreads();
    }
}
