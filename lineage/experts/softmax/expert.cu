// softmax expert: y = softmax(x) over rows, at the copy ceiling. Each optimization is one
// flag (manifest.json); with every flag off this is the plain first attempt, one thread
// per row and three passes over it (maximum, sum of exponentials, normalised write).
//
// With every flag on: one block per row, the row held in registers as float4s so x is
// read from DRAM once and y written once (2 x 4 bytes per element, the compulsory
// traffic), the thread's maximum and sum of exponentials merged across the block in one
// shuffle-and-shared-slot reduction.

#if OPT_LAUNCH_BOUNDS
#define SOFTMAX_BOUNDS __launch_bounds__(BLOCK, MIN_BLOCKS_PER_SM)
#else
#define SOFTMAX_BOUNDS
#endif

#if OPT_RESTRICT
#define SOFTMAX_IN const float* __restrict__
#define SOFTMAX_OUT float* __restrict__
#else
#define SOFTMAX_IN const float*
#define SOFTMAX_OUT float*
#endif

#if OPT_FAST_MATH
// ex2.approx: ~2 + 1.2 |x| ulp, far inside the task's rtol of 1e-4.
#define SOFTMAX_EXP(v) __expf(v)
#else
#define SOFTMAX_EXP(v) expf(v)
#endif

#if OPT_BLOCK_PER_ROW
static_assert((BLOCK & (BLOCK - 1)) == 0 && BLOCK >= 32, "BLOCK is a power of two, at least a warp");

struct MaxOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

#if OPT_ONLINE_SOFTMAX
// A running maximum and the sum of exp(x - max) over the values seen so far.
struct Stats {
    float max, sum;
};
__device__ __forceinline__ Stats merge(Stats a, Stats b) {
    const float max = fmaxf(a.max, b.max);
    // An empty side (max = -inf, sum = 0) adds nothing: exp(-inf - -inf) would be NaN.
    const float sa = (a.max == -INFINITY) ? 0.0f : a.sum * SOFTMAX_EXP(a.max - max);
    const float sb = (b.max == -INFINITY) ? 0.0f : b.sum * SOFTMAX_EXP(b.max - max);
    return {max, sa + sb};
}
struct MergeOp {
    __device__ __forceinline__ Stats operator()(Stats a, Stats b) const { return merge(a, b); }
};
#endif

#if OPT_WARP_SHUFFLE_REDUCE
__device__ __forceinline__ float shuffle_xor(float v, int mask) {
    return __shfl_xor_sync(0xFFFFFFFFu, v, mask);
}
#if OPT_ONLINE_SOFTMAX
__device__ __forceinline__ Stats shuffle_xor(Stats v, int mask) {
    return {shuffle_xor(v.max, mask), shuffle_xor(v.sum, mask)};
}
#endif
// Butterfly: every lane ends with the warp's result.
template <typename T, typename Op>
__device__ __forceinline__ T warp_all_reduce(T v, Op op) {
    for (int mask = 16; mask > 0; mask /= 2) v = op(v, shuffle_xor(v, mask));
    return v;
}
#define REDUCE_SLOTS 32
#else
#define REDUCE_SLOTS BLOCK
#endif

// The block's result in every thread. `slots` is this call's own shared array (a second
// reduction gets another), so no barrier is needed between two reductions.
template <typename T, typename Op>
__device__ __forceinline__ T block_all_reduce(T v, Op op, T identity, T* slots) {
    const int tid = threadIdx.x;
#if OPT_WARP_SHUFFLE_REDUCE
    constexpr int warps = BLOCK / 32;
    v = warp_all_reduce(v, op);
    if (tid % 32 == 0) slots[tid / 32] = v;
    __syncthreads();
#if OPT_BLOCK_REDUCE
    // One barrier: every warp reads the warps' results and shuffles them itself.
    v = (tid % 32 < warps) ? slots[tid % 32] : identity;
    return warp_all_reduce(v, op);
#else
    // A tree over the warps' results, one barrier per level.
    for (int stride = warps / 2; stride > 0; stride /= 2) {
        if (tid < stride) slots[tid] = op(slots[tid], slots[tid + stride]);
        __syncthreads();
    }
    return slots[0];
#endif
#else
    // The textbook tree over BLOCK values in shared memory, log2(BLOCK) barriers.
    slots[tid] = v;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (tid < stride) slots[tid] = op(slots[tid], slots[tid + stride]);
        __syncthreads();
    }
    return slots[0];
#endif
}

// Columns [W c, W c + W) of a row, for W = 1 or 4 (4 only when the row is 16-byte aligned).
template <int W>
__device__ __forceinline__ void load_chunk(SOFTMAX_IN row, int c, float* v) {
#if OPT_VEC4
    if constexpr (W == 4) {
        const float4 q = reinterpret_cast<const float4*>(row)[c];
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        return;
    }
#endif
    v[0] = row[c];
}

template <int W>
__device__ __forceinline__ void store_chunk(SOFTMAX_OUT row, int c, const float* v) {
#if OPT_VEC4
    if constexpr (W == 4) {
        reinterpret_cast<float4*>(row)[c] = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
#endif
    row[c] = v[0];
}

// Streams the row from global memory for the statistics and again for the write: the
// shape of every row too long for the registers.
template <int W>
__device__ __forceinline__ void softmax_row_streamed(SOFTMAX_IN in, SOFTMAX_OUT out, int N,
                                                     float* slots_a, float* slots_b) {
    const int chunks = N / W;
    float v[W];
#if OPT_ONLINE_SOFTMAX
    // One read for both statistics: rescale the sum whenever the maximum grows.
    Stats mine = {-INFINITY, 0.0f};
    for (int c = threadIdx.x; c < chunks; c += BLOCK) {
        load_chunk<W>(in, c, v);
        for (int i = 0; i < W; ++i) mine = merge(mine, Stats{v[i], 1.0f});
    }
    const Stats row = block_all_reduce(mine, MergeOp(), Stats{-INFINITY, 0.0f},
                                       reinterpret_cast<Stats*>(slots_a));
    const float row_max = row.max, inv_sum = 1.0f / row.sum;
    for (int c = threadIdx.x; c < chunks; c += BLOCK) {
        load_chunk<W>(in, c, v);
        for (int i = 0; i < W; ++i) v[i] = SOFTMAX_EXP(v[i] - row_max) * inv_sum;
        store_chunk<W>(out, c, v);
    }
#else
    float mine = -INFINITY;
    for (int c = threadIdx.x; c < chunks; c += BLOCK) {
        load_chunk<W>(in, c, v);
        for (int i = 0; i < W; ++i) mine = fmaxf(mine, v[i]);
    }
    const float row_max = block_all_reduce(mine, MaxOp(), -INFINITY, slots_a);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += BLOCK) {
        load_chunk<W>(in, c, v);
        for (int i = 0; i < W; ++i) sum += SOFTMAX_EXP(v[i] - row_max);
    }
    const float row_sum = block_all_reduce(sum, SumOp(), 0.0f, slots_b);
    for (int c = threadIdx.x; c < chunks; c += BLOCK) {
        load_chunk<W>(in, c, v);
        for (int i = 0; i < W; ++i) v[i] = SOFTMAX_EXP(v[i] - row_max) / row_sum;
        store_chunk<W>(out, c, v);
    }
#endif
}

#if OPT_ROW_IN_REGISTERS
// The row read once into registers: thread t holds chunks t, t + BLOCK, ... (coalesced),
// MAX_COLS_PER_THREAD floats at most. The loads are all issued before any math.
template <int W>
__device__ __forceinline__ void softmax_row_in_registers(SOFTMAX_IN in, SOFTMAX_OUT out, int N,
                                                         float* slots_a, float* slots_b) {
    constexpr int per_thread = MAX_COLS_PER_THREAD / W;
    const int chunks = N / W;
    float v[MAX_COLS_PER_THREAD];
#pragma unroll
    for (int k = 0; k < per_thread; ++k) {
        const int c = threadIdx.x + k * BLOCK;
        if (c < chunks) {
            load_chunk<W>(in, c, &v[k * W]);
        } else {
            for (int i = 0; i < W; ++i) v[k * W + i] = -INFINITY;
        }
    }
    float mine = -INFINITY;
#pragma unroll
    for (int j = 0; j < MAX_COLS_PER_THREAD; ++j) mine = fmaxf(mine, v[j]);
#if OPT_ONLINE_SOFTMAX
    // The thread's own maximum and sum, merged across the block in one reduction; the
    // thread then rescales its exponentials by exp(own max - row max) / row sum.
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < per_thread; ++k) {
        if (threadIdx.x + k * BLOCK < chunks) {
            for (int i = 0; i < W; ++i) {
                v[k * W + i] = SOFTMAX_EXP(v[k * W + i] - mine);
                sum += v[k * W + i];
            }
        }
    }
    const Stats row = block_all_reduce(Stats{mine, sum}, MergeOp(), Stats{-INFINITY, 0.0f},
                                       reinterpret_cast<Stats*>(slots_a));
    const float scale = (mine == -INFINITY) ? 0.0f : SOFTMAX_EXP(mine - row.max) / row.sum;
#pragma unroll
    for (int j = 0; j < MAX_COLS_PER_THREAD; ++j) v[j] *= scale;
#else
    const float row_max = block_all_reduce(mine, MaxOp(), -INFINITY, slots_a);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < per_thread; ++k) {
        if (threadIdx.x + k * BLOCK < chunks) {
            for (int i = 0; i < W; ++i) {
                v[k * W + i] = SOFTMAX_EXP(v[k * W + i] - row_max);
                sum += v[k * W + i];
            }
        }
    }
    const float row_sum = block_all_reduce(sum, SumOp(), 0.0f, slots_b);
#pragma unroll
    for (int j = 0; j < MAX_COLS_PER_THREAD; ++j) v[j] /= row_sum;
#endif
#pragma unroll
    for (int k = 0; k < per_thread; ++k) {
        const int c = threadIdx.x + k * BLOCK;
        if (c < chunks) store_chunk<W>(out, c, &v[k * W]);
    }
}
#endif

template <int W>
__device__ __forceinline__ void softmax_row(SOFTMAX_IN in, SOFTMAX_OUT out, int N,
                                            float* slots_a, float* slots_b) {
#if OPT_ROW_IN_REGISTERS
    // A row longer than the registers hold (BLOCK x MAX_COLS_PER_THREAD) is streamed.
    if (N <= BLOCK * MAX_COLS_PER_THREAD) {
        softmax_row_in_registers<W>(in, out, N, slots_a, slots_b);
        return;
    }
#endif
    softmax_row_streamed<W>(in, out, N, slots_a, slots_b);
}
#endif

extern "C" __global__ void SOFTMAX_BOUNDS softmax_rows(SOFTMAX_IN x, SOFTMAX_OUT y, int M, int N) {
#if OPT_BLOCK_PER_ROW
    // One block per row (grid = M); the threads stride over its columns together.
    // Two floats per slot so a reduction of (max, sum) pairs fits the same arrays.
    __shared__ float slots_a[2 * REDUCE_SLOTS], slots_b[2 * REDUCE_SLOTS];
    const long long row = blockIdx.x;
    SOFTMAX_IN in = x + row * N;
    SOFTMAX_OUT out = y + row * N;
#if OPT_VEC4
    // float4s need every row 16-byte aligned: N % 4 == 0 (the buffers themselves are).
    if (N % 4 == 0) {
        softmax_row<4>(in, out, N, slots_a, slots_b);
        return;
    }
#endif
    softmax_row<1>(in, out, N, slots_a, slots_b);
#else
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) {
        return;
    }
    const float* in = x + row * N;
    float* out = y + row * N;
    float row_max = -INFINITY;
    for (int j = 0; j < N; ++j) {
        row_max = fmaxf(row_max, in[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < N; ++j) {
        sum += SOFTMAX_EXP(in[j] - row_max);
    }
    for (int j = 0; j < N; ++j) {
        out[j] = SOFTMAX_EXP(in[j] - row_max) / sum;
    }
#endif
}
