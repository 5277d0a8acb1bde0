import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void row_sums(const float* mat, float* sums, int rows, int cols) {
    unsigned int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        const float* p = mat + (size_t)r * cols;
        double acc = 0.0;
        for (int j = 0; j < cols; ++j) acc += p[j];
        sums[r] = (float)acc;
    }
}
'''
def ref(i, s):
    return {"s": i["x"].astype(np.float64).sum(1).astype(np.float32)}
TASK = task("rowsum_double", {"R": 16384, "C": 4096}, [{"R": 1, "C": 1}, {"R": 7, "C": 1000}, {"R": 300,
            "C": 3}],
            [T("x", ("R", "C"))], [T("s", ("R",))], ref, SRC, "row_sums", ["cdiv(R, 128)"], [128], ["x",
            "s", "R", "C"])
