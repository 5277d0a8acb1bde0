import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define TILE 16

// C = A^T B, A stored K x M, B stored K x N
extern "C" __global__ void matmul_at_b(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, int M, int N, int K) {
    const size_t row = (size_t)blockIdx.y * TILE + threadIdx.y;
    const size_t col = (size_t)blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        acc += A[k * (size_t)M + row] * B[k * (size_t)N + col];
    }
    C[row * N + col] = acc;
}
'''
def ref(i, s):
    return {"C": (i["A"].astype(np.float64).T @ i["B"].astype(np.float64)).astype(np.float32)}
TASK = task("matmul_tn", {"M": 4096, "N": 4096, "K": 4096},
            [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 9, "K": 33}, {"M": 5, "N": 40, "K": 70}],
            [T("A", ("K", "M")), T("B", ("K", "N"))], [T("C", ("M", "N"))], ref, SRC, "matmul_at_b",
            ["cdiv(N, 16)", "cdiv(M, 16)"], [16, 16], ["A", "B", "C", "M", "N", "K"],
            flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"])
