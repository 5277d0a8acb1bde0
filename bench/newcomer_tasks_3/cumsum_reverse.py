import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
// reverse cumulative sum along each row (torch.flip(cumsum(flip(x)))): one thread per row
extern "C" __global__ void cumsum_rev(const float* x, float* out, int rows, int n) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = n - 1; j >= 0; j--) {
        acc += x[r * n + j];
        out[r * n + j] = acc;
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": np.flip(np.cumsum(np.flip(x, 1), axis=1), 1).astype(np.float32)}
TASK = task("cumsum_reverse", {"R": 4096, "N": 4096},
            [{"R": 1, "N": 1}, {"R": 3, "N": 1000}, {"R": 5, "N": 33}],
            [T("x", ("R", "N"))], [T("y", ("R", "N"))], ref, SRC, "cumsum_rev",
            ["cdiv(R, 64)"], [64], ["x", "y", "R", "N"])
