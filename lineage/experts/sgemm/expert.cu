// sgemm expert: C = A @ B, row-major fp32 (A is M x K, B is K x N). Every state sums fp32
// FMAs but the tensor-core one, whose 3xTF32 split keeps fp32 accuracy (see there). Each
// optimization is one flag (lineage/experts/sgemm/manifest.json); with every flag off
// this is the plain first attempt: one thread per output, TILE x TILE blocks.
//
// Tunables (the plan's, passed as -D): TILE (16) for the one-output-per-thread states;
// BM x BN (128 x 128) block tiles, BK (8) deep, TM x TN (8 x 8) outputs per thread for
// the register-tiled states, so (BM / TM) * (BN / TN) = 256 threads a block; MIN_BLOCKS
// (2) for their launch bounds. The pipelined tensor-core state: TC_BK (32) deep tiles,
// ASYNC_STAGES (2) of them, ASYNC_MIN_BLOCKS (1); values from the sweep in
// bench/results/2026-12-01-h200-sweep-sgemm.json (bench/expert_sweep.py).
//
// Edges: every global load is predicated (rows >= M, columns >= N and k >= K read 0),
// every store is guarded, and a float4 access is used only where all four elements are
// in range and the row pitch (K for A, N for B and C) is a multiple of 4, so that the
// address is 16-byte aligned (the gate's buffers are); otherwise the same four elements
// go one by one. No thread returns before a __syncthreads.

#define REG_THREADS ((BM / TM) * (BN / TN))

#if OPT_LAUNCH_BOUNDS
#if OPT_ASYNC_COPY
// ASYNC_MIN_BLOCKS (1) block of 256 threads a SM: up to 255 registers a thread, which
// the deeper tiles' fragments use (bench/results/2026-12-01-h200-sweep-sgemm.json: two
// blocks a SM cap them at 128, spill, and are 3-9 % slower).
#define SGEMM_BOUNDS __launch_bounds__(REG_THREADS, ASYNC_MIN_BLOCKS)
#elif OPT_REG_TILE
// MIN_BLOCKS (2) blocks of 256 threads a SM: at most 128 registers a thread (65536 / 512).
#define SGEMM_BOUNDS __launch_bounds__(REG_THREADS, MIN_BLOCKS)
#else
#define SGEMM_BOUNDS __launch_bounds__(TILE * TILE)
#endif
#else
#define SGEMM_BOUNDS
#endif

#if OPT_REG_TILE
// The accumulator's own loops (zeroing, the final stores) are always unrolled: a register
// array is only in registers when every index is a constant. The flag unrolls the rest.
#if OPT_UNROLL
#define SGEMM_UNROLL _Pragma("unroll")
#else
#define SGEMM_UNROLL
#endif

#if OPT_TENSOR_CORES
// Tensor-core fragments read A and B along k: thread (g, t) of a warp reads row t of a
// tile at column g. A pitch of 8 mod 32 floats puts those 32 reads in 32 banks.
#define A_PAD 8
#define B_PAD 8
#elif OPT_SMEM_PADDING
// The A tile is stored transposed (As[k][m]); its stores walk m across k, so without
// padding the threads of a warp that share a row but not a k land in one bank. Four
// floats of padding a row shift each k by four banks and keep rows 16-byte aligned.
#define A_PAD 4
#define B_PAD 0
#else
#define A_PAD 0
#define B_PAD 0
#endif

#if OPT_DOUBLE_BUFFER
#define STAGES 2
#else
#define STAGES 1
#endif

#if OPT_ASYNC_COPY
// The pipelined states keep ASYNC_STAGES tiles, KT = TC_BK deep, in dynamic shared memory,
// A not transposed (As[m][k]) since cp.async copies contiguous bytes: the fragment reads
// (row g, column t) then land in bank 4g + t with a pitch of KT + 4, and B's reads (row t,
// column g) in bank 8t + g with a pitch of BN + 8.
#define KT TC_BK
#define A_PITCH (KT + 4)
#define B_PITCH (BN + 8)
#define STAGE_FLOATS (BM * A_PITCH + KT * B_PITCH)
#define A_AT(as, k, m) (as)[(m) * A_PITCH + (k)]
#define B_AT(bs, k, n) (bs)[(k) * B_PITCH + (n)]
#else
#define KT BK
#define A_AT(as, k, m) (as)[(k) * (BM + A_PAD) + (m)]
#define B_AT(bs, k, n) (bs)[(k) * (BN + B_PAD) + (n)]
#endif
#endif

#if OPT_REG_TILE
static_assert(TM % 4 == 0 && TN % 4 == 0, "micro-tiles are made of groups of 4 rows and 4 columns");
static_assert(BK % 4 == 0 && BN % 4 == 0, "float4 tiles need BK and BN multiples of 4");
static_assert((BM * BK) % (4 * REG_THREADS) == 0 && (BK * BN) % (4 * REG_THREADS) == 0,
              "every thread loads the same number of float4s of each tile");

// A thread's outputs are TM / 4 groups of 4 rows, the groups BM / (TM / 4) rows apart
// (and likewise for columns), so that a quarter warp reading its fragments from shared
// memory reads 128 contiguous bytes: no bank conflict on the float4 reads.
#define ROW_OF(i, tr) (((i) / 4) * (BM / (TM / 4)) + (tr) * 4 + (i) % 4)
#define COL_OF(j, tc) (((j) / 4) * (BN / (TN / 4)) + (tc) * 4 + (j) % 4)

#if OPT_VEC4
#define A_LOADS (BM * BK / 4 / REG_THREADS)  // float4s of the A tile a thread loads
#define B_LOADS (BK * BN / 4 / REG_THREADS)
typedef float4 Staged;
#else
#define A_LOADS (BM * BK / REG_THREADS)  // floats of the A tile a thread loads
#define B_LOADS (BK * BN / REG_THREADS)
typedef float Staged;
#endif

// Reads this thread's share of the A (BM x BK) and B (BK x BN) tiles at k0 into registers.
__device__ __forceinline__ void load_tiles(const float* A, const float* B, int M, int N, int K,
                                           int row0, int col0, int k0, Staged* a, Staged* b) {
    const int tid = threadIdx.x;
#if OPT_VEC4
    const bool a_aligned = (K & 3) == 0, b_aligned = (N & 3) == 0;
    SGEMM_UNROLL
    for (int l = 0; l < A_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int r = row0 + idx / (BK / 4), k = k0 + (idx % (BK / 4)) * 4;
        const float* p = A + (long long)r * K + k;
        if (a_aligned && r < M && k + 3 < K) {
            a[l] = *reinterpret_cast<const float4*>(p);
        } else {
            const bool in = r < M;
            a[l] = make_float4(in && k < K ? p[0] : 0.0f, in && k + 1 < K ? p[1] : 0.0f,
                               in && k + 2 < K ? p[2] : 0.0f, in && k + 3 < K ? p[3] : 0.0f);
        }
    }
    SGEMM_UNROLL
    for (int l = 0; l < B_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int k = k0 + idx / (BN / 4), c = col0 + (idx % (BN / 4)) * 4;
        const float* p = B + (long long)k * N + c;
        if (b_aligned && k < K && c + 3 < N) {
            b[l] = *reinterpret_cast<const float4*>(p);
        } else {
            const bool in = k < K;
            b[l] = make_float4(in && c < N ? p[0] : 0.0f, in && c + 1 < N ? p[1] : 0.0f,
                               in && c + 2 < N ? p[2] : 0.0f, in && c + 3 < N ? p[3] : 0.0f);
        }
    }
#else
    // Consecutive threads take consecutive k of a row of A and consecutive columns of B:
    // coalesced reads.
    SGEMM_UNROLL
    for (int l = 0; l < A_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int r = row0 + idx / BK, k = k0 + idx % BK;
        a[l] = r < M && k < K ? A[(long long)r * K + k] : 0.0f;
    }
    SGEMM_UNROLL
    for (int l = 0; l < B_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int k = k0 + idx / BN, c = col0 + idx % BN;
        b[l] = k < K && c < N ? B[(long long)k * N + c] : 0.0f;
    }
#endif
}

// Writes the staged registers into one stage of shared memory, A transposed (As[k][m])
// so that the compute loop reads a column of A as contiguous floats.
__device__ __forceinline__ void store_tiles(float (*As)[BM + A_PAD], float (*Bs)[BN + B_PAD],
                                            const Staged* a, const Staged* b) {
    const int tid = threadIdx.x;
#if OPT_VEC4
    SGEMM_UNROLL
    for (int l = 0; l < A_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int m = idx / (BK / 4), k = (idx % (BK / 4)) * 4;
        As[k][m] = a[l].x;
        As[k + 1][m] = a[l].y;
        As[k + 2][m] = a[l].z;
        As[k + 3][m] = a[l].w;
    }
    SGEMM_UNROLL
    for (int l = 0; l < B_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        *reinterpret_cast<float4*>(&Bs[idx / (BN / 4)][(idx % (BN / 4)) * 4]) = b[l];
    }
#else
    SGEMM_UNROLL
    for (int l = 0; l < A_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        As[idx % BK][idx / BK] = a[l];
    }
    SGEMM_UNROLL
    for (int l = 0; l < B_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        Bs[idx / BN][idx % BN] = b[l];
    }
#endif
}

// acc += the BK outer products of one stage: column kk of A times row kk of B.
__device__ __forceinline__ void multiply_tiles(const float (*As)[BM + A_PAD], const float (*Bs)[BN + B_PAD],
                                               int tr, int tc, float (*acc)[TN]) {
    SGEMM_UNROLL
    for (int kk = 0; kk < BK; ++kk) {
        float a[TM], b[TN];
#if OPT_VEC4
        SGEMM_UNROLL
        for (int g = 0; g < TM / 4; ++g) {
            const float4 v = *reinterpret_cast<const float4*>(&As[kk][ROW_OF(4 * g, tr)]);
            a[4 * g] = v.x, a[4 * g + 1] = v.y, a[4 * g + 2] = v.z, a[4 * g + 3] = v.w;
        }
        SGEMM_UNROLL
        for (int g = 0; g < TN / 4; ++g) {
            const float4 v = *reinterpret_cast<const float4*>(&Bs[kk][COL_OF(4 * g, tc)]);
            b[4 * g] = v.x, b[4 * g + 1] = v.y, b[4 * g + 2] = v.z, b[4 * g + 3] = v.w;
        }
#else
        SGEMM_UNROLL
        for (int i = 0; i < TM; ++i) a[i] = As[kk][ROW_OF(i, tr)];
        SGEMM_UNROLL
        for (int j = 0; j < TN; ++j) b[j] = Bs[kk][COL_OF(j, tc)];
#endif
        SGEMM_UNROLL
        for (int i = 0; i < TM; ++i) {
            SGEMM_UNROLL
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
}
#if OPT_TENSOR_CORES
// 3xTF32, the split CUTLASS uses for fp32 accuracy on tensor cores: each operand v is
// hi + lo, hi its TF32 rounding and lo the TF32 rounding of the (exact) remainder, and a
// product is hi * hi + hi * lo + lo * hi. What it drops (lo * lo and the remainders'
// rounding) is at most 3 * 2**-22 |a||b| a product; the tensor core's truncating sums
// err by a few 2**-23 of one step's terms, since each step starts a fresh partial that a
// rounded fp32 add puts into the accumulator. Worst case about 18 * 2**-24 |a||b| a
// product besides the fp32 sum itself: within the task's (2 + 5 sqrt(K)) 2**-24
// allowance for K >= SPLIT_MIN_K (30 at K = 32). Below it, fp32 FMAs do the job.
#define WARPS_M 2
#define WARPS_N 4
#define WM (BM / WARPS_M)  // rows of C a warp computes
#define WN (BN / WARPS_N)  // columns of C a warp computes
#define MT (WM / 16)       // m16n8k8 tiles a warp, down
#define NT (WN / 8)        // and across
#define SPLIT_MIN_K 32
static_assert(WARPS_M * WARPS_N * 32 == REG_THREADS, "one warp per warp tile");
static_assert(KT % 8 == 0 && WM % 16 == 0 && WN % 8 == 0, "whole m16n8k8 tiles");

__device__ __forceinline__ void split_tf32(float v, unsigned& hi, unsigned& lo) {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(v));
    const float rest = v - __uint_as_float(hi);  // exact: hi holds v's leading 11 bits
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(rest));
}

// d += a (16 x 8, row) * b (8 x 8, col) on tensor cores, TF32 inputs, fp32 sums.
__device__ __forceinline__ void mma_tf32(float* d, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// acc += one stage, warp by warp. Warp w owns rows (w / WARPS_N) * WM.. and columns
// (w % WARPS_N) * WN.. of the block tile; of each 16 x 8 tile its lane (g = lane / 4,
// t = lane % 4) holds A at (g, t) (g + 8, t) (g, t + 4) (g + 8, t + 4), B at (t, g)
// (t + 4, g) and C at (g, 2t) (g, 2t + 1) (g + 8, 2t) (g + 8, 2t + 1), the PTX ISA's
// fragment layout for mma.m16n8k8 with .tf32.
__device__ __forceinline__ void multiply_tiles_tc(const float* As, const float* Bs, bool split,
                                                  float (*acc)[NT][4]) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int m0 = (warp / WARPS_N) * WM + g, n0 = (warp % WARPS_N) * WN + g;
    if (!split) {
        // fp32 FMAs, each output where the fragment layout keeps it.
        const int c0 = (warp % WARPS_N) * WN + 2 * t;
        #pragma unroll
        for (int kk = 0; kk < KT; ++kk) {
            #pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                #pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    #pragma unroll
                    for (int r = 0; r < 4; ++r)
                        acc[mt][nt][r] = fmaf(A_AT(As, kk, m0 + mt * 16 + 8 * (r / 2)),
                                              B_AT(Bs, kk, c0 + nt * 8 + r % 2), acc[mt][nt][r]);
                }
            }
        }
        return;
    }
    SGEMM_UNROLL
    for (int k8 = 0; k8 < KT; k8 += 8) {
        unsigned bh[NT][2], bl[NT][2];
        SGEMM_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
            split_tf32(B_AT(Bs, k8 + t, n0 + nt * 8), bh[nt][0], bl[nt][0]);
            split_tf32(B_AT(Bs, k8 + t + 4, n0 + nt * 8), bh[nt][1], bl[nt][1]);
        }
        SGEMM_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            unsigned ah[4], al[4];
            const int m = m0 + mt * 16;
            split_tf32(A_AT(As, k8 + t, m), ah[0], al[0]);
            split_tf32(A_AT(As, k8 + t, m + 8), ah[1], al[1]);
            split_tf32(A_AT(As, k8 + t + 4, m), ah[2], al[2]);
            split_tf32(A_AT(As, k8 + t + 4, m + 8), ah[3], al[3]);
            SGEMM_UNROLL
            for (int nt = 0; nt < NT; ++nt) {
                // A fresh partial each step: the tensor core's truncation then errs on
                // one step's sum, not on the whole accumulator.
                float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                mma_tf32(part, al, bh[nt]);
                mma_tf32(part, ah, bl[nt]);
                mma_tf32(part, ah, bh[nt]);
                #pragma unroll
                for (int r = 0; r < 4; ++r) acc[mt][nt][r] += part[r];
            }
        }
    }
}
#endif

#if OPT_ASYNC_COPY
// Asynchronous copies global -> shared (sm_80+), bypassing registers: `in` false copies
// nothing and fills zeros (a source size of 0), from the matrix's own base address.
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool in) {
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to), "l"(src), "r"(in ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool in) {
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(to), "l"(src), "r"(in ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(PENDING)); }

#define A_COPIES (BM * KT / 4 / REG_THREADS)  // float4s of the A tile a thread copies
#define B_COPIES (KT * BN / 4 / REG_THREADS)
static_assert((BM * KT) % (4 * REG_THREADS) == 0 && (KT * BN) % (4 * REG_THREADS) == 0,
              "every thread copies the same number of float4s of each tile");

// Starts the copies of the A (BM x KT) and B (KT x BN) tiles at k0 into one stage. With
// K (or N) a multiple of 4, k0 + k < K implies k0 + k + 3 < K, so a 16-byte copy is whole
// or empty; otherwise each float goes on its own.
__device__ __forceinline__ void copy_stage(const float* A, const float* B, int M, int N, int K,
                                           int row0, int col0, int k0, float* as, float* bs) {
    const int tid = threadIdx.x;
    const bool a_aligned = (K & 3) == 0, b_aligned = (N & 3) == 0;
    SGEMM_UNROLL
    for (int l = 0; l < A_COPIES; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int m = idx / (KT / 4), k = (idx % (KT / 4)) * 4, r = row0 + m;
        const float* p = A + (long long)r * K + k0 + k;
        float* d = &A_AT(as, k, m);
        if (a_aligned) {
            const bool in = r < M && k0 + k < K;
            cp_async16(d, in ? p : A, in);
        } else {
            #pragma unroll
            for (int q = 0; q < 4; ++q) {
                const bool in = r < M && k0 + k + q < K;
                cp_async4(d + q, in ? p + q : A, in);
            }
        }
    }
    SGEMM_UNROLL
    for (int l = 0; l < B_COPIES; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int k = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
        const float* p = B + (long long)(k0 + k) * N + col0 + c;
        float* d = &B_AT(bs, k, c);
        if (b_aligned) {
            const bool in = k0 + k < K && col0 + c < N;
            cp_async16(d, in ? p : B, in);
        } else {
            #pragma unroll
            for (int q = 0; q < 4; ++q) {
                const bool in = k0 + k < K && col0 + c + q < N;
                cp_async4(d + q, in ? p + q : B, in);
            }
        }
    }
}
#endif
#endif

extern "C" __global__ void SGEMM_BOUNDS sgemm(const float* A, const float* B, float* C, int M, int N,
                                              int K) {
#if OPT_SMEM_TILE
#if OPT_REG_TILE
    // One block: a BM x BN tile of C; one thread: TM x TN outputs in registers, fed from
    // BK-deep tiles of A and B in shared memory.
#if OPT_ASYNC_COPY
    extern __shared__ __align__(16) float stages[];  // ASYNC_STAGES x (A tile, B tile)
#else
    __shared__ __align__(16) float As[STAGES][BK][BM + A_PAD];
    __shared__ __align__(16) float Bs[STAGES][BK][BN + B_PAD];
#endif
#if !OPT_TENSOR_CORES
    const int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);
#endif
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (K + KT - 1) / KT;
#if OPT_TENSOR_CORES
    float acc[MT][NT][4] = {};
    const bool split = K >= SPLIT_MIN_K;
#else
    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    }
#endif
#if OPT_ASYNC_COPY
    // ASYNC_STAGES - 1 tiles in flight while one is multiplied. At step t the copies into
    // stage (t - 1) % ASYNC_STAGES start only after the barrier that follows every warp's
    // multiply of step t - 1; one commit a step (empty past the end) keeps the count of
    // groups, so waiting for all but ASYNC_STAGES - 2 means tile t has landed.
    #pragma unroll
    for (int s = 0; s < ASYNC_STAGES - 1; ++s) {
        float* stage = stages + s * STAGE_FLOATS;
        if (s < tiles) copy_stage(A, B, M, N, K, row0, col0, s * KT, stage, stage + BM * A_PITCH);
        cp_async_commit();
    }
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<ASYNC_STAGES - 2>();
        __syncthreads();
        const int next = t + ASYNC_STAGES - 1;
        if (next < tiles) {
            float* stage = stages + (next % ASYNC_STAGES) * STAGE_FLOATS;
            copy_stage(A, B, M, N, K, row0, col0, next * KT, stage, stage + BM * A_PITCH);
        }
        cp_async_commit();
        const float* stage = stages + (t % ASYNC_STAGES) * STAGE_FLOATS;
        multiply_tiles_tc(stage, stage + BM * A_PITCH, split, acc);
    }
    cp_async_wait<0>();
#else
    Staged a[A_LOADS], b[B_LOADS];
#if OPT_DOUBLE_BUFFER
    // Tile t + 1 travels from global memory into registers while tile t is multiplied,
    // then lands in the other stage: one barrier a tile. Stage (t + 1) % 2 was last read
    // in step t - 1, which the barrier ending step t - 1 separates from these stores.
    load_tiles(A, B, M, N, K, row0, col0, 0, a, b);
    store_tiles(As[0], Bs[0], a, b);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const bool more = t + 1 < tiles;
        if (more) load_tiles(A, B, M, N, K, row0, col0, (t + 1) * BK, a, b);
#if OPT_TENSOR_CORES
        multiply_tiles_tc(&As[t & 1][0][0], &Bs[t & 1][0][0], split, acc);
#else
        multiply_tiles(As[t & 1], Bs[t & 1], tr, tc, acc);
#endif
        if (more) store_tiles(As[(t + 1) & 1], Bs[(t + 1) & 1], a, b);
        __syncthreads();
    }
#else
    for (int t = 0; t < tiles; ++t) {
        load_tiles(A, B, M, N, K, row0, col0, t * BK, a, b);
        store_tiles(As[0], Bs[0], a, b);
        __syncthreads();
        multiply_tiles(As[0], Bs[0], tr, tc, acc);
        __syncthreads();
    }
#endif
#endif
#if OPT_TENSOR_CORES
    {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        const int m0 = row0 + (warp / WARPS_N) * WM + g, c0 = col0 + (warp % WARPS_N) * WN + 2 * t;
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            #pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int r = m0 + mt * 16 + 8 * half;
                if (r >= M) continue;
                float* out = C + (long long)r * N;
                #pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const int c = c0 + nt * 8;
                    const float v0 = acc[mt][nt][2 * half], v1 = acc[mt][nt][2 * half + 1];
                    if ((N & 1) == 0 && c + 1 < N) {
                        *reinterpret_cast<float2*>(out + c) = make_float2(v0, v1);
                    } else {
                        if (c < N) out[c] = v0;
                        if (c + 1 < N) out[c + 1] = v1;
                    }
                }
            }
        }
    }
#else
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + ROW_OF(i, tr);
        if (r >= M) continue;
        float* out = C + (long long)r * N;
#if OPT_VEC4
        #pragma unroll
        for (int g = 0; g < TN / 4; ++g) {
            const int c = col0 + COL_OF(4 * g, tc);
            if ((N & 3) == 0 && c + 3 < N) {
                *reinterpret_cast<float4*>(out + c) = make_float4(acc[i][4 * g], acc[i][4 * g + 1], acc[i][4 * g + 2], acc[i][4 * g + 3]);
            } else {
#pragma unroll
                for (int q = 0; q < 4; ++q)
                    if (c + q < N) out[c + q] = acc[i][4 * g + q];
            }
        }
#else
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + COL_OF(j, tc);
            if (c < N) out[c] = acc[i][j];
        }
#endif
    }
#endif
#else
    // One output per thread, K walked in TILE-deep steps: each block stages a TILE x TILE
    // tile of A and of B in shared memory, so each global value is read once per block.
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = row < M && k0 + tx < K ? A[(long long)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = k0 + ty < K && col < N ? B[(long long)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
#endif
#else
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(long long)row * K + k] * B[(long long)k * N + col];
    C[(long long)row * N + col] = acc;
#endif
}
