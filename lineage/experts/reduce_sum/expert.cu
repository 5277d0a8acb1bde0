// reduce_sum expert: y[0] = sum(x) at the copy ceiling. Each optimization is one flag
// (manifest.json); with every flag off this is the textbook block reduction, one block
// per BLOCK elements and one atomic per block.

extern "C" __global__ void zero_output(float* y) {
    y[0] = 0.0f;
}

// The block's total, in thread 0's return value (the others' values are meaningless).
__device__ __forceinline__ float block_total(float value) {
#if OPT_WARP_SHUFFLE_REDUCE
    // Within each warp by shuffles, then the warps' sums through 32 shared slots.
    __shared__ float warp_sums[32];
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warp_sums[warp] = value;
    __syncthreads();
    const int warps = (blockDim.x + 31) / 32;
    value = (threadIdx.x < warps) ? warp_sums[threadIdx.x] : 0.0f;
    if (warp == 0) {
        for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
    }
    return value;
#else
    // A tree in shared memory (BLOCK a power of two).
    __shared__ float partial[BLOCK];
    partial[threadIdx.x] = value;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    return partial[0];
#endif
}

#if OPT_LAUNCH_BOUNDS
// The compiler budgets registers for BLOCK threads.
extern "C" __global__ void __launch_bounds__(BLOCK) block_sum(const float* x, float* y, int n) {
#else
extern "C" __global__ void block_sum(const float* x, float* y, int n) {
#endif
#if OPT_GRID_STRIDE_ACCUMULATE
    // Each thread first sums a grid-stride slice in registers: one wave of blocks, one
    // atomic per block instead of one per BLOCK elements.
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
#if OPT_VEC4
    const long long quads = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
#if OPT_UNROLL
    // Two quads in flight, two accumulators.
    float other = 0.0f;
    long long i = first;
    for (; i + stride < quads; i += 2 * stride) {
        float4 a = x4[i], b = x4[i + stride];
        sum += (a.x + a.y) + (a.z + a.w);
        other += (b.x + b.y) + (b.z + b.w);
    }
    for (; i < quads; i += stride) {
        float4 a = x4[i];
        sum += (a.x + a.y) + (a.z + a.w);
    }
    sum += other;
#else
    for (long long i = first; i < quads; i += stride) {
        float4 a = x4[i];
        sum += (a.x + a.y) + (a.z + a.w);
    }
#endif
    for (long long i = quads * 4 + first; i < n; i += stride) sum += x[i];
#else
    for (long long i = first; i < n; i += stride) sum += x[i];
#endif
#else
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const float sum = (i < n) ? x[i] : 0.0f;
#endif
    const float total = block_total(sum);
    if (threadIdx.x == 0) atomicAdd(y, total);
}
