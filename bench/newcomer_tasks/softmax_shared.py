import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void softmax_rows(const float* x, float* y, int R, int C) {
    __shared__ float red[256];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    float m = -INFINITY;
    for (int c = tid; c < C; c += blockDim.x) m = fmaxf(m, x[row * C + c]);
    red[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
        __syncthreads();
    }
    float rowmax = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = tid; c < C; c += blockDim.x) sum += expf(x[row * C + c] - rowmax);
    red[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }
    float total = red[0];
    for (int c = tid; c < C; c += blockDim.x) y[row * C + c] = expf(x[row * C + c] - rowmax) / total;
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return {"y": (e / e.sum(1, keepdims=True)).astype(np.float32)}
TASK = task("softmax_shared", {"R": 8192, "C": 4096}, [{"R": 1, "C": 1}, {"R": 7, "C": 1000}, {"R": 33,
            "C": 3}],
            [T("x", ("R", "C"))], [T("y", ("R", "C"))], ref, SRC, "softmax_rows", ["R"], [256], ["x", "y",
            "R", "C"])
