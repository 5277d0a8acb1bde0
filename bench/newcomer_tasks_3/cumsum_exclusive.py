import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#include <cstdint>

// exclusive cumulative sum along each row: y[r, 0] = 0, y[r, j] = x[r, 0] + ... + x[r, j - 1]
extern "C" __global__ void exclusive_cumsum(const float* __restrict__ x, float* __restrict__ y,
                                            int64_t rows, int64_t n) {
    int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (row < rows) {
        const float* in = x + row * n;
        float* o = y + row * n;
        float sum = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
            o[j] = sum;
            sum += in[j];
        }
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    y = np.zeros_like(x)
    y[:, 1:] = np.cumsum(x, axis=1)[:, :-1]
    return {"y": y.astype(np.float32)}
TASK = task("cumsum_exclusive", {"R": 4096, "N": 4096},
            [{"R": 1, "N": 1}, {"R": 3, "N": 1000}, {"R": 5, "N": 33}],
            [T("x", ("R", "N"))], [T("y", ("R", "N"))], ref, SRC, "exclusive_cumsum",
            ["cdiv(R, 128)"], [128], ["x", "y", "R", "N"])
