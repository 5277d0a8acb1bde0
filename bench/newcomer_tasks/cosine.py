import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void cosine_sim(const float *a, const float *b, float *out, int n, int d) {
    int row = blockIdx.x;
    if (threadIdx.x == 0) {
        float dot = 0, na = 0, nb = 0;
        for (int k = 0; k < d; k++) {
            float x = a[row * d + k], y = b[row * d + k];
            dot += x * y; na += x * x; nb += y * y;
        }
        out[row] = dot / fmaxf(sqrtf(na) * sqrtf(nb), 1e-8f);
    }
}
'''
def ref(i, s):
    a, b = i["a"].astype(np.float64), i["b"].astype(np.float64)
    den = np.maximum(np.sqrt((a * a).sum(1)) * np.sqrt((b * b).sum(1)), 1e-8)
    return {"out": ((a * b).sum(1) / den).astype(np.float32)}
TASK = task("cosine", {"N": 8192, "D": 4096}, [{"N": 1, "D": 1}, {"N": 7, "D": 300}, {"N": 30, "D": 5}],
            [T("a", ("N", "D")), T("b", ("N", "D"))], [T("out", ("N",))], ref, SRC, "cosine_sim",
            ["N"], [32], ["a", "b", "out", "N", "D"])
