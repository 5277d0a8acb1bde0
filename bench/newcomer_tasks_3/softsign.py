import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#include <cstddef>

// x / (1 + |x|), grid-stride with a while loop
extern "C" __global__ void softsign_kernel(const float* x, float* y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)blockDim.x * gridDim.x;
    while (i < n) {
        float v = x[i];
        y[i] = v / (1.0f + fabsf(v));
        i += stride;
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": (x / (1.0 + np.abs(x))).astype(np.float32)}
TASK = task("softsign", {"n": 1 << 24}, [{"n": 1}, {"n": 1000}, {"n": 4099}],
            [T("x", ("n",))], [T("y", ("n",))], ref, SRC, "softsign_kernel",
            ["min(1024, cdiv(n, 256))"], [256], ["x", "y", "n"])
