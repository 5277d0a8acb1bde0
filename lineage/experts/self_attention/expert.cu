// self_attention expert: out = softmax(q k^T / sqrt(D)) v for every (batch, head), fp32, no
// mask. q, k, v and out are (B, H, S, D) contiguous, seen here as BH = B * H heads of S rows
// of D floats. Each optimization is one flag (manifest.json); with every flag off this is
// the plain first attempt: one thread per query row, passes over the keys in global memory,
// the output row itself as the accumulator.
//
// Flash tiling: a block owns a tile of query rows and streams its head's keys and values
// through shared memory a tile at a time. Each row keeps its running maximum m and sum of
// exponentials l in registers and rescales its output accumulator by exp(m_old - m_new)
// when the maximum grows, so the S x S scores never reach memory; the division by l comes
// once, at the end.
//
// Tunables (the plan's, passed as -D): HEAD_DIM (64), the widest head the tiles hold (a
// narrower head is zero-padded to it; a wider one falls back to the plain per-row code,
// which no task size needs); PLAIN_BLOCK (128) threads a block of the plain kernel;
// FLASH_ROWS (64) query rows, a thread each, and FLASH_KEYS (32) keys a tile for the
// one-row-per-thread flash kernel; BQ (128) query rows and BK (64) keys a tile for the
// register-tiled one, whose 256 threads are 16 x 16; MIN_BLOCKS_PER_SM (2) for its bounds.
//
// Edges: rows at or past S and columns at or past D are loaded as zeros, keys at or past S
// get a score of -inf (weight 0), and only rows < S and columns < D are stored. A float4 is
// used only where D % 4 == 0, which puts every row on a 16-byte boundary (the gate's buffers
// are aligned). No thread returns before a __syncthreads that the others reach.

#define LOG2E 1.4426950408889634f

#if OPT_FAST_MATH
// Scores in log2 units (q prescaled by log2(e) / sqrt(D)), so that a weight is exp2f: ex2
// and a guard for results below 2**-126, 4 instructions (sm_90), where expf first reduces
// x log2(e) to an integer and a fraction with split-constant FMAs, 9. Both are within 2
// ulp; the task's EXP_SLACK (64 ulp of score) covers either.
#define SCORE_SCALE(D) (LOG2E / sqrtf((float)(D)))
#define WEIGHT(x) exp2f(x)
#else
#define SCORE_SCALE(D) (1.0f / sqrtf((float)(D)))
#define WEIGHT(x) expf(x)
#endif

// One query row the plain way: the largest score, then the weights, their sum and the
// weighted values (added straight into the output row), then the division. `row` counts
// rows over all heads.
__device__ void attention_row(const float* q, const float* k, const float* v, float* out, int S,
                              int D, long long row) {
    const long long head = row / S * S * D;
    const float* qi = q + row * D;
    float* o = out + row * D;
    const float scale = 1.0f / sqrtf((float)D);
    float m = -INFINITY;
    for (int j = 0; j < S; ++j) {
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += qi[d] * k[head + (long long)j * D + d];
        m = fmaxf(m, dot * scale);
    }
    for (int d = 0; d < D; ++d) o[d] = 0.0f;
    float l = 0.0f;
    for (int j = 0; j < S; ++j) {
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += qi[d] * k[head + (long long)j * D + d];
        const float p = expf(dot * scale - m);
        l += p;
        for (int d = 0; d < D; ++d) o[d] += p * v[head + (long long)j * D + d];
    }
    for (int d = 0; d < D; ++d) o[d] /= l;
}

#if OPT_FLASH_TILING && !OPT_REG_TILE
// One thread per query row: the row's prescaled q and its output accumulator in registers
// (HEAD_DIM each, every index a constant), a tile of FLASH_KEYS keys and values in shared
// memory that all threads read at the same address, a broadcast.
__device__ void attention_flash_rows(const float* q, const float* k, const float* v, float* out,
                                     int S, int D) {
    __shared__ float Ks[FLASH_KEYS][HEAD_DIM];
    __shared__ float Vs[FLASH_KEYS][HEAD_DIM];
    const int tiles_q = (S + FLASH_ROWS - 1) / FLASH_ROWS;
    const int bh = blockIdx.x / tiles_q;
    const int i = (blockIdx.x % tiles_q) * FLASH_ROWS + threadIdx.x;
    const long long head = (long long)bh * S * D;
    if (D > HEAD_DIM) {  // the whole block takes this branch: no barrier is left waiting
        if (i < S) attention_row(q, k, v, out, S, D, (long long)bh * S + i);
        return;
    }
    const bool live = i < S;
    const float scale = SCORE_SCALE(D);
    float qr[HEAD_DIM], o[HEAD_DIM];
    #pragma unroll
    for (int d = 0; d < HEAD_DIM; ++d) {
        qr[d] = live && d < D ? q[head + (long long)i * D + d] * scale : 0.0f;
        o[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int k0 = 0; k0 < S; k0 += FLASH_KEYS) {
        for (int e = threadIdx.x; e < FLASH_KEYS * HEAD_DIM; e += FLASH_ROWS) {
            const int r = e / HEAD_DIM, d = e % HEAD_DIM;
            const bool in = k0 + r < S && d < D;
            Ks[r][d] = in ? k[head + (long long)(k0 + r) * D + d] : 0.0f;
            Vs[r][d] = in ? v[head + (long long)(k0 + r) * D + d] : 0.0f;
        }
        __syncthreads();
        float s[FLASH_KEYS];
        float tile_max = -INFINITY;
        #pragma unroll
        for (int j = 0; j < FLASH_KEYS; ++j) {
            float dot = 0.0f;
            #pragma unroll
            for (int d = 0; d < HEAD_DIM; ++d) dot = fmaf(qr[d], Ks[j][d], dot);
            s[j] = k0 + j < S ? dot : -INFINITY;
            tile_max = fmaxf(tile_max, s[j]);
        }
        const float m_new = fmaxf(m, tile_max);  // finite: every tile holds key k0 < S
        const float alpha = WEIGHT(m - m_new);   // 0 on the first tile, where m = -inf
        l *= alpha;
        #pragma unroll
        for (int d = 0; d < HEAD_DIM; ++d) o[d] *= alpha;
        #pragma unroll
        for (int j = 0; j < FLASH_KEYS; ++j) {
            const float p = WEIGHT(s[j] - m_new);
            l += p;
            #pragma unroll
            for (int d = 0; d < HEAD_DIM; ++d) o[d] = fmaf(p, Vs[j][d], o[d]);
        }
        m = m_new;
        __syncthreads();  // everyone is done with this tile before the next overwrites it
    }
    if (!live) return;
    const float inv = 1.0f / l;
    #pragma unroll
    for (int d = 0; d < HEAD_DIM; ++d)
        if (d < D) out[head + (long long)i * D + d] = o[d] * inv;
}
#endif

#if OPT_REG_TILE
// 256 threads as 16 x 16: thread (tr, tc) = (tid / 16, tid % 16) owns query rows tr + 16 i
// (TM of them), keys tc + 16 j of a score tile (TNK) and output columns 4 tc .. 4 tc + 3
// (TND). The 16 threads of a row group are one half warp, so a row's maximum and sum are
// reduced by shuffles. The scores go through shared memory (Ps) to the thread that owns
// their row's output columns.
#define REG_THREADS 256
#define TM (BQ / 16)
#define TNK (BK / 16)
#define TND (HEAD_DIM / 16)
static_assert(HEAD_DIM == 64 && TND == 4, "a thread's 4 output columns are one float4");
static_assert(BQ % 16 == 0 && BK % 16 == 0, "whole row and key groups");
static_assert((BQ * HEAD_DIM) % (4 * REG_THREADS) == 0 && (BK * HEAD_DIM) % (4 * REG_THREADS) == 0,
              "every thread loads the same number of float4s of each tile");

#if OPT_SMEM_PADDING
// A warp reads two query rows (tr, tr + 1) at once and, for the scores, 16 key rows
// tc + 16 j: at a pitch of 64 floats they all start in one bank, so a float4 read of K is
// 16-way conflicted (8 lanes of a quarter warp on the same 4 banks) and one of Q 2-way. A
// pitch of 68 moves each row by 4 banks: conflict-free. The weights' pitch of BK + 16 puts
// rows tr and tr + 1 half a bank sweep apart, so the 32 scalar stores of a warp (16
// consecutive keys of two rows) and its two float4 row reads hit different banks.
#define ROW_PAD 4
#define P_PAD 16
#else
#define ROW_PAD 0
#define P_PAD 0
#endif
#define QP (HEAD_DIM + ROW_PAD)  // pitch of the q, k and v tiles, in floats
#define PP (BK + P_PAD)          // pitch of the weight tile
// Qs [BQ][QP], Ks [BK][QP], Vs [BK][QP], Ps [BQ][PP]: the plan's shared_bytes is 4 times this
// (108 KiB padded: two blocks fit an SM's 228 KiB).
#define SMEM_FLOATS (BQ * QP + 2 * BK * QP + BQ * PP)

#if OPT_UNROLL
#define SA_UNROLL _Pragma("unroll")
#else
#define SA_UNROLL
#endif

#if OPT_LAUNCH_BOUNDS
// Two blocks of 256 threads an SM (as much as the shared memory allows): at most 128
// registers a thread (65536 / 512).
#define SA_BOUNDS __launch_bounds__(REG_THREADS, MIN_BLOCKS_PER_SM)
#else
#define SA_BOUNDS
#endif

// One head's keys and values (S x D each, row-major).
struct Head {
    const float* k;
    const float* v;
    int S, D;
};

// Rows row0 .. row0 + ROWS - 1 of `src` (S x D) into a tile of pitch QP, times `scale`;
// rows >= S and columns >= D become zeros. Consecutive threads take consecutive columns of
// a row: the reads are coalesced, the stores contiguous.
template <int ROWS>
__device__ __forceinline__ void load_rows(const float* src, int row0, int S, int D, float scale,
                                          float* tile) {
#if OPT_VEC4
    if ((D & 3) == 0) {
        constexpr int PER_ROW = HEAD_DIM / 4;
        SA_UNROLL
        for (int n = 0; n < ROWS * PER_ROW / REG_THREADS; ++n) {
            const int f = threadIdx.x + n * REG_THREADS;
            const int r = f / PER_ROW, d = (f % PER_ROW) * 4;
            float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (row0 + r < S && d < D)
                x = *reinterpret_cast<const float4*>(src + (long long)(row0 + r) * D + d);
            *reinterpret_cast<float4*>(tile + r * QP + d) =
                make_float4(x.x * scale, x.y * scale, x.z * scale, x.w * scale);
        }
        return;
    }
#endif
    SA_UNROLL
    for (int n = 0; n < ROWS * HEAD_DIM / REG_THREADS; ++n) {
        const int e = threadIdx.x + n * REG_THREADS;
        const int r = e / HEAD_DIM, d = e % HEAD_DIM;
        tile[r * QP + d] = row0 + r < S && d < D ? src[(long long)(row0 + r) * D + d] * scale : 0.0f;
    }
}

#if OPT_DOUBLE_BUFFER
// cp.async: global to shared memory without passing through registers; `bytes` of the
// source are copied and the rest of the 16 (or 4) bytes zero-filled, so 0 writes zeros and
// reads nothing (the source is then the head's first element, a valid address anyway).
__device__ __forceinline__ void copy_async_16(float* dst, const float* src, int bytes) {
    const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(to), "l"(__cvta_generic_to_global(src)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void copy_async_4(float* dst, const float* src, int bytes) {
    const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(to), "l"(__cvta_generic_to_global(src)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// This thread's copies have landed (a barrier after it makes everyone's visible).
__device__ __forceinline__ void async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// load_rows without the scale, asynchronously: 16-byte copies where rows are 16-byte
// aligned (D % 4 == 0), 4-byte ones otherwise.
template <int ROWS>
__device__ __forceinline__ void copy_rows_async(const float* src, int row0, int S, int D, float* tile) {
    if ((D & 3) == 0) {
        constexpr int PER_ROW = HEAD_DIM / 4;
        SA_UNROLL
        for (int n = 0; n < ROWS * PER_ROW / REG_THREADS; ++n) {
            const int f = threadIdx.x + n * REG_THREADS;
            const int r = f / PER_ROW, d = (f % PER_ROW) * 4;
            const bool in = row0 + r < S && d < D;
            copy_async_16(tile + r * QP + d, in ? src + (long long)(row0 + r) * D + d : src, in ? 16 : 0);
        }
    } else {
        SA_UNROLL
        for (int n = 0; n < ROWS * HEAD_DIM / REG_THREADS; ++n) {
            const int e = threadIdx.x + n * REG_THREADS;
            const int r = e / HEAD_DIM, d = e % HEAD_DIM;
            const bool in = row0 + r < S && d < D;
            copy_async_4(tile + r * QP + d, in ? src + (long long)(row0 + r) * D + d : src, in ? 4 : 0);
        }
    }
}
#endif

// The tile schedule, shared by both ways of multiplying: a tile's keys and values arrive
// (as far as this thread's own share goes), then a barrier makes them everyone's. With the
// prefetch, one tile of keys and one of values suffice: the keys of tile t + 1 travel
// while tile t's weights multiply its values, and tile t's values while its scores are
// computed; two barriers a tile instead of three.
__device__ __forceinline__ void tiles_begin(const Head& h, float* Ks) {
#if OPT_DOUBLE_BUFFER
    copy_rows_async<BK>(h.k, 0, h.S, h.D, Ks);
    async_commit();
#endif
}

// This thread's share of tile k0's keys (without the prefetch, of its values too) is in.
__device__ __forceinline__ void keys_arrive(const Head& h, int k0, float* Ks, float* Vs) {
#if OPT_DOUBLE_BUFFER
    async_wait_all();  // issued during the last tile's products, or by tiles_begin
#else
    load_rows<BK>(h.k, k0, h.S, h.D, 1.0f, Ks);
    load_rows<BK>(h.v, k0, h.S, h.D, 1.0f, Vs);
#endif
}

// After the barrier that ends the last tile's use of Vs: tile k0's values set off.
__device__ __forceinline__ void values_depart(const Head& h, int k0, float* Vs) {
#if OPT_DOUBLE_BUFFER
    copy_rows_async<BK>(h.v, k0, h.S, h.D, Vs);
    async_commit();
#endif
}

__device__ __forceinline__ void values_arrive() {
#if OPT_DOUBLE_BUFFER
    async_wait_all();
#endif
}

// After the barrier that ends this tile's use of Ks: the next tile's keys set off.
__device__ __forceinline__ void keys_depart(const Head& h, int next_k0, float* Ks) {
#if OPT_DOUBLE_BUFFER
    if (next_k0 < h.S) {
        copy_rows_async<BK>(h.k, next_k0, h.S, h.D, Ks);
        async_commit();
    }
#endif
}

__device__ __forceinline__ float half_warp_max(float x) {
    #pragma unroll
    for (int mask = 8; mask > 0; mask /= 2) x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, mask));
    return x;
}

__device__ __forceinline__ float half_warp_sum(float x) {
    #pragma unroll
    for (int mask = 8; mask > 0; mask /= 2) x += __shfl_xor_sync(0xFFFFFFFFu, x, mask);
    return x;
}

// s[i][j] = q[row tr + 16 i] . k[key tc + 16 j], over the zero-padded HEAD_DIM columns.
__device__ __forceinline__ void scores_simt(const float* Qs, const float* Ks, int tr, int tc,
                                            float (*s)[TNK]) {
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        #pragma unroll
        for (int j = 0; j < TNK; ++j) s[i][j] = 0.0f;
    }
#if OPT_VEC4
    SA_UNROLL
    for (int d = 0; d < HEAD_DIM; d += 4) {
        float4 kf[TNK];
        #pragma unroll
        for (int j = 0; j < TNK; ++j) kf[j] = *reinterpret_cast<const float4*>(Ks + (tc + 16 * j) * QP + d);
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            const float4 qf = *reinterpret_cast<const float4*>(Qs + (tr + 16 * i) * QP + d);
            #pragma unroll
            for (int j = 0; j < TNK; ++j) {
                s[i][j] = fmaf(qf.x, kf[j].x, s[i][j]);
                s[i][j] = fmaf(qf.y, kf[j].y, s[i][j]);
                s[i][j] = fmaf(qf.z, kf[j].z, s[i][j]);
                s[i][j] = fmaf(qf.w, kf[j].w, s[i][j]);
            }
        }
    }
#else
    SA_UNROLL
    for (int d = 0; d < HEAD_DIM; ++d) {
        float kf[TNK];
        #pragma unroll
        for (int j = 0; j < TNK; ++j) kf[j] = Ks[(tc + 16 * j) * QP + d];
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            const float qv = Qs[(tr + 16 * i) * QP + d];
            #pragma unroll
            for (int j = 0; j < TNK; ++j) s[i][j] = fmaf(qv, kf[j], s[i][j]);
        }
    }
#endif
}

// The online-softmax step for a tile of scores: mask the keys past S, update each row's
// maximum (over the half warp), rescale its sum and outputs, turn the scores into weights.
// l holds this thread's share of a row's sum (its keys); the shares meet at the end.
__device__ __forceinline__ void softmax_simt(float (*s)[TNK], float* m, float* l, float (*o)[TND],
                                             int k0, int S, int tc) {
    if (k0 + BK > S) {
        #pragma unroll
        for (int j = 0; j < TNK; ++j) {
            if (k0 + tc + 16 * j >= S) {
                #pragma unroll
                for (int i = 0; i < TM; ++i) s[i][j] = -INFINITY;
            }
        }
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        float mx = s[i][0];
        #pragma unroll
        for (int j = 1; j < TNK; ++j) mx = fmaxf(mx, s[i][j]);
        const float m_new = fmaxf(m[i], half_warp_max(mx));  // finite: key k0 < S is in the row
        const float alpha = WEIGHT(m[i] - m_new);           // 0 on the first tile (m = -inf)
        m[i] = m_new;
        l[i] *= alpha;
        #pragma unroll
        for (int c = 0; c < TND; ++c) o[i][c] *= alpha;
        #pragma unroll
        for (int j = 0; j < TNK; ++j) {
            s[i][j] = WEIGHT(s[i][j] - m_new);
            l[i] += s[i][j];
        }
    }
}

__device__ __forceinline__ void store_weights(const float (*s)[TNK], float* Ps, int tr, int tc) {
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        #pragma unroll
        for (int j = 0; j < TNK; ++j) Ps[(tr + 16 * i) * PP + tc + 16 * j] = s[i][j];
    }
}

// Tile k0's scores in s, each row's statistics and outputs rescaled, the weights into Ps.
__device__ __forceinline__ void weights_simt(const float* Qs, const float* Ks, float* Ps, int k0, int S,
                                             float (*s)[TNK], float* m, float* l, float (*o)[TND]) {
    const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
    scores_simt(Qs, Ks, tr, tc, s);
    softmax_simt(s, m, l, o, k0, S, tc);
    store_weights(s, Ps, tr, tc);
}

// o[i][c] += sum over the tile's keys of P[row tr + 16 i][key] v[key][4 tc + c].
__device__ __forceinline__ void values_simt(const float* Ps, const float* Vs, float (*o)[TND]) {
    const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
#if OPT_VEC4
    SA_UNROLL
    for (int kk = 0; kk < BK; kk += 4) {
        float4 vf[4];
        #pragma unroll
        for (int u = 0; u < 4; ++u) vf[u] = *reinterpret_cast<const float4*>(Vs + (kk + u) * QP + 4 * tc);
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            const float4 pf = *reinterpret_cast<const float4*>(Ps + (tr + 16 * i) * PP + kk);
            const float p[4] = {pf.x, pf.y, pf.z, pf.w};
            #pragma unroll
            for (int u = 0; u < 4; ++u) {
                o[i][0] = fmaf(p[u], vf[u].x, o[i][0]);
                o[i][1] = fmaf(p[u], vf[u].y, o[i][1]);
                o[i][2] = fmaf(p[u], vf[u].z, o[i][2]);
                o[i][3] = fmaf(p[u], vf[u].w, o[i][3]);
            }
        }
    }
#else
    SA_UNROLL
    for (int kk = 0; kk < BK; ++kk) {
        float vf[TND];
        #pragma unroll
        for (int c = 0; c < TND; ++c) vf[c] = Vs[kk * QP + 4 * tc + c];
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            const float p = Ps[(tr + 16 * i) * PP + kk];
            #pragma unroll
            for (int c = 0; c < TND; ++c) o[i][c] = fmaf(p, vf[c], o[i][c]);
        }
    }
#endif
}

// Each row's sum over its half warp, then rows < S and columns < D of o / l to out.
__device__ __forceinline__ void store_rows_simt(const float (*o)[TND], float* l, float* out, int q0,
                                                int S, int D) {
    const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
    #pragma unroll
    for (int i = 0; i < TM; ++i) l[i] = half_warp_sum(l[i]);  // every lane, before any leaves
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = q0 + tr + 16 * i, d = 4 * tc;
        if (row >= S) continue;
        const float inv = 1.0f / l[i];
        float* dst = out + (long long)row * D;
#if OPT_VEC4
        if ((D & 3) == 0) {
            if (d < D)
                *reinterpret_cast<float4*>(dst + d) =
                    make_float4(o[i][0] * inv, o[i][1] * inv, o[i][2] * inv, o[i][3] * inv);
            continue;
        }
#endif
        #pragma unroll
        for (int c = 0; c < TND; ++c)
            if (d + c < D) dst[d + c] = o[i][c] * inv;
    }
}

#if OPT_TENSOR_CORES
// 3xTF32 on mma.sync m16n8k8: each operand x is hi + lo, hi its TF32 rounding and lo the
// TF32 rounding of the exact remainder, and a product is lo*hi + hi*lo + hi*hi (lo*lo and
// the remainders' rounding dropped: at most 3 * 2**-22 |a b|, 12 units of u = 2**-24). The
// three go into a fresh partial that an fp32 add puts into the accumulator, so the tensor
// core's truncating sums err on one 8-term step, not on a running total. For the scores,
// with K = D: 12 + 2 (the step) + ceil(D / 8) (the adds; the zero-padded steps past D add
// exact zeros) units of |q| . |k|, 22 at D = 64 against the task's 2 + 5 sqrt(64) = 42, 19
// at D = 33 against 30.7; below TC_MIN_D = 32 the margin thins (D = 7: 15.2), so narrow
// heads stay on fp32 FMAs. The weighted sums (S terms) have 2 (2 + 5 sqrt(S)) >= 45 units
// and use a fraction of them. Dropping one cross term (2xTF32) errs ~2**-11 relative: far
// outside the allowance, as for plain TF32.
#define TC_MIN_D 32
#define KT (BK / 8)        // 8-key steps of a tile: n of q k^T, k of P v
#define DT (HEAD_DIM / 8)  // 8-column steps of the head: k of q k^T, n of P v
static_assert(BQ == 16 * (REG_THREADS / 32), "a warp per 16 query rows");
static_assert(BK % 8 == 0 && HEAD_DIM % 8 == 0, "whole m16n8k8 steps");
static_assert(QP % 32 == 4, "fragment reads are conflict-free at a pitch of 4 mod 32 floats");
static_assert(KT == TM && DT == TM && TNK == 4 && TND == 4,
              "a warp's score and output fragments fit a thread's 8 x 4 tiles");
static_assert(2 * BK * QP <= BQ * PP, "the keys' and values' lo halves fit the weight tile");

__device__ __forceinline__ void split_tf32(float x, unsigned& hi, unsigned& lo) {
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(hi) : "f"(x));
    const float rest = x - __uint_as_float(hi);  // exact: hi holds x's leading 11 bits
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(lo) : "f"(rest));
}

// d += a (16 x 8, row-major) b (8 x 8, column-major), TF32 in, fp32 out.
__device__ __forceinline__ void mma_tf32(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_3xtf32(float* acc, const unsigned* ah, const unsigned* al,
                                           const unsigned* bh, const unsigned* bl) {
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_tf32(part, al, bh);  // the small terms first, then the large one
    mma_tf32(part, ah, bl);
    mma_tf32(part, ah, bh);
    #pragma unroll
    for (int r = 0; r < 4; ++r) acc[r] += part[r];
}

// The share of a key or value tile this thread loaded itself (load_rows' and
// copy_rows_async's mapping, so no barrier is needed first) split once for all the warps:
// hi in place, lo at the same place of `lo`. Eight warps would otherwise each split the
// whole tile, 7 instructions an element (cvt.rna.tf32 is 3 on sm_90).
__device__ __forceinline__ void split_own_share(float* tile, float* lo, int D) {
    if ((D & 3) == 0) {
        constexpr int PER_ROW = HEAD_DIM / 4;
        #pragma unroll
        for (int n = 0; n < BK * PER_ROW / REG_THREADS; ++n) {
            const int f = threadIdx.x + n * REG_THREADS;
            const int at = f / PER_ROW * QP + f % PER_ROW * 4;
            const float4 x = *reinterpret_cast<const float4*>(tile + at);
            unsigned h[4], l[4];
            split_tf32(x.x, h[0], l[0]);
            split_tf32(x.y, h[1], l[1]);
            split_tf32(x.z, h[2], l[2]);
            split_tf32(x.w, h[3], l[3]);
            *reinterpret_cast<float4*>(tile + at) = make_float4(
                __uint_as_float(h[0]), __uint_as_float(h[1]), __uint_as_float(h[2]), __uint_as_float(h[3]));
            *reinterpret_cast<float4*>(lo + at) = make_float4(
                __uint_as_float(l[0]), __uint_as_float(l[1]), __uint_as_float(l[2]), __uint_as_float(l[3]));
        }
        return;
    }
    #pragma unroll
    for (int n = 0; n < BK * HEAD_DIM / REG_THREADS; ++n) {
        const int e = threadIdx.x + n * REG_THREADS;
        const int at = e / HEAD_DIM * QP + e % HEAD_DIM;
        unsigned h, l;
        split_tf32(tile[at], h, l);
        tile[at] = __uint_as_float(h);
        lo[at] = __uint_as_float(l);
    }
}

// Warp w owns query rows 16 w .. 16 w + 15 of the block. Of a 16 x 8 tile, lane (g, t) =
// (lane / 4, lane % 4) holds, in the PTX ISA's layout for m16n8k8 .tf32, A at (g, t)
// (g + 8, t) (g, t + 4) (g + 8, t + 4), B at (t, g) (t + 4, g) and C at (g, 2t) (g, 2t + 1)
// (g + 8, 2t) (g + 8, 2t + 1). s[n][.] is the C tile of keys 8 n .. 8 n + 7.
__device__ __forceinline__ void scores_tc(const float* Qs, const float* Ks, const float* Kl, float (*s)[4]) {
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const float* qa = Qs + (16 * warp + g) * QP + t;
    #pragma unroll
    for (int n = 0; n < KT; ++n) {
        #pragma unroll
        for (int r = 0; r < 4; ++r) s[n][r] = 0.0f;
    }
    #pragma unroll
    for (int c = 0; c < DT; ++c) {
        unsigned ah[4], al[4];
        split_tf32(qa[8 * c], ah[0], al[0]);
        split_tf32(qa[8 * QP + 8 * c], ah[1], al[1]);
        split_tf32(qa[8 * c + 4], ah[2], al[2]);
        split_tf32(qa[8 * QP + 8 * c + 4], ah[3], al[3]);
        #pragma unroll
        for (int n = 0; n < KT; ++n) {
            const int at = (8 * n + g) * QP + 8 * c + t;  // B(t, g) = k[key g][column t]
            const unsigned bh[2] = {__float_as_uint(Ks[at]), __float_as_uint(Ks[at + 4])};
            const unsigned bl[2] = {__float_as_uint(Kl[at]), __float_as_uint(Kl[at + 4])};
            mma_3xtf32(s[n], ah, al, bh, bl);
        }
    }
}

// As softmax_simt, for rows g (s[.][0..1]) and g + 8 (s[.][2..3]) of the warp; a row is
// spread over the 4 lanes of a quad.
__device__ __forceinline__ void softmax_tc(float (*s)[4], float* m, float* l, float (*o)[4], int k0,
                                           int S) {
    const int t = threadIdx.x % 4;
    if (k0 + BK > S) {
        #pragma unroll
        for (int n = 0; n < KT; ++n) {
            #pragma unroll
            for (int r = 0; r < 4; ++r)
                if (k0 + 8 * n + 2 * t + r % 2 >= S) s[n][r] = -INFINITY;
        }
    }
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = fmaxf(s[0][2 * h], s[0][2 * h + 1]);
        #pragma unroll
        for (int n = 1; n < KT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 2));
        const float m_new = fmaxf(m[h], mx);
        const float alpha = WEIGHT(m[h] - m_new);
        m[h] = m_new;
        l[h] *= alpha;
        #pragma unroll
        for (int n = 0; n < DT; ++n) {
            o[n][2 * h] *= alpha;
            o[n][2 * h + 1] *= alpha;
        }
        #pragma unroll
        for (int n = 0; n < KT; ++n) {
            #pragma unroll
            for (int c = 0; c < 2; ++c) {
                s[n][2 * h + c] = WEIGHT(s[n][2 * h + c] - m_new);
                l[h] += s[n][2 * h + c];
            }
        }
    }
}

// o += P v with P straight from the score registers. A lane holds P at keys 2t and 2t + 1
// of a step, where the A layout wants keys t and t + 4: the step's keys are taken in the
// order 0 2 4 6 1 3 5 7, which the B fragment follows (rows 2t and 2t + 1 of v), and a sum
// does not care about its order. o[n][.] is the C tile of columns 8 n .. 8 n + 7.
__device__ __forceinline__ void values_tc(const float (*p)[4], const float* Vs, const float* Vl, float (*o)[4]) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    #pragma unroll
    for (int c = 0; c < KT; ++c) {
        unsigned ah[4], al[4];
        split_tf32(p[c][0], ah[0], al[0]);  // (g, key 2t)
        split_tf32(p[c][2], ah[1], al[1]);  // (g + 8, key 2t)
        split_tf32(p[c][1], ah[2], al[2]);  // (g, key 2t + 1)
        split_tf32(p[c][3], ah[3], al[3]);  // (g + 8, key 2t + 1)
        const int row = (8 * c + 2 * t) * QP + g;
        #pragma unroll
        for (int n = 0; n < DT; ++n) {
            const int at = row + 8 * n;
            const unsigned bh[2] = {__float_as_uint(Vs[at]), __float_as_uint(Vs[at + QP])};
            const unsigned bl[2] = {__float_as_uint(Vl[at]), __float_as_uint(Vl[at + QP])};
            mma_3xtf32(o[n], ah, al, bh, bl);
        }
    }
}

// As store_rows_simt, for rows g and g + 8 of the warp (a row's sum over its quad).
__device__ __forceinline__ void store_rows_tc(const float (*o)[4], float* l, float* out, int q0, int S,
                                              int D) {
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xFFFFFFFFu, l[r], 1);
        l[r] += __shfl_xor_sync(0xFFFFFFFFu, l[r], 2);
    }
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = q0 + 16 * warp + g + 8 * r;
        if (row >= S) continue;
        const float inv = 1.0f / l[r];
        float* dst = out + (long long)row * D;
        #pragma unroll
        for (int n = 0; n < DT; ++n) {
            const int d = 8 * n + 2 * t;
            const float x0 = o[n][2 * r] * inv, x1 = o[n][2 * r + 1] * inv;
            if ((D & 1) == 0 && d < D) {
                *reinterpret_cast<float2*>(dst + d) = make_float2(x0, x1);
            } else {
                if (d < D) dst[d] = x0;
                if (d + 1 < D) dst[d + 1] = x1;
            }
        }
    }
}
#endif

// The block's BQ query rows, a tile of keys at a time. With tensor cores (heads of
// TC_MIN_D columns or more) the score and output registers hold a warp's fragments instead
// of a thread's 8 x 4 tiles: one loop and the same arrays for both, so that the compiler
// allocates registers for one at a time (apart, they spilled twice as much).
__device__ __forceinline__ void attention_tiles(const Head& h, const float* Qs, float* Ks, float* Vs,
                                                float* Ps, float* out, int q0) {
#if OPT_TENSOR_CORES
    const bool tensor = h.D >= TC_MIN_D;  // the same in the whole block
    float* Kl = Ps;            // the keys' and values' lo halves, where the fp32 kernel
    float* Vl = Ps + BK * QP;  // keeps its weights
#endif
    float o[TM][TND], m[TM], l[TM];
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
        #pragma unroll
        for (int c = 0; c < TND; ++c) o[i][c] = 0.0f;
    }
    for (int k0 = 0; k0 < h.S; k0 += BK) {
        keys_arrive(h, k0, Ks, Vs);
#if OPT_TENSOR_CORES
        if (tensor) split_own_share(Ks, Kl, h.D);
#endif
        __syncthreads();  // the keys are in; everyone is done with the last tile's values
        values_depart(h, k0, Vs);
        float s[TM][TNK];  // the tile's scores, then its weights
#if OPT_TENSOR_CORES
        if (tensor) {
            scores_tc(Qs, Ks, Kl, s);
            softmax_tc(s, m, l, o, k0, h.S);
        } else
#endif
        weights_simt(Qs, Ks, Ps, k0, h.S, s, m, l, o);
        values_arrive();
#if OPT_TENSOR_CORES
        if (tensor) split_own_share(Vs, Vl, h.D);
#endif
        __syncthreads();  // the values and weights are in; everyone is done with the keys
        keys_depart(h, k0 + BK, Ks);
#if OPT_TENSOR_CORES
        if (tensor)
            values_tc(s, Vs, Vl, o);
        else
#endif
        values_simt(Ps, Vs, o);
#if !OPT_DOUBLE_BUFFER
        __syncthreads();  // everyone is done with Ks, Vs and Ps before the next tile lands
#endif
    }
#if OPT_TENSOR_CORES
    if (tensor) {
        store_rows_tc(o, l, out, q0, h.S, h.D);
        return;
    }
#endif
    store_rows_simt(o, l, out, q0, h.S, h.D);
}
#else
#define SA_BOUNDS
#endif

extern "C" __global__ void SA_BOUNDS self_attention(const float* q, const float* k, const float* v,
                                                    float* out, int BH, int S, int D) {
#if OPT_REG_TILE
    // Block b: head b / tiles_q, query rows (b % tiles_q) * BQ ..; the plan's shared_bytes is
    // 4 * SMEM_FLOATS.
    extern __shared__ __align__(16) float smem[];
    float* Qs = smem;
    float* Ks = Qs + BQ * QP;
    float* Vs = Ks + BK * QP;
    float* Ps = Vs + BK * QP;
    const int tiles_q = (S + BQ - 1) / BQ;
    const int bh = blockIdx.x / tiles_q, q0 = (blockIdx.x % tiles_q) * BQ;
    const long long head = (long long)bh * S * D;
    if (D > HEAD_DIM) {  // the whole block takes this branch: no barrier is left waiting
        const int i = q0 + (int)threadIdx.x;
        if (threadIdx.x < BQ && i < S) attention_row(q, k, v, out, S, D, (long long)bh * S + i);
        return;
    }
    const Head h = {k + head, v + head, S, D};
    load_rows<BQ>(q + head, q0, S, D, SCORE_SCALE(D), Qs);  // visible after the first barrier
    tiles_begin(h, Ks);
    attention_tiles(h, Qs, Ks, Vs, Ps, out + head, q0);
#elif OPT_FLASH_TILING
    attention_flash_rows(q, k, v, out, S, D);
#else
    const long long row = (long long)blockIdx.x * PLAIN_BLOCK + threadIdx.x;
    if (row < (long long)BH * S) attention_row(q, k, v, out, S, D, row);
#endif
}
