// cross_entropy expert: loss[b] = logsumexp(logits[b]) - logits[b, labels[b]], at the copy
// ceiling. Each optimization is one flag (manifest.json); with every flag off this is the
// plain first attempt, one thread per row and two passes over it (maximum, then the sum
// of exponentials).
//
// With every flag on: one block per row, the row streamed once as float4s, four of them
// in flight per thread, each thread keeping a running (max, sum of exponentials) that is
// merged across the block in one shuffle-and-shared-slot reduction. A row of 32000 logits
// (125 KB) is read exactly once; the output is one float per row.

#if OPT_LAUNCH_BOUNDS
#define XENT_BOUNDS __launch_bounds__(BLOCK, MIN_BLOCKS_PER_SM)
#else
#define XENT_BOUNDS
#endif

#if OPT_RESTRICT
#define XENT_IN const float* __restrict__
#define XENT_LABELS const int* __restrict__
#define XENT_OUT float* __restrict__
#else
#define XENT_IN const float*
#define XENT_LABELS const int*
#define XENT_OUT float*
#endif

#if OPT_FAST_MATH
// ex2.approx and lg2.approx: a few ulp, against the task's atol of 3e-4 on the loss.
#define XENT_EXP(v) __expf(v)
#define XENT_LOG(v) __logf(v)
#else
#define XENT_EXP(v) expf(v)
#define XENT_LOG(v) logf(v)
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
    const float sa = (a.max == -INFINITY) ? 0.0f : a.sum * XENT_EXP(a.max - max);
    const float sb = (b.max == -INFINITY) ? 0.0f : b.sum * XENT_EXP(b.max - max);
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
__device__ __forceinline__ void load_chunk(XENT_IN row, int c, float* v) {
#if OPT_VEC4
    if constexpr (W == 4) {
        const float4 q = reinterpret_cast<const float4*>(row)[c];
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        return;
    }
#endif
    v[0] = row[c];
}

// Calls consume(values) on every chunk of the row this thread owns (chunks t, t + BLOCK,
// ...), `values` a float array whose length the consumer reads from its type.
template <int W, typename Consume>
__device__ __forceinline__ void for_my_chunks(XENT_IN row, int chunks, Consume&& consume) {
    int c = threadIdx.x;
#if OPT_UNROLL
    // Four chunks loaded before any is used: four loads in flight per thread.
    for (; c + 3 * BLOCK < chunks; c += 4 * BLOCK) {
        float v[4 * W];
#pragma unroll
        for (int u = 0; u < 4; ++u) load_chunk<W>(row, c + u * BLOCK, &v[u * W]);
        consume(v);
    }
#endif
    for (; c < chunks; c += BLOCK) {
        float v[W];
        load_chunk<W>(row, c, v);
        consume(v);
    }
}

// logsumexp of the row, in every thread of the block.
template <int W>
__device__ __forceinline__ float row_logsumexp(XENT_IN row, int C, float* slots_a, float* slots_b) {
    const int chunks = C / W;
#if OPT_ONLINE_SOFTMAX
    // One read: the group's maximum first, then one rescale of the running sum per
    // group and one exponential per logit.
    Stats mine = {-INFINITY, 0.0f};
    for_my_chunks<W>(row, chunks, [&](const auto& v) {
        constexpr int count = sizeof(v) / sizeof(v[0]);
        float max = mine.max;
#pragma unroll
        for (int i = 0; i < count; ++i) max = fmaxf(max, v[i]);
        float sum = (mine.max == -INFINITY) ? 0.0f : mine.sum * XENT_EXP(mine.max - max);
#pragma unroll
        for (int i = 0; i < count; ++i) sum += XENT_EXP(v[i] - max);
        mine = {max, sum};
    });
    const Stats total = block_all_reduce(mine, MergeOp(), Stats{-INFINITY, 0.0f},
                                         reinterpret_cast<Stats*>(slots_a));
    return total.max + XENT_LOG(total.sum);
#else
    float max = -INFINITY;
    for_my_chunks<W>(row, chunks, [&](const auto& v) {
        constexpr int count = sizeof(v) / sizeof(v[0]);
        for (int i = 0; i < count; ++i) max = fmaxf(max, v[i]);
    });
    const float row_max = block_all_reduce(max, MaxOp(), -INFINITY, slots_a);
    float sum = 0.0f;
    for_my_chunks<W>(row, chunks, [&](const auto& v) {
        constexpr int count = sizeof(v) / sizeof(v[0]);
        for (int i = 0; i < count; ++i) sum += XENT_EXP(v[i] - row_max);
    });
    const float row_sum = block_all_reduce(sum, SumOp(), 0.0f, slots_b);
    return row_max + XENT_LOG(row_sum);
#endif
}
#endif

extern "C" __global__ void XENT_BOUNDS cross_entropy_rows(XENT_IN logits, XENT_LABELS labels, XENT_OUT loss,
                                                          int B, int C) {
#if OPT_BLOCK_PER_ROW
    // One block per row (grid = B); the threads stride over its columns together.
    // Two floats per slot so a reduction of (max, sum) pairs fits the same arrays.
    __shared__ float slots_a[2 * REDUCE_SLOTS], slots_b[2 * REDUCE_SLOTS];
    const long long row = blockIdx.x;
    XENT_IN z = logits + row * C;
    float lse;
#if OPT_VEC4
    // float4s need every row 16-byte aligned: C % 4 == 0 (the buffers themselves are).
    if (C % 4 == 0) {
        lse = row_logsumexp<4>(z, C, slots_a, slots_b);
    } else {
        lse = row_logsumexp<1>(z, C, slots_a, slots_b);
    }
#else
    lse = row_logsumexp<1>(z, C, slots_a, slots_b);
#endif
    if (threadIdx.x == 0) loss[row] = lse - z[labels[row]];
#else
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= B) {
        return;
    }
    const float* z = logits + row * (long long)C;
    float row_max = -INFINITY;
    for (int j = 0; j < C; ++j) {
        row_max = fmaxf(row_max, z[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < C; ++j) {
        sum += XENT_EXP(z[j] - row_max);
    }
    loss[row] = row_max + XENT_LOG(sum) - z[labels[row]];
#endif
}
