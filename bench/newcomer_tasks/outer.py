import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void outer(const float* a, const float* b, float* c, int M, int N) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M && j < N) c[i * N + j] = a[i] * b[j];
}
'''
def ref(i, s):
    return {"c": np.outer(i["a"].astype(np.float64), i["b"].astype(np.float64)).astype(np.float32)}
TASK = task("outer", {"M": 8192, "N": 8192}, [{"M": 1, "N": 1}, {"M": 7, "N": 33}, {"M": 40, "N": 3}],
            [T("a", ("M",)), T("b", ("N",))], [T("c", ("M", "N"))], ref, SRC, "outer",
            ["cdiv(N, 32)", "cdiv(M, 8)"], [32, 8], ["a", "b", "c", "M", "N"])
