import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void channel_scale(const float* x, const float* s, float* y, int N, int C, int HW) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int total = N * C * HW;
    if (i < total) {
        int c = (i / HW) % C;
        y[i] = x[i] * s[c];
    }
}
'''
def ref(i, s):
    return {"y": (i["x"].astype(np.float64) * i["s"].astype(np.float64)[None, :, None]).astype(np.float32)}
TASK = task("chan_scale", {"N": 32, "C": 256, "HW": 16384}, [{"N": 1, "C": 1, "HW": 1}, {"N": 2, "C": 3,
            "HW": 50}, {"N": 3, "C": 17, "HW": 7}],
            [T("x", ("N", "C", "HW")), T("s", ("C",))], [T("y", ("N", "C", "HW"))], ref, SRC, "channel_scale",
            ["cdiv(N * C * HW, 256)"], [256], ["x", "s", "y", "N", "C", "HW"])
