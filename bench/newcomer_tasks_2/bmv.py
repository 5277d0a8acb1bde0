import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define A_AT(b, i, k) A[((b) * M + (i)) * K + (k)]

// y[b] = A[b] @ x[b]
extern "C" __global__ void batched_matvec(const float* A, const float* x, float* y, int Bt, int M, int K) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y;
    if (i < M) {
        float sum = 0.0f;
        const float* xb = x + b * K;
        for (int k = 0; k < K; ++k) sum += A_AT(b, i, k) * xb[k];
        y[b * M + i] = sum;
    }
}
'''
def ref(i, s):
    a, x = i["A"].astype(np.float64), i["x"].astype(np.float64)
    return {"y": np.einsum("bmk,bk->bm", a, x).astype(np.float32)}
TASK = task("bmv", {"Bt": 64, "M": 1024, "K": 1024},
            [{"Bt": 1, "M": 1, "K": 1}, {"Bt": 3, "M": 17, "K": 33}, {"Bt": 2, "M": 5, "K": 300}],
            [T("A", ("Bt", "M", "K")), T("x", ("Bt", "K"))], [T("y", ("Bt", "M"))], ref, SRC,
            "batched_matvec",
            ["cdiv(M, 128)", "Bt"], [128], ["A", "x", "y", "Bt", "M", "K"],
            flops=lambda s: 2.0 * s["Bt"] * s["M"] * s["K"])
