import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define EPS 1e-6f

// root mean square of each row
extern "C" __global__ void row_rms(const float* x, float* out, size_t rows, size_t cols) {
    size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (r < rows) {
        const float* p = x + r * cols;
        float acc = 0.0f;
        size_t c = 0;
        while (c < cols) {
            float v = p[c];
            acc += v * v;
            c++;
        }
        out[r] = sqrtf(acc / cols + EPS);
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": np.sqrt((x * x).mean(1) + 1e-6).astype(np.float32)}
TASK = task("rms_rows", {"R": 16384, "C": 4096}, [{"R": 1, "C": 1}, {"R": 7, "C": 1000}, {"R": 300, "C": 3}],
            [T("x", ("R", "C"))], [T("y", ("R",))], ref, SRC, "row_rms",
            ["cdiv(R, 256)"], [256], ["x", "y", "R", "C"])
