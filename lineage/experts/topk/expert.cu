// topk expert: the k largest values of each row, sorted descending, with their indices.
// Each optimization is one flag (manifest.json); with every flag off this is the plain
// first attempt, one thread per row and k selection passes over it (like the naive kernel).
//
// With every flag on: one block per row, the row read once (float4s) into registers as
// order-preserving 32-bit keys; a bound that is proven to lie at or below the k-th largest
// key (the per-warp best thread maxima) leaves a few hundred candidates, gathered into
// shared memory; a radix select over their keys finds the k-th largest key exactly; the
// elements above it and as many of those equal to it as are needed become the k survivors,
// which are ranked and written in order.
//
// Ties: any index among equal values is accepted, so the survivors at the threshold are
// whichever `tied` of them reach their counter first. Every element is placed at most
// once, so the indices are unique, and each index is written beside its own value.

#if OPT_LAUNCH_BOUNDS
// One block of BLOCK threads per SM: the compiler may use 65536 / BLOCK registers.
#define TOPK_BOUNDS __launch_bounds__(BLOCK, 1)
#else
#define TOPK_BOUNDS
#endif

#if OPT_RESTRICT
#define TOPK_IN const float* __restrict__
#define TOPK_VALUES float* __restrict__
#define TOPK_INDICES int* __restrict__
#else
#define TOPK_IN const float*
#define TOPK_VALUES float*
#define TOPK_INDICES int*
#endif

typedef unsigned long long Word;

// An order-preserving map from a float to 32 bits: a > b as floats iff key(a) > key(b)
// (with -0 just below +0). Positive floats get the sign bit set, negative ones flip all bits.
__device__ __forceinline__ unsigned key_of(float v) {
    unsigned bits;
    memcpy(&bits, &v, sizeof bits);
    return bits ^ ((unsigned)((int)bits >> 31) | 0x80000000u);
}

__device__ __forceinline__ float value_of(unsigned key) {
    const unsigned bits = key ^ ((unsigned)((int)~key >> 31) | 0x80000000u);
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

// An element's place in the output as one word: the larger key first, the lower index
// first among equal keys. Words of distinct indices differ; 0 is no element (index < 2^31).
__device__ __forceinline__ Word order_word(unsigned key, int index) {
    return ((Word)key << 32) | (0xFFFFFFFFu - (unsigned)index);
}

__device__ __forceinline__ unsigned key_of_word(Word w) { return (unsigned)(w >> 32); }
__device__ __forceinline__ int index_of_word(Word w) { return (int)(0xFFFFFFFFu - (unsigned)w); }

#if OPT_BLOCK_PER_ROW
#if OPT_RADIX_SELECT
// The radix path's block: BLOCK threads (1024 hold a 32768-column row in registers).
#define ROW_THREADS BLOCK
#else
// The rounds' block: each of the k rounds ends in a block-wide maximum, cheaper over fewer
// threads, and 128-thread blocks still fill the SMs with rows.
#define ROW_THREADS SELECTION_BLOCK
#endif
static_assert(ROW_THREADS % 32 == 0 && ROW_THREADS <= 1024 && (ROW_THREADS & (ROW_THREADS - 1)) == 0,
              "a power of two of whole warps, at most 1024 threads");

#if OPT_RADIX_SELECT
#define BINS (1 << RADIX_BITS)
static_assert(32 % RADIX_BITS == 0, "the digits tile the 32-bit key");
static_assert(BINS % 32 == 0 && BINS <= BLOCK, "a thread per bin, whole warps");
#endif

// Everything the block shares; a field exists only where its flag uses it.
struct Shared {
#if OPT_WARP_SHUFFLE_REDUCE
    Word warp_best[32];
#else
    Word slots[ROW_THREADS];
#endif
#if OPT_RADIX_SELECT
    unsigned hist[BINS];
    unsigned warp_total[32];
    unsigned digit, digit_above;       // the bin holding the rank-th largest, and the count above it
    unsigned n_above, n_tied;          // survivors placed so far
    Word survivors[MAX_K];
#endif
#if OPT_CANDIDATE_FILTER
    unsigned warp_bound[32];
    unsigned n_candidates;
    Word candidates[CANDIDATE_CAPACITY];
#endif
};

// Columns [W c, W c + W) of a row, for W = 1 or 4 (4 only when the row is 16-byte aligned).
template <int W>
__device__ __forceinline__ void load_chunk(TOPK_IN row, int c, float* v) {
#if OPT_VEC4
    if constexpr (W == 4) {
        const float4 q = reinterpret_cast<const float4*>(row)[c];
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        return;
    }
#endif
    v[0] = row[c];
}

// f(key, index) for every element of the row, read from global memory (coalesced).
template <int W, typename F>
__device__ __forceinline__ void for_each_streamed(TOPK_IN row, int N, F f) {
    for (int c = threadIdx.x; c < N / W; c += ROW_THREADS) {
        float v[W];
        load_chunk<W>(row, c, v);
        for (int i = 0; i < W; ++i) f(key_of(v[i]), W * c + i);
    }
}

// ---- the block's maximum word, in every thread ----------------------------------------

#if OPT_WARP_SHUFFLE_REDUCE
__device__ __forceinline__ Word warp_max(Word v) {
    for (int mask = 16; mask > 0; mask /= 2) {
        const Word other = __shfl_xor_sync(0xFFFFFFFFu, v, mask);
        v = other > v ? other : v;
    }
    return v;
}
#endif

__device__ __forceinline__ Word block_max(Word v, Shared& sh) {
    const int tid = threadIdx.x;
#if OPT_WARP_SHUFFLE_REDUCE
    v = warp_max(v);
    if (tid % 32 == 0) sh.warp_best[tid / 32] = v;
    __syncthreads();
    v = warp_max(tid % 32 < ROW_THREADS / 32 ? sh.warp_best[tid % 32] : 0);
#else
    // The textbook tree over ROW_THREADS words in shared memory, log2(ROW_THREADS) barriers.
    sh.slots[tid] = v;
    __syncthreads();
    for (int stride = ROW_THREADS / 2; stride > 0; stride /= 2) {
        if (tid < stride && sh.slots[tid + stride] > sh.slots[tid]) sh.slots[tid] = sh.slots[tid + stride];
        __syncthreads();
    }
    v = sh.slots[0];
#endif
    __syncthreads();  // the next call may overwrite the slots only once all have read them
    return v;
}

// ---- k selection rounds: the shape without a radix select, and for k > MAX_K ----------

// Round t takes the largest word below round t-1's: the elements in output order.
template <int W>
__device__ void topk_by_selection(TOPK_IN row, TOPK_VALUES values, TOPK_INDICES indices, int N,
                                  int k, Shared& sh) {
    Word last = 0;
    for (int t = 0; t < k; ++t) {
        Word best = 0;
        for_each_streamed<W>(row, N, [&](unsigned key, int index) {
            const Word w = order_word(key, index);
            if ((t == 0 || w < last) && w > best) best = w;
        });
        best = block_max(best, sh);
        if (threadIdx.x == 0) {
            values[t] = value_of(key_of_word(best));
            indices[t] = index_of_word(best);
        }
        last = best;
    }
}

#if OPT_RADIX_SELECT
// ---- radix select: the k-th largest key, a digit of RADIX_BITS at a time --------------

// The k-th largest key, how many of the k lie above it and how many equal to it to take.
struct Threshold {
    unsigned key, above, tied;
};

#if OPT_WARP_SHUFFLE_REDUCE
// The sum of v over this lane and the lanes above it.
__device__ __forceinline__ unsigned warp_suffix_sum(unsigned v) {
    const int lane = threadIdx.x % 32;
    for (int offset = 1; offset < 32; offset *= 2) {
        const unsigned other = __shfl_down_sync(0xFFFFFFFFu, v, offset);
        if (lane + offset < 32) v += other;
    }
    return v;
}
#endif

// The bin b where the rank-th largest lies: count(bins > b) < rank <= count(bins >= b).
// Writes sh.digit and sh.digit_above; the caller's barrier publishes them.
__device__ __forceinline__ void find_digit(unsigned rank, Shared& sh) {
#if OPT_WARP_SHUFFLE_REDUCE
    // A thread per bin: suffix sums within each warp by shuffles, then across warps.
    const int b = threadIdx.x;
    unsigned count = 0, suffix = 0;
    if (b < BINS) {
        count = sh.hist[b];
        suffix = warp_suffix_sum(count);
        if (b % 32 == 0) sh.warp_total[b / 32] = suffix;
    }
    __syncthreads();
    if (b < BINS) {
        unsigned above = suffix - count;
        for (int w = b / 32 + 1; w < BINS / 32; ++w) above += sh.warp_total[w];
        if (above < rank && rank <= above + count) sh.digit = b, sh.digit_above = above;
    }
#else
    // One thread walks the bins down from the largest digit.
    if (threadIdx.x == 0) {
        unsigned above = 0;
        for (int b = BINS - 1; b >= 0; --b) {
            if (rank <= above + sh.hist[b]) {
                sh.digit = b, sh.digit_above = above;
                break;
            }
            above += sh.hist[b];
        }
    }
#endif
}

// for_each visits a set of elements that holds the row's k largest (at least k elements).
template <typename ForEach>
__device__ Threshold radix_select(ForEach for_each, unsigned k, Shared& sh) {
    unsigned prefix = 0, mask = 0, rank = k;  // rank: the wanted one among keys with this prefix
    for (int shift = 32 - RADIX_BITS; shift >= 0; shift -= RADIX_BITS) {
        for (int b = threadIdx.x; b < BINS; b += BLOCK) sh.hist[b] = 0;
        __syncthreads();
        for_each([&](unsigned key, int) {
            if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & (BINS - 1)], 1u);
        });
        __syncthreads();
        find_digit(rank, sh);
        __syncthreads();
        prefix |= sh.digit << shift;
        mask |= (BINS - 1u) << shift;
        rank -= sh.digit_above;
    }
    return {prefix, k - rank, rank};
}

// The k survivors into sh.survivors: every key above the threshold, and the first
// `tied` of the keys equal to it to reach the counter (any tied index is accepted).
// Padding past column N (key 0, never above a threshold) is skipped among the ties.
template <typename ForEach>
__device__ void gather_survivors(ForEach for_each, Threshold t, int N, Shared& sh) {
    if (threadIdx.x == 0) sh.n_above = 0, sh.n_tied = 0;
    __syncthreads();
    for_each([&](unsigned key, int index) {
        if (key > t.key) {
            sh.survivors[atomicAdd(&sh.n_above, 1u)] = order_word(key, index);
        } else if (key == t.key && index < N) {
            const unsigned slot = atomicAdd(&sh.n_tied, 1u);
            if (slot < t.tied) sh.survivors[t.above + slot] = order_word(key, index);
        }
    });
    __syncthreads();
}

// Each survivor's place is the number of survivors before it in output order.
__device__ void write_ranked(unsigned k, TOPK_VALUES values, TOPK_INDICES indices, Shared& sh) {
    for (unsigned i = threadIdx.x; i < k; i += BLOCK) {
        const Word mine = sh.survivors[i];
        unsigned place = 0;
        for (unsigned j = 0; j < k; ++j) place += sh.survivors[j] > mine;
        values[place] = value_of(key_of_word(mine));
        indices[place] = index_of_word(mine);
    }
}

template <typename ForEach>
__device__ __forceinline__ void select_and_write(ForEach for_each, int N, int k, TOPK_VALUES values,
                                                 TOPK_INDICES indices, Shared& sh) {
    const Threshold t = radix_select(for_each, k, sh);
    gather_survivors(for_each, t, N, sh);
    write_ranked(k, values, indices, sh);
}

#if OPT_ROW_IN_REGISTERS
// The row as keys, KEYS_PER_THREAD per thread: chunk c = threadIdx.x + j BLOCK holds
// keys[W j .. W j + W). Columns past N hold key 0, the smallest: with N >= k real keys
// they change neither the k-th largest nor the count above it, so the passes visit them
// and only the rare branches (ties, gathering) check the column.
template <int W>
__device__ __forceinline__ void load_keys(TOPK_IN row, int N, unsigned* keys) {
#pragma unroll
    for (int j = 0; j < KEYS_PER_THREAD / W; ++j) {
        const int c = threadIdx.x + j * BLOCK;
        if (c < N / W) {
            float v[W];
            load_chunk<W>(row, c, v);
            for (int i = 0; i < W; ++i) keys[W * j + i] = key_of(v[i]);
        } else {
            for (int i = 0; i < W; ++i) keys[W * j + i] = 0u;
        }
    }
}

template <int W>
__device__ __forceinline__ int column_of(int slot) {
    return W * (threadIdx.x + slot / W * BLOCK) + slot % W;
}

#if OPT_CANDIDATE_FILTER
// A key at or below the k-th largest: each warp's per_warp-th largest thread maximum is
// exceeded or met by per_warp distinct elements of that warp, so the smallest of them over
// the warps is met by per_warp x warps >= k elements. 0 (keeps everything) for large k.
__device__ unsigned kth_lower_bound(unsigned thread_max, int k, Shared& sh) {
    constexpr int warps = BLOCK / 32;
    const int per_warp = (k + warps - 1) / warps, lane = threadIdx.x % 32;
    unsigned bound = 0;
    if (per_warp <= MAX_PER_WARP) {
        Word mine = ((Word)thread_max << 32) | lane;
        for (int r = 0; r < per_warp; ++r) {
            const Word best = warp_max(mine);
            bound = key_of_word(best);
            if ((int)(best & 31) == lane) mine = 0;  // taken: the next round finds the next
        }
    }
    if (lane == 0) sh.warp_bound[threadIdx.x / 32] = bound;
    if (threadIdx.x == 0) sh.n_candidates = 0;
    __syncthreads();
    bound = lane < warps ? sh.warp_bound[lane] : 0xFFFFFFFFu;
    for (int mask = 16; mask > 0; mask /= 2) {
        const unsigned other = __shfl_xor_sync(0xFFFFFFFFu, bound, mask);
        bound = other < bound ? other : bound;
    }
    return bound;
}
#endif

template <int W>
__device__ void topk_in_registers(TOPK_IN row, TOPK_VALUES values, TOPK_INDICES indices, int N,
                                  int k, Shared& sh) {
    unsigned keys[KEYS_PER_THREAD];
    load_keys<W>(row, N, keys);
    auto each_key = [&](auto f) {
#pragma unroll
        for (int s = 0; s < KEYS_PER_THREAD; ++s) f(keys[s], column_of<W>(s));
    };
#if OPT_CANDIDATE_FILTER
    unsigned thread_max = 0;
    each_key([&](unsigned key, int) { thread_max = key > thread_max ? key : thread_max; });
    const unsigned bound = kth_lower_bound(thread_max, k, sh);
    auto each_candidate_key = [&](auto f) {
        each_key([&](unsigned key, int column) {
            if (key >= bound) f(key, column);
        });
    };
    // The few keys at or above the bound, gathered once; visited from shared memory.
    each_candidate_key([&](unsigned key, int column) {
        if (column >= N) return;  // padding, met only when the bound is 0
        const unsigned slot = atomicAdd(&sh.n_candidates, 1u);
        if (slot < CANDIDATE_CAPACITY) sh.candidates[slot] = order_word(key, column);
    });
    __syncthreads();
    const unsigned n = sh.n_candidates;
    if (n <= CANDIDATE_CAPACITY) {
        auto each_gathered = [&](auto f) {
            for (unsigned i = threadIdx.x; i < n; i += BLOCK) {
                f(key_of_word(sh.candidates[i]), index_of_word(sh.candidates[i]));
            }
        };
        select_and_write(each_gathered, N, k, values, indices, sh);
        return;
    }
    // Too many candidates to gather (many ties at the top, a constant row, or k > 32 MAX_PER_WARP):
    // the registers are visited, the bound still sparing most of the histogram atomics.
    select_and_write(each_candidate_key, N, k, values, indices, sh);
#else
    select_and_write(each_key, N, k, values, indices, sh);
#endif
}
#endif

template <int W>
__device__ void topk_by_radix(TOPK_IN row, TOPK_VALUES values, TOPK_INDICES indices, int N, int k,
                              Shared& sh) {
#if OPT_ROW_IN_REGISTERS
    // A row longer than the registers hold (BLOCK x KEYS_PER_THREAD) is streamed.
    if (N <= BLOCK * KEYS_PER_THREAD) {
        topk_in_registers<W>(row, values, indices, N, k, sh);
        return;
    }
#endif
    auto each_streamed = [&](auto f) { for_each_streamed<W>(row, N, f); };
    select_and_write(each_streamed, N, k, values, indices, sh);
}
#endif

template <int W>
__device__ __forceinline__ void topk_block_row(TOPK_IN row, TOPK_VALUES values, TOPK_INDICES indices,
                                               int N, int k, Shared& sh) {
#if OPT_RADIX_SELECT
    // The survivors live in shared memory: more than MAX_K of them take the rounds.
    if (k <= MAX_K) {
        topk_by_radix<W>(row, values, indices, N, k, sh);
        return;
    }
#endif
    topk_by_selection<W>(row, values, indices, N, k, sh);
}
#endif

extern "C" __global__ void TOPK_BOUNDS topk_rows(TOPK_IN x, TOPK_VALUES values, TOPK_INDICES indices,
                                                 int M, int N, int k) {
#if OPT_BLOCK_PER_ROW
    // One block per row (grid = M).
    __shared__ Shared sh;
    const long long row = blockIdx.x;
    TOPK_IN in = x + row * N;
#if OPT_VEC4
    // float4s need every row 16-byte aligned: N % 4 == 0 (the buffers themselves are).
    if (N % 4 == 0) {
        topk_block_row<4>(in, values + row * k, indices + row * k, N, k, sh);
        return;
    }
#endif
    topk_block_row<1>(in, values + row * k, indices + row * k, N, k, sh);
#else
    // One thread per row, k passes: pass t takes the largest word below pass t-1's.
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) {
        return;
    }
    const float* in = x + row * N;
    Word last = 0;
    for (int t = 0; t < k; ++t) {
        Word best = 0;
        for (int j = 0; j < N; ++j) {
            const Word w = order_word(key_of(in[j]), j);
            if ((t == 0 || w < last) && w > best) best = w;
        }
        values[row * k + t] = value_of(key_of_word(best));
        indices[row * k + t] = index_of_word(best);
        last = best;
    }
#endif
}
