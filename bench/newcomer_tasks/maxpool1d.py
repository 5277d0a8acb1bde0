import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void maxpool1d(const float* x, float* y, int rows, int L, int OL) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * OL) {
        int r = idx / OL;
        int o = idx % OL;
        float m = x[r * L + o * 2];
        for (int k = 1; k < 4; k++) {
            int p = o * 2 + k;
            if (p < L) m = fmaxf(m, x[r * L + p]);
        }
        y[idx] = m;
    }
}
'''
def ref(i, s):
    x = i["x"]
    r, L = x.shape
    OL = s["OL"]
    out = np.full((r, OL), -np.inf, np.float32)
    for k in range(4):
        p = np.arange(OL) * 2 + k
        ok = p < L
        v = np.where(ok[None, :], x[:, np.minimum(p, L - 1)], -np.inf)
        out = np.maximum(out, v)
    return {"y": out.astype(np.float32)}
TASK = task("maxpool1d", {"R": 4096, "L": 8192, "OL": 4095}, [{"R": 1, "L": 4, "OL": 1}, {"R": 3, "L": 11,
            "OL": 5}, {"R": 7, "L": 64, "OL": 31}],
            [T("x", ("R", "L"))], [T("y", ("R", "OL"))], ref, SRC, "maxpool1d", ["cdiv(R * OL, 256)"],
            [256], ["x", "y", "R", "L", "OL"])
