import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void ln(const float* x, float* y, int rows, int n) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = x + r * n;
    float mean = 0.0f;
    int k = 0;
    while (k < n) { mean += row[k]; k++; }
    mean /= n;
    float var = 0.0f;
    k = 0;
    while (k < n) { float d = row[k] - mean; var += d * d; k++; }
    var /= n;
    float inv = rsqrtf(var + 1e-5f);
    k = 0;
    while (k < n) { y[r * n + k] = (row[k] - mean) * inv; k++; }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    m = x.mean(1, keepdims=True)
    v = ((x - m) ** 2).mean(1, keepdims=True)
    return {"y": ((x - m) / np.sqrt(v + 1e-5)).astype(np.float32)}
TASK = task("layernorm_w", {"R": 8192, "N": 4096}, [{"R": 1, "N": 1}, {"R": 9, "N": 500}, {"R": 70, "N": 3}],
            [T("x", ("R", "N"))], [T("y", ("R", "N"))], ref, SRC, "ln",
            ["cdiv(R, 64)"], [64], ["x", "y", "R", "N"])
