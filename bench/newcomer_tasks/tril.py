import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void tril(const float* x, float* y, int n) {
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n && c < n) {
        y[r * n + c] = (c > r) ? 0.0f : x[r * n + c];
    }
}
'''
def ref(i, s):
    return {"y": np.tril(i["x"]).astype(np.float32)}
TASK = task("tril", {"n": 8192}, [{"n": 1}, {"n": 7}, {"n": 33}],
            [T("x", ("n", "n"))], [T("y", ("n", "n"))], ref, SRC, "tril",
            ["cdiv(n, 16)", "cdiv(n, 16)"], [16, 16], ["x", "y", "n"])
