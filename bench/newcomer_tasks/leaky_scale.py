import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void leaky(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows && c < cols) {
        float v = x[r * cols + c];
        if (v < 0) v = v * 0.01f;
        y[r * cols + c] = v * 2.0f;
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": (np.where(x < 0, x * 0.01, x) * 2).astype(np.float32)}
TASK = task("leaky_scale", {"R": 8192, "C": 8192}, [{"R": 1, "C": 1}, {"R": 7, "C": 33}, {"R": 31, "C": 5}],
            [T("x", ("R", "C"))], [T("y", ("R", "C"))], ref, SRC, "leaky",
            ["cdiv(C, 16)", "cdiv(R, 16)"], [16, 16], ["x", "y", "R", "C"])
