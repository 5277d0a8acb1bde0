// conv2d expert: y = conv(x, w) + bias, NCHW fp32, 3x3 filters, padding 1, stride 1, as a
// matrix product: filters (K rows) times the im2col matrix (C * 9 rows, N * H * W pixel
// columns), the im2col elements gathered from x on the fly, never stored. Every state
// sums fp32 FMAs but the tensor-core one, whose 3xTF32 split keeps fp32 accuracy. Each
// optimization is one flag (lineage/experts/conv2d/manifest.json); with every flag off
// this is the plain first attempt: one thread per output, the naive kernel's loops.
//
// Tunables (the plan's, passed as -D): BLOCK (256) threads for the one-dimensional
// states; TILE (16) for the one-output-per-thread GEMM states; BM x BN (128 filters x 128
// pixels) block tiles, BK (8) deep in the reduction, TM x TN (8 x 8) outputs a thread for
// the register-tiled states, so (BM / TM) * (BN / TN) = 256 threads a block.
//
// Edges: every load is predicated (filters >= K, reduction rows >= C * 9, pixels >=
// N * H * W and taps outside the image read 0), every store is guarded, and a float4 is
// used only where its four elements are in range and the pitch is a multiple of 4 (C * 9
// for w, H * W for y: then four pixels from a multiple of 4 lie in one image). No thread
// returns before a __syncthreads.

#define REG_THREADS ((BM / TM) * (BN / TN))

#if OPT_LAUNCH_BOUNDS
#if OPT_REG_TILE
// Two blocks of 256 threads a SM: at most 128 registers a thread (65536 / 512).
#define CONV_BOUNDS __launch_bounds__(REG_THREADS, 2)
#elif OPT_IMPLICIT_GEMM
#define CONV_BOUNDS __launch_bounds__(TILE * TILE)
#else
#define CONV_BOUNDS __launch_bounds__(BLOCK)
#endif
#else
#define CONV_BOUNDS
#endif

#if OPT_REG_TILE
// The accumulator's own loops (zeroing, the final stores) are always unrolled: a register
// array is only in registers when every index is a constant. The flag unrolls the rest.
#if OPT_UNROLL
#define CONV_UNROLL _Pragma("unroll")
#else
#define CONV_UNROLL
#endif

#if OPT_TENSOR_CORES
// Tensor-core fragments read both tiles along the reduction: thread (g, t) of a warp
// reads row t of a tile at column g. A pitch of 8 mod 32 floats puts those 32 reads in
// 32 banks.
#define W_PAD 8
#define X_PAD 8
#elif OPT_SMEM_PADDING
// The filter tile is stored transposed (Ws[red][k]); its stores walk k across the
// reduction, so without padding threads of a warp that share a filter land in one bank.
// Four floats of padding a row shift each reduction row by four banks, rows stay 16-byte
// aligned.
#define W_PAD 4
#define X_PAD 0
#else
#define W_PAD 0
#define X_PAD 0
#endif

#if OPT_DOUBLE_BUFFER
#define STAGES 2
#else
#define STAGES 1
#endif
#endif

#if OPT_IMPLICIT_GEMM && OPT_SMEM_TILE
// The im2col element at reduction row `red` (channel c, tap r, s) for the pixel (i, j) of
// `image` (x at this pixel's image): 0 outside the image, past the channels, or for a
// pixel past N * H * W.
__device__ __forceinline__ float im2col(const float* image, int red, int i, int j, int C, int H,
                                        int W, bool pixel_in) {
    const int c = red / 9, tap = red - 9 * c;
    const int h = i + tap / 3 - 1, v = j + tap % 3 - 1;
    return pixel_in && c < C && h >= 0 && h < H && v >= 0 && v < W
               ? image[((long long)c * H + h) * W + v]
               : 0.0f;
}
#endif

#if OPT_REG_TILE
static_assert(TM % 4 == 0 && TN % 4 == 0, "micro-tiles are made of groups of 4 rows and 4 columns");
static_assert(BK % 4 == 0, "float4 filter loads need BK a multiple of 4");
static_assert((BM * BK) % (4 * REG_THREADS) == 0, "every thread loads as many filter float4s");
static_assert(REG_THREADS % BN == 0 && (BK * BN) % REG_THREADS == 0,
              "every thread gathers for one pixel column of the tile, the same number of rows");

// A thread's outputs are TM / 4 groups of 4 filters, the groups BM / (TM / 4) apart (and
// likewise for pixels), so that a quarter warp reading its fragments from shared memory
// reads 128 contiguous bytes: no bank conflict on the float4 reads.
#define ROW_OF(i, tr) (((i) / 4) * (BM / (TM / 4)) + (tr) * 4 + (i) % 4)
#define COL_OF(j, tc) (((j) / 4) * (BN / (TN / 4)) + (tc) * 4 + (j) % 4)

#if OPT_VEC4
#define W_LOADS (BM * BK / 4 / REG_THREADS)  // float4s of the filter tile a thread loads
typedef float4 StagedW;
#else
#define W_LOADS (BM * BK / REG_THREADS)  // floats of the filter tile a thread loads
typedef float StagedW;
#endif
#define X_LOADS (BK * BN / REG_THREADS)  // im2col elements a thread gathers a tile

// The pixel column this thread gathers for, decomposed once.
struct Pixel {
    const float* image;  // x at this pixel's image
    int i, j;
    bool in;
};

// Reads this thread's share of the filter tile (BM x BK of w as a K x C * 9 matrix) and
// gathers its share of the im2col tile (BK x BN) at reduction row r0 into registers.
__device__ __forceinline__ void load_tiles(const float* w, Pixel px, int C, int H, int W, int K,
                                           int row0, int r0, StagedW* a, float* b) {
    const int tid = threadIdx.x, R = C * 9;
#if OPT_VEC4
    const bool aligned = (R & 3) == 0;
    CONV_UNROLL
    for (int l = 0; l < W_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int k = row0 + idx / (BK / 4), red = r0 + (idx % (BK / 4)) * 4;
        const float* p = w + (long long)k * R + red;
        if (aligned && k < K && red + 3 < R) {
            a[l] = *reinterpret_cast<const float4*>(p);
        } else {
            const bool in = k < K;
            a[l] = make_float4(in && red < R ? p[0] : 0.0f, in && red + 1 < R ? p[1] : 0.0f,
                               in && red + 2 < R ? p[2] : 0.0f, in && red + 3 < R ? p[3] : 0.0f);
        }
    }
#else
    CONV_UNROLL
    for (int l = 0; l < W_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int k = row0 + idx / BK, red = r0 + idx % BK;
        a[l] = k < K && red < R ? w[(long long)k * R + red] : 0.0f;
    }
#endif
    // Consecutive threads gather consecutive pixels of one reduction row: mostly
    // contiguous addresses in x.
    CONV_UNROLL
    for (int l = 0; l < X_LOADS; ++l) {
        const int red = r0 + tid / BN + l * (REG_THREADS / BN);
        b[l] = im2col(px.image, red, px.i, px.j, C, H, W, px.in);
    }
}

// Writes the staged registers into one stage of shared memory, the filters transposed
// (Ws[red][k]) so that the compute loop reads a column of them as contiguous floats.
__device__ __forceinline__ void store_tiles(float (*Ws)[BM + W_PAD], float (*Xs)[BN + X_PAD],
                                            const StagedW* a, const float* b) {
    const int tid = threadIdx.x;
#if OPT_VEC4
    CONV_UNROLL
    for (int l = 0; l < W_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        const int k = idx / (BK / 4), red = (idx % (BK / 4)) * 4;
        Ws[red][k] = a[l].x;
        Ws[red + 1][k] = a[l].y;
        Ws[red + 2][k] = a[l].z;
        Ws[red + 3][k] = a[l].w;
    }
#else
    CONV_UNROLL
    for (int l = 0; l < W_LOADS; ++l) {
        const int idx = tid + l * REG_THREADS;
        Ws[idx % BK][idx / BK] = a[l];
    }
#endif
    CONV_UNROLL
    for (int l = 0; l < X_LOADS; ++l) Xs[tid / BN + l * (REG_THREADS / BN)][tid % BN] = b[l];
}

// acc += the BK outer products of one stage: column kk of the filters times row kk of
// the im2col tile.
__device__ __forceinline__ void multiply_tiles(const float (*Ws)[BM + W_PAD], const float (*Xs)[BN + X_PAD],
                                               int tr, int tc, float (*acc)[TN]) {
    CONV_UNROLL
    for (int kk = 0; kk < BK; ++kk) {
        float a[TM], b[TN];
#if OPT_VEC4
        CONV_UNROLL
        for (int g = 0; g < TM / 4; ++g) {
            const float4 v = *reinterpret_cast<const float4*>(&Ws[kk][ROW_OF(4 * g, tr)]);
            a[4 * g] = v.x, a[4 * g + 1] = v.y, a[4 * g + 2] = v.z, a[4 * g + 3] = v.w;
        }
        CONV_UNROLL
        for (int g = 0; g < TN / 4; ++g) {
            const float4 v = *reinterpret_cast<const float4*>(&Xs[kk][COL_OF(4 * g, tc)]);
            b[4 * g] = v.x, b[4 * g + 1] = v.y, b[4 * g + 2] = v.z, b[4 * g + 3] = v.w;
        }
#else
        CONV_UNROLL
        for (int i = 0; i < TM; ++i) a[i] = Ws[kk][ROW_OF(i, tr)];
        CONV_UNROLL
        for (int j = 0; j < TN; ++j) b[j] = Xs[kk][COL_OF(j, tc)];
#endif
        CONV_UNROLL
        for (int i = 0; i < TM; ++i) {
            CONV_UNROLL
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
// product besides the fp32 sum itself: within the task's (2 + 5 sqrt(9 C)) 2**-24
// allowance for a reduction 9 C >= SPLIT_MIN_K (30 at 32). Below it, fp32 FMAs do the job.
#define WARPS_M 2
#define WARPS_N 4
#define WM (BM / WARPS_M)  // filters a warp computes
#define WN (BN / WARPS_N)  // pixels a warp computes
#define MT (WM / 16)       // m16n8k8 tiles a warp, down
#define NT (WN / 8)        // and across
#define SPLIT_MIN_K 32
static_assert(WARPS_M * WARPS_N * 32 == REG_THREADS, "one warp per warp tile");
static_assert(BK % 8 == 0 && WM % 16 == 0 && WN % 8 == 0, "whole m16n8k8 tiles");

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

// acc += one stage, warp by warp. Warp w owns filters (w / WARPS_N) * WM.. and pixels
// (w % WARPS_N) * WN.. of the block tile; of each 16 x 8 tile its lane (g = lane / 4,
// t = lane % 4) holds A at (g, t) (g + 8, t) (g, t + 4) (g + 8, t + 4), B at (t, g)
// (t + 4, g) and C at (g, 2t) (g, 2t + 1) (g + 8, 2t) (g + 8, 2t + 1), the PTX ISA's
// fragment layout for mma.m16n8k8 with .tf32.
__device__ __forceinline__ void multiply_tiles_tc(const float (*Ws)[BM + W_PAD],
                                                  const float (*Xs)[BN + X_PAD], bool split,
                                                  float (*acc)[NT][4]) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int m0 = (warp / WARPS_N) * WM + g, n0 = (warp % WARPS_N) * WN + g;
    if (!split) {
        // fp32 FMAs, each output where the fragment layout keeps it.
        const int c0 = (warp % WARPS_N) * WN + 2 * t;
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            #pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                #pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    #pragma unroll
                    for (int r = 0; r < 4; ++r)
                        acc[mt][nt][r] = fmaf(Ws[kk][m0 + mt * 16 + 8 * (r / 2)],
                                              Xs[kk][c0 + nt * 8 + r % 2], acc[mt][nt][r]);
                }
            }
        }
        return;
    }
    CONV_UNROLL
    for (int k8 = 0; k8 < BK; k8 += 8) {
        unsigned bh[NT][2], bl[NT][2];
        CONV_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
            split_tf32(Xs[k8 + t][n0 + nt * 8], bh[nt][0], bl[nt][0]);
            split_tf32(Xs[k8 + t + 4][n0 + nt * 8], bh[nt][1], bl[nt][1]);
        }
        CONV_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            unsigned ah[4], al[4];
            const int m = m0 + mt * 16;
            split_tf32(Ws[k8 + t][m], ah[0], al[0]);
            split_tf32(Ws[k8 + t][m + 8], ah[1], al[1]);
            split_tf32(Ws[k8 + t + 4][m], ah[2], al[2]);
            split_tf32(Ws[k8 + t + 4][m + 8], ah[3], al[3]);
            CONV_UNROLL
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
#endif

extern "C" __global__ void CONV_BOUNDS conv2d_3x3(const float* x, const float* w, const float* bias,
                                                  float* y, int N, int C, int H, int W, int K) {
#if OPT_IMPLICIT_GEMM
    const int HW = H * W, P = N * HW;
#if OPT_SMEM_TILE
#if OPT_REG_TILE
    // One block: BM filters x BN pixels of the product; one thread: TM x TN outputs in
    // registers, fed from BK-deep tiles of the filters and of the im2col matrix in shared
    // memory.
    __shared__ __align__(16) float Ws[STAGES][BK][BM + W_PAD];
    __shared__ __align__(16) float Xs[STAGES][BK][BN + X_PAD];
#if !OPT_TENSOR_CORES
    const int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);
#endif
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tiles = (C * 9 + BK - 1) / BK;
    Pixel px;
    {
        const int p = col0 + threadIdx.x % BN, n = p / HW, hw = p - n * HW;
        px.image = x + (long long)n * C * HW;
        px.i = hw / W;
        px.j = hw - px.i * W;
        px.in = p < P;
    }
#if OPT_TENSOR_CORES
    float acc[MT][NT][4] = {};
    const bool split = C * 9 >= SPLIT_MIN_K;
#else
    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    }
#endif
    StagedW a[W_LOADS];
    float b[X_LOADS];
#if OPT_DOUBLE_BUFFER
    // Tile t + 1 travels into registers while tile t is multiplied, then lands in the
    // other stage: one barrier a tile. Stage (t + 1) % 2 was last read in step t - 1,
    // which the barrier ending step t - 1 separates from these stores.
    load_tiles(w, px, C, H, W, K, row0, 0, a, b);
    store_tiles(Ws[0], Xs[0], a, b);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const bool more = t + 1 < tiles;
        if (more) load_tiles(w, px, C, H, W, K, row0, (t + 1) * BK, a, b);
#if OPT_TENSOR_CORES
        multiply_tiles_tc(Ws[t & 1], Xs[t & 1], split, acc);
#else
        multiply_tiles(Ws[t & 1], Xs[t & 1], tr, tc, acc);
#endif
        if (more) store_tiles(Ws[(t + 1) & 1], Xs[(t + 1) & 1], a, b);
        __syncthreads();
    }
#else
    for (int t = 0; t < tiles; ++t) {
        load_tiles(w, px, C, H, W, K, row0, t * BK, a, b);
        store_tiles(Ws[0], Xs[0], a, b);
        __syncthreads();
        multiply_tiles(Ws[0], Xs[0], tr, tc, acc);
        __syncthreads();
    }
#endif
#if OPT_TENSOR_CORES
    {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        const int k0 = row0 + (warp / WARPS_N) * WM + g, p0 = col0 + (warp % WARPS_N) * WN + 2 * t;
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            #pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int k = k0 + mt * 16 + 8 * half;
                if (k >= K) continue;
                const float beta = bias[k];
                #pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const int p = p0 + nt * 8;
                    const float v0 = acc[mt][nt][2 * half] + beta, v1 = acc[mt][nt][2 * half + 1] + beta;
                    if ((HW & 1) == 0 && p + 1 < P) {
                        // p is even and so is H * W: both pixels share an image.
                        const int n = p / HW;
                        *reinterpret_cast<float2*>(y + ((long long)n * K + k) * HW + (p - n * HW)) =
                            make_float2(v0, v1);
                    } else {
                        #pragma unroll
                        for (int q = 0; q < 2; ++q) {
                            if (p + q >= P) break;
                            const int n = (p + q) / HW;
                            y[((long long)n * K + k) * HW + (p + q - n * HW)] = q == 0 ? v0 : v1;
                        }
                    }
                }
            }
        }
    }
#else
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int k = row0 + ROW_OF(i, tr);
        if (k >= K) continue;
        const float beta = bias[k];
#if OPT_VEC4
        #pragma unroll
        for (int g = 0; g < TN / 4; ++g) {
            const int p = col0 + COL_OF(4 * g, tc);
            if ((HW & 3) == 0 && p + 3 < P) {
                // p is a multiple of 4 and so is H * W: the four pixels share an image.
                const int n = p / HW;
                float* out = y + ((long long)n * K + k) * HW + (p - n * HW);
                *reinterpret_cast<float4*>(out) =
                    make_float4(acc[i][4 * g] + beta, acc[i][4 * g + 1] + beta,
                                acc[i][4 * g + 2] + beta, acc[i][4 * g + 3] + beta);
            } else {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    if (p + q >= P) break;
                    const int n = (p + q) / HW;
                    y[((long long)n * K + k) * HW + (p + q - n * HW)] = acc[i][4 * g + q] + beta;
                }
            }
        }
#else
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int p = col0 + COL_OF(j, tc);
            if (p >= P) continue;
            const int n = p / HW;
            y[((long long)n * K + k) * HW + (p - n * HW)] = acc[i][j] + beta;
        }
#endif
    }
#endif
#else
    // One output per thread, the reduction walked in TILE-deep steps: each block stages
    // TILE filters x TILE reduction rows and TILE reduction rows x TILE pixels of the
    // im2col matrix in shared memory, so each is fetched once per block.
    __shared__ float Ws[TILE][TILE];
    __shared__ float Xs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y, R = C * 9;
    const int p = blockIdx.x * TILE + tx, k = blockIdx.y * TILE + ty;
    const int n = p / HW, hw = p - n * HW, i = hw / W, j = hw - i * W;
    const float* image = x + (long long)n * C * HW;
    float acc = 0.0f;
    for (int r0 = 0; r0 < R; r0 += TILE) {
        // Thread (tx, ty) fetches filter k's reduction row r0 + tx, and the im2col element
        // of its own pixel p at reduction row r0 + ty.
        Ws[ty][tx] = k < K && r0 + tx < R ? w[(long long)k * R + r0 + tx] : 0.0f;
        Xs[ty][tx] = im2col(image, r0 + ty, i, j, C, H, W, p < P);
        __syncthreads();
        for (int kk = 0; kk < TILE; ++kk) acc += Ws[ty][kk] * Xs[kk][tx];
        __syncthreads();
    }
    if (k < K && p < P) y[((long long)n * K + k) * HW + hw] = acc + bias[k];
#endif
#else
    // The product's view without tiles: a 2-D grid, pixels along x (coalesced reads of x
    // and writes of y), filters along y (a warp shares its filter's weights).
    const int p = blockIdx.x * blockDim.x + threadIdx.x, k = blockIdx.y * blockDim.y + threadIdx.y;
    if (p >= P || k >= K) return;
    const int n = p / HW, hw = p - n * HW, row = hw / W, col = hw - row * W;
    float acc = bias[k];
    for (int c = 0; c < C; ++c) {
        const float* plane = x + ((long long)n * C + c) * HW;
        const float* taps = w + ((long long)k * C + c) * 9;
        for (int r = 0; r < 3; ++r) {
            const int h = row - 1 + r;
            if (h < 0 || h >= H) continue;
            for (int s = 0; s < 3; ++s) {
                const int v = col - 1 + s;
                if (v < 0 || v >= W) continue;
                acc += plane[(long long)h * W + v] * taps[r * 3 + s];
            }
        }
    }
    y[((long long)n * K + k) * HW + hw] = acc;
#endif
#else
    long long total = (long long)N * K * H * W;
    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= total) return;
    int col = o % W;
    int row = (o / W) % H;
    int k = (o / ((long long)W * H)) % K;
    long long n = o / ((long long)W * H * K);
    float acc = bias[k];
    for (int c = 0; c < C; ++c) {
        const float* plane = x + (n * C + c) * H * W;
        const float* taps = w + ((long long)k * C + c) * 9;
        for (int r = 0; r < 3; ++r) {
            int h = row - 1 + r;
            if (h < 0 || h >= H) continue;
            for (int s = 0; s < 3; ++s) {
                int wc = col - 1 + s;
                if (wc < 0 || wc >= W) continue;
                acc += plane[(long long)h * W + wc] * taps[r * 3 + s];
            }
        }
    }
    y[o] = acc;
#endif
}
