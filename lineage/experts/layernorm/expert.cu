// layernorm expert: y = (x - mean) / sqrt(var + eps) * gamma + beta over rows, at the copy
// ceiling. Each optimization is one flag (manifest.json); with every flag off this is the
// plain first attempt, one thread per row and three passes over it (mean, variance,
// normalised write).
//
// With every flag on: one block per row, the row held in registers as float4s so x is
// read from DRAM once and y written once (gamma and beta, 32 KB, stay in L2), each
// thread's exact (count, mean, M2) merged across the block in one reduction (Chan et al.).

#if OPT_LAUNCH_BOUNDS
#define LAYERNORM_BOUNDS __launch_bounds__(BLOCK, MIN_BLOCKS_PER_SM)
#else
#define LAYERNORM_BOUNDS
#endif

#if OPT_RESTRICT
#define LAYERNORM_IN const float* __restrict__
#define LAYERNORM_OUT float* __restrict__
#else
#define LAYERNORM_IN const float*
#define LAYERNORM_OUT float*
#endif

#if OPT_BLOCK_PER_ROW
static_assert((BLOCK & (BLOCK - 1)) == 0 && BLOCK >= 32, "BLOCK is a power of two, at least a warp");

struct SumOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

#if OPT_SINGLE_PASS_STATS
// Count, mean and sum of squared deviations of a set of values.
struct Moments {
    float count, mean, m2;
};
// The moments of the union of two sets (Chan, Golub and LeVeque): stable where the sum
// and sum of squares would cancel.
__device__ __forceinline__ Moments merge(Moments a, Moments b) {
    const float count = a.count + b.count;
    if (count == 0.0f) return a;
    const float delta = b.mean - a.mean, share = b.count / count;
    return {count, a.mean + delta * share, a.m2 + b.m2 + delta * delta * a.count * share};
}
struct MergeOp {
    __device__ __forceinline__ Moments operator()(Moments a, Moments b) const { return merge(a, b); }
};
#endif

#if OPT_WARP_SHUFFLE_REDUCE
__device__ __forceinline__ float shuffle_xor(float v, int mask) {
    return __shfl_xor_sync(0xFFFFFFFFu, v, mask);
}
#if OPT_SINGLE_PASS_STATS
__device__ __forceinline__ Moments shuffle_xor(Moments v, int mask) {
    return {shuffle_xor(v.count, mask), shuffle_xor(v.mean, mask), shuffle_xor(v.m2, mask)};
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
__device__ __forceinline__ void load_chunk(LAYERNORM_IN row, int c, float* v) {
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
__device__ __forceinline__ void store_chunk(LAYERNORM_OUT row, int c, const float* v) {
#if OPT_VEC4
    if constexpr (W == 4) {
        reinterpret_cast<float4*>(row)[c] = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
#endif
    row[c] = v[0];
}

// v <- (v - mean) * inv_std * gamma + beta for the chunk c, then stored.
template <int W>
__device__ __forceinline__ void normalize_chunk(float* v, int c, float mean, float inv_std,
                                                LAYERNORM_IN gamma, LAYERNORM_IN beta, LAYERNORM_OUT out) {
    float g[W], b[W];
    load_chunk<W>(gamma, c, g);
    load_chunk<W>(beta, c, b);
    for (int i = 0; i < W; ++i) v[i] = (v[i] - mean) * inv_std * g[i] + b[i];
    store_chunk<W>(out, c, v);
}

// Streams the row from global memory for the statistics and again for the write: the
// shape of every row too long for the registers.
template <int W>
__device__ __forceinline__ void layernorm_row_streamed(LAYERNORM_IN in, LAYERNORM_IN gamma, LAYERNORM_IN beta,
                                                       LAYERNORM_OUT out, int N, float eps,
                                                       float* slots_a, float* slots_b) {
    const int chunks = N / W;
    float v[W];
#if OPT_SINGLE_PASS_STATS
    // One read for both statistics: Welford's update, one value at a time.
    Moments mine = {0.0f, 0.0f, 0.0f};
    for (int c = threadIdx.x; c < chunks; c += BLOCK) {
        load_chunk<W>(in, c, v);
        for (int i = 0; i < W; ++i) mine = merge(mine, Moments{1.0f, v[i], 0.0f});
    }
    const Moments row = block_all_reduce(mine, MergeOp(), Moments{0.0f, 0.0f, 0.0f},
                                         reinterpret_cast<Moments*>(slots_a));
    const float mean = row.mean, variance = row.m2 / N;
#else
    float sum = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += BLOCK) {
        load_chunk<W>(in, c, v);
        for (int i = 0; i < W; ++i) sum += v[i];
    }
    const float mean = block_all_reduce(sum, SumOp(), 0.0f, slots_a) / N;
    float squares = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += BLOCK) {
        load_chunk<W>(in, c, v);
        for (int i = 0; i < W; ++i) squares += (v[i] - mean) * (v[i] - mean);
    }
    const float variance = block_all_reduce(squares, SumOp(), 0.0f, slots_b) / N;
#endif
    const float inv_std = 1.0f / sqrtf(variance + eps);
    for (int c = threadIdx.x; c < chunks; c += BLOCK) {
        load_chunk<W>(in, c, v);
        normalize_chunk<W>(v, c, mean, inv_std, gamma, beta, out);
    }
}

#if OPT_ROW_IN_REGISTERS
// The row read once into registers: thread t holds chunks t, t + BLOCK, ... (coalesced),
// MAX_COLS_PER_THREAD floats at most. The loads are all issued before any math.
template <int W>
__device__ __forceinline__ void layernorm_row_in_registers(LAYERNORM_IN in, LAYERNORM_IN gamma,
                                                           LAYERNORM_IN beta, LAYERNORM_OUT out, int N,
                                                           float eps, float* slots_a, float* slots_b) {
    constexpr int per_thread = MAX_COLS_PER_THREAD / W;
    const int chunks = N / W;
    float v[MAX_COLS_PER_THREAD];
    int mine = 0;  // this thread's chunks
#pragma unroll
    for (int k = 0; k < per_thread; ++k) {
        const int c = threadIdx.x + k * BLOCK;
        if (c < chunks) {
            load_chunk<W>(in, c, &v[k * W]);
            ++mine;
        } else {
            for (int i = 0; i < W; ++i) v[k * W + i] = 0.0f;
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < MAX_COLS_PER_THREAD; ++j) sum += v[j];  // the padding is zero
#if OPT_SINGLE_PASS_STATS
    // The thread's exact moments from its registers (two passes over them cost no
    // memory), merged across the block in one reduction.
    const float count = (float)(mine * W);
    const float own_mean = (mine > 0) ? sum / count : 0.0f;
    float own_m2 = 0.0f;
#pragma unroll
    for (int k = 0; k < per_thread; ++k) {
        if (k < mine) {
            for (int i = 0; i < W; ++i) own_m2 += (v[k * W + i] - own_mean) * (v[k * W + i] - own_mean);
        }
    }
    const Moments row = block_all_reduce(Moments{count, own_mean, own_m2}, MergeOp(),
                                         Moments{0.0f, 0.0f, 0.0f}, reinterpret_cast<Moments*>(slots_a));
    const float mean = row.mean, variance = row.m2 / N;
#else
    const float mean = block_all_reduce(sum, SumOp(), 0.0f, slots_a) / N;
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < per_thread; ++k) {
        if (k < mine) {
            for (int i = 0; i < W; ++i) squares += (v[k * W + i] - mean) * (v[k * W + i] - mean);
        }
    }
    const float variance = block_all_reduce(squares, SumOp(), 0.0f, slots_b) / N;
#endif
    const float inv_std = 1.0f / sqrtf(variance + eps);
#pragma unroll
    for (int k = 0; k < per_thread; ++k) {
        if (k < mine) normalize_chunk<W>(&v[k * W], threadIdx.x + k * BLOCK, mean, inv_std, gamma, beta, out);
    }
}
#endif

template <int W>
__device__ __forceinline__ void layernorm_row(LAYERNORM_IN in, LAYERNORM_IN gamma, LAYERNORM_IN beta,
                                              LAYERNORM_OUT out, int N, float eps, float* slots_a, float* slots_b) {
#if OPT_ROW_IN_REGISTERS
    // A row longer than the registers hold (BLOCK x MAX_COLS_PER_THREAD) is streamed.
    if (N <= BLOCK * MAX_COLS_PER_THREAD) {
        layernorm_row_in_registers<W>(in, gamma, beta, out, N, eps, slots_a, slots_b);
        return;
    }
#endif
    layernorm_row_streamed<W>(in, gamma, beta, out, N, eps, slots_a, slots_b);
}
#endif

extern "C" __global__ void LAYERNORM_BOUNDS layernorm_rows(LAYERNORM_IN x, LAYERNORM_IN gamma, LAYERNORM_IN beta,
                                                           LAYERNORM_OUT y, int M, int N, float eps) {
#if OPT_BLOCK_PER_ROW
    // One block per row (grid = M); the threads stride over its columns together.
    // Three floats per slot so a reduction of moments fits the same arrays.
    __shared__ float slots_a[3 * REDUCE_SLOTS], slots_b[3 * REDUCE_SLOTS];
    const long long row = blockIdx.x;
    LAYERNORM_IN in = x + row * N;
    LAYERNORM_OUT out = y + row * N;
#if OPT_VEC4
    // float4s need every row 16-byte aligned: N % 4 == 0 (the buffers themselves are).
    if (N % 4 == 0) {
        layernorm_row<4>(in, gamma, beta, out, N, eps, slots_a, slots_b);
        return;
    }
#endif
    layernorm_row<1>(in, gamma, beta, out, N, eps, slots_a, slots_b);
#else
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) {
        return;
    }
    const float* in = x + row * N;
    float* out = y + row * N;
    float sum = 0.0f;
    for (int j = 0; j < N; ++j) {
        sum += in[j];
    }
    float mean = sum / N;
    float squares = 0.0f;
    for (int j = 0; j < N; ++j) {
        float d = in[j] - mean;
        squares += d * d;
    }
    float inv_std = 1.0f / sqrtf(squares / N + eps);
    for (int j = 0; j < N; ++j) {
        out[j] = (in[j] - mean) * inv_std * gamma[j] + beta[j];
    }
#endif
}
