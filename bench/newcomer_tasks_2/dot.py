import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define TPB 256

// "CUDA by Example"'s dot product: a partial sum per block, then one thread adds them
extern "C" __global__ void dot_partial(const float* a, const float* b, float* partial, int n) {
    __shared__ float cache[TPB];
    int tid = threadIdx.x;
    int i = blockIdx.x * TPB + tid;
    float t = 0;
    while (i < n) {
        t += a[i] * b[i];
        i += TPB * gridDim.x;
    }
    cache[tid] = t;
    __syncthreads();
    int s = TPB / 2;
    while (s != 0) {
        if (tid < s) cache[tid] += cache[tid + s];
        __syncthreads();
        s /= 2;
    }
    if (tid == 0) partial[blockIdx.x] = cache[0];
}

extern "C" __global__ void dot_final(const float* partial, float* out, int parts) {
    if (threadIdx.x == 0) {
        float s = 0;
        for (int k = 0; k < parts; k++) s += partial[k];
        out[0] = s;
    }
}
'''
def ref(i, s):
    return {"out": np.array([i["a"].astype(np.float64) @ i["b"].astype(np.float64)], dtype=np.float32)}
PARTS = "min(32, cdiv(n, 256))"
TASK = task("dot", {"n": 1 << 24}, [{"n": 1}, {"n": 1000}, {"n": 70001}],
            [T("a", ("n",)), T("b", ("n",))], [T("out", (1,))], ref, SRC, None, None, None, None,
            scratch=[{"name": "partial", "dtype": "float32", "count": PARTS}],
            launches=[{"kernel": "dot_partial", "grid": [PARTS], "block": [256], "shared_bytes": 0,
                       "args": ["a", "b", "partial", "n"]},
                      {"kernel": "dot_final", "grid": [1], "block": [1], "shared_bytes": 0,
                       "args": ["partial", "out", PARTS]}],
            flops=lambda s: 2.0 * s["n"])
