import numpy as np

from bench.newcomer_tasks._make import task
from profiling.harness.spec import TensorSpec


def plus_minus_one(rng, shape, distribution, sizes):
    """Labels as float32 -1 or +1."""
    return np.where(rng.random(size=shape) < 0.5, -1.0, 1.0).astype(np.float32)


SRC = r'''
extern "C" __global__ void zero_out(float* out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *out = 0.0f;
}

// mean(max(0, 1 - pred * target)): one thread per element, each adds its share
extern "C" __global__ void hinge_mean(const float* pred, const float* target, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float margin = 1.0f - pred[i] * target[i];
        atomicAdd(out, fmaxf(margin, 0.0f) / n);
    }
}
'''
def ref(i, s):
    p, t = i["pred"].astype(np.float64), i["target"].astype(np.float64)
    return {"loss": np.array([np.maximum(1.0 - p * t, 0.0).mean()], dtype=np.float32)}
TASK = task("hinge_loss", {"n": 1 << 24}, [{"n": 1}, {"n": 1000}, {"n": 4099}],
            [TensorSpec("pred", "float32", ("n",)),
             TensorSpec("target", "float32", ("n",), generate=plus_minus_one)],
            [TensorSpec("loss", "float32", (1,))], ref, SRC, None, None, None, None,
            launches=[{"kernel": "zero_out", "grid": [1], "block": [1], "shared_bytes": 0, "args": ["loss"]},
                      {"kernel": "hinge_mean", "grid": ["cdiv(n, 256)"], "block": [256], "shared_bytes": 0,
                       "args": ["pred", "target", "loss", "n"]}])
