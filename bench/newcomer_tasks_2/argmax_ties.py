import numpy as np

from bench.newcomer_tasks._make import task
from profiling.harness.spec import TensorSpec


def few_values(rng, shape, distribution, sizes):
    """Small integers as floats: most rows hold their maximum more than once."""
    return rng.integers(-3, 4, size=shape).astype(np.float32)


SRC = r'''
// index of the first maximum of each row (ties -> smallest index, as torch.argmax)
extern "C" __global__ void argmax_last_dim(const float* __restrict__ x, int* __restrict__ out, int R, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) return;
    float best = -FLT_MAX;
    int arg = C - 1;
    for (int c = C - 1; c >= 0; --c) {
        float v = x[r * C + c];
        if (v >= best) { best = v; arg = c; }
    }
    out[r] = arg;
}
'''
def ref(i, s):
    return {"idx": i["x"].argmax(axis=1).astype(np.int32)}
TASK = task("argmax_ties", {"R": 16384, "C": 4096},
            [{"R": 1, "C": 1}, {"R": 7, "C": 1000}, {"R": 300, "C": 3}],
            [TensorSpec("x", "float32", ("R", "C"), generate=few_values)],
            [TensorSpec("idx", "int32", ("R",))], ref, SRC, "argmax_last_dim",
            ["cdiv(R, 128)"], [128], ["x", "idx", "R", "C"])
