import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void bias_relu(const float* x, const float* bias, float* y, int M, int N) {
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < M * N; idx += gridDim.x * blockDim.x) {
        int col = idx % N;
        float v = x[idx] + bias[col];
        y[idx] = v > 0.0f ? v : 0.0f;
    }
}
'''
def ref(i, s):
    return {"y": np.maximum(i["x"].astype(np.float64) + i["b"].astype(np.float64)[None, :],
        0).astype(np.float32)}
TASK = task("bias_relu", {"M": 8192, "N": 8192}, [{"M": 1, "N": 1}, {"M": 7, "N": 33}, {"M": 100, "N": 3}],
            [T("x", ("M", "N")), T("b", ("N",))], [T("y", ("M", "N"))], ref, SRC, "bias_relu",
            [1024], [256], ["x", "b", "y", "M", "N"])
