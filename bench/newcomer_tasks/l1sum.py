import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define THREADS 256
extern "C" __global__ void zero_out(float* out) { out[0] = 0.0f; }
extern "C" __global__ void abs_sum(const float* x, float* out, int n) {
    __shared__ float buf[THREADS];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[tid] = (i < n) ? fabsf(x[i]) : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] += buf[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(out, buf[0]);
}
'''
def ref(i, s):
    return {"out": np.array([np.abs(i["x"].astype(np.float64)).sum()], dtype=np.float32)}
TASK = task("l1sum", {"n": 1 << 26}, [{"n": 1}, {"n": 1000}, {"n": 70001}],
            [T("x", ("n",))], [T("out", (1,))], ref, SRC, None, None, None, None,
            launches=[{"kernel": "zero_out", "grid": [1], "block": [1], "shared_bytes": 0, "args": ["out"]},
                      {"kernel": "abs_sum", "grid": ["cdiv(n, 256)"], "block": [256], "shared_bytes": 0,
                       "args": ["x", "out", "n"]}])
