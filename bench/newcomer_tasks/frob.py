import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void zero_sum(float* s) { s[0] = 0.0f; }
extern "C" __global__ void sum_squares(const float* x, float* s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(s, x[i] * x[i]);
}
extern "C" __global__ void divide_by_norm(const float* x, const float* s, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / sqrtf(s[0]);
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": (x / np.sqrt((x * x).sum())).astype(np.float32)}
TASK = task("frob", {"n": 1 << 26}, [{"n": 1}, {"n": 1000}, {"n": 4099}],
            [T("x", ("n",))], [T("y", ("n",))], ref, SRC, None, None, None, None,
            scratch=[{"name": "ss", "dtype": "float32", "count": "1"}],
            launches=[{"kernel": "zero_sum", "grid": [1], "block": [1], "shared_bytes": 0, "args": ["ss"]},
                      {"kernel": "sum_squares", "grid": ["cdiv(n, 256)"], "block": [256], "shared_bytes": 0,
                       "args": ["x", "ss", "n"]},
                      {"kernel": "divide_by_norm", "grid": ["cdiv(n, 256)"], "block": [256],
                          "shared_bytes": 0,
                       "args": ["x", "ss", "y", "n"]}])
