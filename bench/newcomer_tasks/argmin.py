import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void argmin_rows(const float* x, int* idx, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        int best = 0;
        float bv = x[r * cols];
        for (int c = 1; c < cols; c++) {
            if (x[r * cols + c] < bv) { bv = x[r * cols + c]; best = c; }
        }
        idx[r] = best;
    }
}
'''
def ref(i, s):
    return {"idx": i["x"].argmin(axis=1).astype(np.int32)}
TASK = task("argmin", {"R": 8192, "C": 8192}, [{"R": 1, "C": 1}, {"R": 7, "C": 1000}, {"R": 300, "C": 3}],
            [T("x", ("R", "C"))], [T("idx", ("R",), "int32")], ref, SRC, "argmin_rows",
            ["cdiv(R, 128)"], [128], ["x", "idx", "R", "C"])
