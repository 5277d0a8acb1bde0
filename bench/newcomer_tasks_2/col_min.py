import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
// min over dim 0 of an R x C matrix
extern "C" __global__ void colmin(const float* a, float* out, unsigned R, unsigned C) {
    unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < C) {
        float m = a[j];
        for (unsigned i = R - 1; i > 0; i--)
            m = fminf(m, a[i * C + j]);
        out[j] = m;
    }
}
'''
def ref(i, s):
    return {"y": i["x"].min(axis=0).astype(np.float32)}
TASK = task("col_min", {"R": 8192, "C": 8192}, [{"R": 1, "C": 1}, {"R": 17, "C": 1000}, {"R": 300, "C": 3}],
            [T("x", ("R", "C"))], [T("y", ("C",))], ref, SRC, "colmin",
            ["cdiv(C, 256)"], [256], ["x", "y", "R", "C"])
