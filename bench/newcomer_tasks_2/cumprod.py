import numpy as np

from bench.newcomer_tasks._make import task
from profiling.harness.spec import TensorSpec


def near_one(rng, shape, distribution, sizes):
    """Factors in [0.95, 1.05], so that a row's running product stays in range."""
    return rng.uniform(0.95, 1.05, size=shape).astype(np.float32)


SRC = r'''
#include <cstdint>

// running product along each row: one thread per row
extern "C" __global__ void cumprod_rows(const float* x, float* y, int M, int N) {
    int64_t row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const float* src = x + row * N;
    float* dst = y + row * N;
    float running = 1.0f;
    for (int j = 0; j < N; ++j) {
        running *= src[j];
        dst[j] = running;
    }
}
'''
def ref(i, s):
    return {"y": np.cumprod(i["x"].astype(np.float64), axis=1).astype(np.float32)}
TASK = task("cumprod", {"M": 4096, "N": 4096}, [{"M": 1, "N": 1}, {"M": 3, "N": 1000}, {"M": 5, "N": 33},
            {"M": 2, "N": 4099}],
            [TensorSpec("x", "float32", ("M", "N"), generate=near_one)],
            [TensorSpec("y", "float32", ("M", "N"))], ref, SRC, "cumprod_rows",
            ["cdiv(M, 64)"], [64], ["x", "y", "M", "N"])
