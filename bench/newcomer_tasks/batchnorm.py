import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void bn_infer(const float* x, const float* mean, const float* var, const float* w,
                                    const float* b, float* y, int N, int C, int H, int W) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N * C * H * W) {
        int c = (i / (H * W)) % C;
        y[i] = (x[i] - mean[c]) / sqrtf(var[c] + 1e-5f) * w[c] + b[c];
    }
}
'''
def ref(i, s):
    sh = (1, -1, 1, 1)
    x = i["x"].astype(np.float64)
    m, v, w, b = (i[k].astype(np.float64).reshape(sh) for k in ("mean", "var", "w", "b"))
    return {"y": ((x - m) / np.sqrt(np.abs(v) + 1e-5) * w + b).astype(np.float32)}
TASK = task("batchnorm", {"N": 32, "C": 64, "H": 128, "W": 128},
            [{"N": 1, "C": 1, "H": 1, "W": 1}, {"N": 2, "C": 3, "H": 5, "W": 7}, {"N": 3, "C": 5, "H": 2,
            "W": 9}],
            [T("x", ("N", "C", "H", "W")), T("mean", ("C",)), T("var", ("C",)), T("w", ("C",)), T("b",
            ("C",))],
            [T("y", ("N", "C", "H", "W"))], ref, SRC.replace("var[c] + 1e-5f", "fabsf(var[c]) + 1e-5f"),
            "bn_infer",
            ["cdiv(N * C * H * W, 256)"], [256], ["x", "mean", "var", "w", "b", "y", "N", "C", "H", "W"])
