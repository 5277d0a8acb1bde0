import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define CLAMP01(v) fminf(fmaxf((v), 0.0f), 1.0f)

// relu6(x + 3) / 6 on a 2-D grid, one thread per element
extern "C" __global__ void hard_sigmoid(const float* in, float* out, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= rows || col >= cols) return;
    int idx = row * cols + col;
    out[idx] = CLAMP01(in[idx] / 6.0f + 0.5f);
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": np.clip(x / 6.0 + 0.5, 0.0, 1.0).astype(np.float32)}
TASK = task("hardsigmoid", {"R": 8192, "C": 4096}, [{"R": 1, "C": 1}, {"R": 7, "C": 129}, {"R": 33, "C": 5}],
            [T("x", ("R", "C"))], [T("y", ("R", "C"))], ref, SRC, "hard_sigmoid",
            ["cdiv(C, 32)", "cdiv(R, 8)"], [32, 8], ["x", "y", "R", "C"])
