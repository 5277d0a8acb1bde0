import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define ALPHA 1.0f
#define BLOCK 128

extern "C" __global__ void elu_fwd(const float* __restrict__ x, float* __restrict__ y, const int total) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= total) return;
    const float v = x[i];
    y[i] = v > 0.0f ? v : ALPHA * (expf(v) - 1.0f);
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": np.where(x > 0, x, np.expm1(x)).astype(np.float32)}
TASK = task("elu", {"R": 8192, "C": 4096}, [{"R": 1, "C": 1}, {"R": 7, "C": 129}, {"R": 31, "C": 3}],
            [T("x", ("R", "C"))], [T("y", ("R", "C"))], ref, SRC, "elu_fwd",
            ["cdiv(R * C, 128)"], [128], ["x", "y", "R * C"])
