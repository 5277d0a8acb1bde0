// Naive sum: the textbook block reduction. Each block sums BLOCK elements in shared
// memory (a tree, BLOCK a power of two) and adds its partial sum to y[0] atomically.
// y[0] holds poison before the run, so zero_output runs first.

extern "C" __global__ void zero_output(float* y) {
    y[0] = 0.0f;
}

extern "C" __global__ void block_sum(const float* x, float* y, int n) {
    __shared__ float partial[BLOCK];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(y, partial[0]);
    }
}
