import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define SIGMOID(v) (1.0f / (1.0f + expf(-(v))))

// GLU over the last dim: out = first half * sigmoid(second half)
extern "C" __global__ void glu_kernel(const float *in, float *out, int rows, int half) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows) {
        if (col < half) {
            const float *r = in + (size_t)row * 2 * half;
            float a = r[col];
            float g = r[col + half];
            out[(size_t)row * half + col] = a * SIGMOID(g);
        }
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    a, g = x[:, : s["C"]], x[:, s["C"]:]
    return {"y": (a / (1 + np.exp(-g))).astype(np.float32)}
TASK = task("glu", {"R": 8192, "C": 4096}, [{"R": 1, "C": 1}, {"R": 9, "C": 100}, {"R": 37, "C": 5}],
            [T("x", ("R", "2 * C"))], [T("y", ("R", "C"))], ref, SRC, "glu_kernel",
            ["cdiv(C, 32)", "cdiv(R, 8)"], [32, 8], ["x", "y", "R", "C"])
