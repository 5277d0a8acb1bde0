import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void col_mean(const float* a, float* m, int rows, int cols) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < cols) {
        float acc = 0.0f;
        for (int i = 0; i < rows; i++) acc += a[i * cols + j];
        m[j] = acc / rows;
    }
}
'''
def ref(i, s):
    return {"m": i["a"].astype(np.float64).mean(axis=0).astype(np.float32)}
TASK = task("col_mean", {"R": 8192, "C": 8192}, [{"R": 1, "C": 1}, {"R": 100, "C": 7}, {"R": 3, "C": 517}],
            [T("a", ("R", "C"))], [T("m", ("C",))], ref, SRC, "col_mean",
            ["cdiv(C, 256)"], [256], ["a", "m", "R", "C"])
