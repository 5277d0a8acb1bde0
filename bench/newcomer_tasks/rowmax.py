import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void rowmax(const float* x, float* out, int R, int C) {
    int row = blockIdx.x;
    int t = threadIdx.x;
    __shared__ float sm[256];
    float m = -INFINITY;
    for (int c = t; c < C; c += blockDim.x) m = fmaxf(m, x[row * C + c]);
    sm[t] = m;
    __syncthreads();
    if (t == 0) {
        float best = sm[0];
        for (int k = 1; k < blockDim.x; k++) best = fmaxf(best, sm[k]);
        out[row] = best;
    }
}
'''
def ref(i, s):
    return {"out": i["x"].max(axis=1).astype(np.float32)}
TASK = task("rowmax", {"R": 8192, "C": 8192}, [{"R": 1, "C": 1}, {"R": 7, "C": 1000}, {"R": 30, "C": 3}],
            [T("x", ("R", "C"))], [T("out", ("R",))], ref, SRC, "rowmax",
            ["R"], [256], ["x", "out", "R", "C"])
