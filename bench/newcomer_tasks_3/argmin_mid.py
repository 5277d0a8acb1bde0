import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
// argmin over dim 1 of [B, R, C] -> [B, C] (int32), first index on ties
extern "C" __global__ void argmin_dim1(const float* x, int* idx, int B, int R, int C) {
    int b = blockIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) {
        const float* p = x + (size_t)b * R * C + c;
        float best = p[0];
        int where = 0;
        int r = 1;
        while (r < R) {
            float v = p[(size_t)r * C];
            if (v < best) {
                best = v;
                where = r;
            }
            r++;
        }
        idx[b * C + c] = where;
    }
}
'''
def ref(i, s):
    return {"idx": i["x"].argmin(axis=1).astype(np.int32)}
TASK = task("argmin_mid", {"B": 16, "R": 256, "C": 4096},
            [{"B": 1, "R": 1, "C": 1}, {"B": 3, "R": 17, "C": 5}, {"B": 2, "R": 4, "C": 129}],
            [T("x", ("B", "R", "C"))], [T("idx", ("B", "C"), "int32")], ref, SRC, "argmin_dim1",
            ["cdiv(C, 128)", "B"], [128], ["x", "idx", "B", "R", "C"])
