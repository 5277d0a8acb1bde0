import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
// C = A * B^T, A is M x K, B is N x K
extern "C" __global__ void matmul_nt(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            sum += A[row * K + k] * B[col * K + k];
        }
        C[row * N + col] = sum;
    }
}
'''
def ref(i, s):
    return {"C": (i["A"].astype(np.float64) @ i["B"].astype(np.float64).T).astype(np.float32)}
TASK = task("matmul_nt", {"M": 4096, "N": 4096, "K": 4096},
            [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 65}, {"M": 40, "N": 7, "K": 129}],
            [T("A", ("M", "K")), T("B", ("N", "K"))], [T("C", ("M", "N"))], ref, SRC, "matmul_nt",
            ["cdiv(N, 16)", "cdiv(M, 16)"], [16, 16], ["A", "B", "C", "M", "N", "K"],
            flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"])
