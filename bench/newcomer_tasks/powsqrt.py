import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void rms_elem(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = sqrt(pow(a[i], 2.0) + pow(b[i], 2.0));
}
'''
def ref(i, s):
    return {"c": np.hypot(i["a"].astype(np.float64), i["b"].astype(np.float64)).astype(np.float32)}
TASK = task("powsqrt", {"n": 1 << 26}, [{"n": 1}, {"n": 1000}, {"n": 4099}],
            [T("a", ("n",)), T("b", ("n",))], [T("c", ("n",))], ref, SRC, "rms_elem", ["cdiv(n, 256)"],
            [256], ["a", "b", "c", "n"])
