import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#include <stdint.h>

__device__ float hswish(float v) {
    float r = v + 3.0;
    r = r < 0.0 ? 0.0 : (r > 6.0 ? 6.0 : r);
    return v * r / 6.0;
}

extern "C" __global__ void hardswish_kernel(const float* in, float* out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)blockDim.x * gridDim.x) {
        out[i] = hswish(in[i]);
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": (x * np.clip(x + 3, 0, 6) / 6).astype(np.float32)}
TASK = task("hardswish", {"n": 1 << 26}, [{"n": 1}, {"n": 1000}, {"n": 4099}],
            [T("x", ("n",))], [T("y", ("n",))], ref, SRC, "hardswish_kernel",
            ["cdiv(n, 1024)"], [256], ["x", "y", "n"])
