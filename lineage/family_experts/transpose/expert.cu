// transpose expert: y = x^T for an M x N fp32 matrix, at the copy ceiling. Each
// optimization is one flag (manifest.json); with every flag off this is the plain first
// attempt, a thread per element on a 16 x 16 block, reading a row and writing a column.

#if OPT_RESTRICT
#define TRANSPOSE_IN const float* __restrict__
#define TRANSPOSE_OUT float* __restrict__
#else
#define TRANSPOSE_IN const float*
#define TRANSPOSE_OUT float*
#endif

#define TILE 32
#if OPT_SMEM_PADDING
// One column more: a warp reading down a column of the tile meets 32 different banks.
#define TILE_PITCH (TILE + 1)
#else
#define TILE_PITCH TILE
#endif

extern "C" __global__ void transpose(TRANSPOSE_IN x, TRANSPOSE_OUT y, int M, int N) {
#if OPT_SMEM_TILE
    // A block stages a TILE x TILE tile: each warp reads TILE neighbouring columns of a
    // row of x, and after the barrier writes TILE neighbouring rows of a column of y, so
    // both the loads and the stores are whole 128-byte lines.
    __shared__ float tile[TILE][TILE_PITCH];
    const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
    const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
    for (int k = ty; k < TILE; k += BLOCK / TILE) {
        const int r = r0 + k, c = c0 + tx;
        if (r < M && c < N) tile[k][tx] = x[(long long)r * N + c];
    }
    __syncthreads();
    for (int k = ty; k < TILE; k += BLOCK / TILE) {
        const int c = c0 + k, r = r0 + tx;
        if (r < M && c < N) y[(long long)c * M + r] = tile[tx][k];
    }
#else
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < M && c < N) y[(long long)c * M + r] = x[(long long)r * N + c];
#endif
}
