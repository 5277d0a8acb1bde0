import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#include <cstdint>

// [B, S, H, D] -> [B, H, S, D] (split heads for attention)
extern "C" __global__ void to_heads(const float* src, float* dst, int B, int S, int H, int D) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t total = (int64_t)B * S * H * D;
    if (idx < total) {
        int d = idx % D;
        int64_t t = idx / D;
        int s = t % S;
        t /= S;
        int h = t % H;
        int b = t / H;
        dst[idx] = src[(((int64_t)b * S + s) * H + h) * D + d];
    }
}
'''
def ref(i, s):
    return {"y": np.ascontiguousarray(i["x"].transpose(0, 2, 1, 3))}
TASK = task("to_heads", {"B": 8, "S": 2048, "H": 16, "D": 64},
            [{"B": 1, "S": 1, "H": 1, "D": 1}, {"B": 2, "S": 7, "H": 3, "D": 5},
             {"B": 1, "S": 33, "H": 4, "D": 17}],
            [T("x", ("B", "S", "H", "D"))], [T("y", ("B", "H", "S", "D"))], ref, SRC, "to_heads",
            ["cdiv(B * S * H * D, 256)"], [256], ["x", "y", "B", "S", "H", "D"])
