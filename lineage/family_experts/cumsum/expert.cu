// cumsum expert: y[r, :] = cumsum(x[r, :]) for an M x N fp32 matrix, rows at the copy
// ceiling. Each optimization is one flag (manifest.json); with every flag off this is the
// plain first attempt, a thread per row walking it with a running sum.

#if OPT_RESTRICT
#define CUMSUM_IN const float* __restrict__
#define CUMSUM_OUT float* __restrict__
#else
#define CUMSUM_IN const float*
#define CUMSUM_OUT float*
#endif

#ifndef ITEMS
#define ITEMS 4
#endif

extern "C" __global__ void cumsum(CUMSUM_IN x, CUMSUM_OUT y, int M, int N) {
#if OPT_BLOCK_PER_ROW
    // A block per row, in chunks: every thread loads neighbouring elements (coalesced),
    // the chunk is scanned across the block, and the carry chains the chunks.
    const long long row = blockIdx.x;
    const float* in = x + row * N;
    float* out = y + row * N;
    float carry = 0.0f;
#if OPT_WARP_SHUFFLE_SCAN
    // Warp w takes 32 x ITEMS neighbouring elements of a chunk as ITEMS rows of 32: each
    // row scanned by five __shfl_up_sync steps and chained to the one before; the warps'
    // totals meet once in shared memory. Two barriers a chunk of BLOCK x ITEMS elements.
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK is whole warps");
    __shared__ float totals[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int base = 0; base < N; base += BLOCK * ITEMS) {
        const int segment = base + warp * 32 * ITEMS;
        float v[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int j = segment + i * 32 + lane;
            v[i] = j < N ? in[j] : 0.0f;
        }
        float run = 0.0f;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            float s = v[i];
#pragma unroll
            for (int d = 1; d < 32; d *= 2) {
                const float up = __shfl_up_sync(0xffffffffu, s, d);
                if (lane >= d) s += up;
            }
            v[i] = run + s;  // inclusive, within the warp's segment
            run += __shfl_sync(0xffffffffu, s, 31);
        }
        if (lane == 0) totals[warp] = run;
        __syncthreads();
        float before = carry, next = carry;
        for (int w = 0; w < BLOCK / 32; ++w) {
            if (w < warp) before += totals[w];
            next += totals[w];
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int j = segment + i * 32 + lane;
            if (j < N) out[j] = before + v[i];
        }
        carry = next;
    }
#else
    // The textbook shared-memory scan: a chunk of BLOCK elements, log2(BLOCK) steps each
    // adding the element `offset` to the left, two barriers a step.
    __shared__ float buffer[BLOCK];
    for (int base = 0; base < N; base += BLOCK) {
        const int j = base + threadIdx.x;
        buffer[threadIdx.x] = j < N ? in[j] : 0.0f;
        __syncthreads();
        for (int offset = 1; offset < BLOCK; offset *= 2) {
            const float left = threadIdx.x >= offset ? buffer[threadIdx.x - offset] : 0.0f;
            __syncthreads();
            buffer[threadIdx.x] += left;
            __syncthreads();
        }
        if (j < N) out[j] = carry + buffer[threadIdx.x];
        carry += buffer[BLOCK - 1];
        __syncthreads();
    }
#endif
#else
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float s = 0.0f;
        for (int j = 0; j < N; ++j) {
            s += x[(long long)row * N + j];
            y[(long long)row * N + j] = s;
        }
    }
#endif
}
