import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
// y = A^T x with A stored [K, M] row-major: one thread per output, walking down a column
extern "C" __global__ void matvec_t(const float* A, const float* x, float* y, int K, int M) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc += A[(long long)k * M + m] * x[k];
    y[m] = acc;
}
'''
def ref(i, s):
    return {"y": (i["a"].astype(np.float64).T @ i["x"].astype(np.float64)).astype(np.float32)}
TASK = task("matvec_t", {"K": 8192, "M": 8192}, [{"K": 1, "M": 1}, {"K": 17, "M": 5}, {"K": 300, "M": 129}],
            [T("a", ("K", "M")), T("x", ("K",))], [T("y", ("M",))], ref, SRC, "matvec_t",
            ["cdiv(M, 128)"], [128], ["a", "x", "y", "K", "M"],
            flops=lambda s: 2.0 * s["K"] * s["M"])
