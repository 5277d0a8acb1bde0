import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void softplus(const float* in, float* out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    while (i < n) {
        float v = in[i];
        out[i] = v > 20.0f ? v : log1pf(expf(v));
        i += stride;
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))).astype(np.float32)}
TASK = task("softplus", {"n": 1 << 27}, [{"n": 1}, {"n": 1000}, {"n": 4097}],
            [T("x", ("n",))], [T("y", ("n",))], ref, SRC, "softplus",
            [512], [256], ["x", "y", "n"])
