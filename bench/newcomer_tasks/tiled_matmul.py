import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define TILE 16
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; t++) {
        int ak = t * TILE + threadIdx.x;
        int bk = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[bk * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
'''
def ref(i, s):
    return {"C": (i["A"].astype(np.float64) @ i["B"].astype(np.float64)).astype(np.float32)}
TASK = task("tiled_matmul", {"M": 4096, "N": 4096, "K": 4096},
            [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 65}, {"M": 40, "N": 7, "K": 129}],
            [T("A", ("M", "K")), T("B", ("K", "N"))], [T("C", ("M", "N"))], ref, SRC, "matmul_tiled",
            ["cdiv(N, 16)", "cdiv(M, 16)"], [16, 16], ["A", "B", "C", "M", "N", "K"],
            flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"])
