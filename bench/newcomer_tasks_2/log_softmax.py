import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define WARP 32

__device__ __forceinline__ float warp_max(float v) {
    for (int o = WARP / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// one warp per row
extern "C" __global__ void log_softmax_rows(const float* x, float* y, int rows, int cols) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    int lane = threadIdx.x % WARP;
    if (warp >= rows) return;
    const float* xr = x + (size_t)warp * cols;
    float* yr = y + (size_t)warp * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += WARP) m = fmaxf(m, xr[c]);
    m = warp_max(m);
    float s = 0.f;
    for (int c = lane; c < cols; c += WARP) s += expf(xr[c] - m);
    float lse = m + logf(warp_sum(s));
    for (int c = lane; c < cols; c += WARP) yr[c] = xr[c] - lse;
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    m = x.max(1, keepdims=True)
    return {"y": (x - m - np.log(np.exp(x - m).sum(1, keepdims=True))).astype(np.float32)}
TASK = task("log_softmax", {"R": 8192, "C": 4096}, [{"R": 1, "C": 1}, {"R": 7, "C": 1000}, {"R": 33, "C": 3}],
            [T("x", ("R", "C"))], [T("y", ("R", "C"))], ref, SRC, "log_softmax_rows",
            ["cdiv(R, 4)"], [128], ["x", "y", "R", "C"])
