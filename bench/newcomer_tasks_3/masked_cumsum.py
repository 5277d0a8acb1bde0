import numpy as np

from bench.newcomer_tasks._make import task
from profiling.harness.spec import TensorSpec


def zeros_and_ones(rng, shape, distribution, sizes):
    """A mask as float32 0/1, about half of it set."""
    return (rng.random(size=shape) < 0.5).astype(np.float32)


SRC = r'''
// cumsum(x * mask) along each row, the mask given as 0/1 floats; one thread per row
extern "C" __global__ void masked_cumsum(const float* x, const float* mask, float* y, int rows, int n) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        float running = 0;
        for (int j = 0; j < n; j++) {
            if (mask[row * n + j] != 0.0f) running += x[row * n + j];
            y[row * n + j] = running;
        }
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64) * (i["mask"] != 0)
    return {"y": np.cumsum(x, axis=1).astype(np.float32)}
TASK = task("masked_cumsum", {"R": 4096, "N": 4096},
            [{"R": 1, "N": 1}, {"R": 3, "N": 1000}, {"R": 5, "N": 33}],
            [TensorSpec("x", "float32", ("R", "N")),
             TensorSpec("mask", "float32", ("R", "N"), generate=zeros_and_ones)],
            [TensorSpec("y", "float32", ("R", "N"))], ref, SRC, "masked_cumsum",
            ["cdiv(R, 64)"], [64], ["x", "mask", "y", "R", "N"])
