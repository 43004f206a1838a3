// The in-bag rows of a tree (core: start_tree's row sampling): rows whose RowSample hash is
// below the threshold, compacted into `rows`. Order within the list does not matter (every
// sum over it is an integer sum), so blocks append in whatever order they reach the
// counter; with every row in the bag the list is simply 0..n.

extern "C" __global__ void __launch_bounds__(256) sample_rows(
    SampleParams p,
    u32* __restrict__ rows,
    u32* __restrict__ count)
{
    if (p.keep_all != 0u) {
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
            rows[i] = i;
        }
        return;
    }
    __shared__ u32 block_count;
    __shared__ u32 block_base;
    // the loop bound is uniform across the block, as its barriers require
    for (u32 base = blockIdx.x * blockDim.x; base < p.n; base += gridDim.x * blockDim.x) {
        if (threadIdx.x == 0u) {
            block_count = 0u;
        }
        __syncthreads();
        u32 i = base + threadIdx.x;
        bool keep = i < p.n && hash32(p.key, p.row_offset + i) < p.threshold;
        u32 slot = 0u;
        if (keep) {
            slot = atomicAdd(&block_count, 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0u) {
            block_base = atomicAdd(count, block_count);
        }
        __syncthreads();
        if (keep) {
            rows[block_base + slot] = i;
        }
        __syncthreads();
    }
}
