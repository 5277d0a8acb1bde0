import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
__device__ float gelu(float x) {
    const float c = 0.7978845608f;
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}
extern "C" __global__ void gelu_kernel(const float* in, float* out, int n) {
    int idx = threadIdx.x + blockIdx.x * blockDim.x;
    if (idx >= n) return;
    out[idx] = gelu(in[idx]);
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": (0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))).astype(np.float32)}
TASK = task("gelu_helper", {"n": 1 << 27}, [{"n": 1}, {"n": 1000}, {"n": 4097}],
            [T("x", ("n",))], [T("y", ("n",))], ref, SRC, "gelu_kernel", ["cdiv(n, 256)"], [256], ["x",
            "y", "n"])
