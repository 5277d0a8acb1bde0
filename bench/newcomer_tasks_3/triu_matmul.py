import numpy as np

from bench.newcomer_tasks._make import T, task
from profiling.harness.spec import TensorSpec

SRC = r'''
// triu(A @ B) for upper-triangular A and B: c[i][j] = sum over k in [i, j] of a[i][k] * b[k][j]
__device__ __forceinline__ float upper_dot(const float* a, const float* b, int n, int i, int j) {
    float s = 0.0f;
    for (int k = i; k <= j; ++k) s += a[i * n + k] * b[k * n + j];
    return s;
}

extern "C" __global__ void triu_matmul(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || j >= n) return;
    c[i * n + j] = (j < i) ? 0.0f : upper_dot(a, b, n, i, j);
}
'''


def upper(rng, shape, distribution, sizes):
    """An upper-triangular float32 matrix."""
    return np.triu(rng.standard_normal(size=shape)).astype(np.float32)


def ref(i, s):
    product = i["a"].astype(np.float64) @ i["b"].astype(np.float64)
    return {"c": np.triu(product).astype(np.float32)}
TASK = task("triu_matmul", {"n": 4096}, [{"n": 1}, {"n": 7}, {"n": 33}],
            [TensorSpec("a", "float32", ("n", "n"), generate=upper),
             TensorSpec("b", "float32", ("n", "n"), generate=upper)],
            [T("c", ("n", "n"))], ref, SRC, "triu_matmul",
            ["cdiv(n, 16)", "cdiv(n, 16)"], [16, 16], ["a", "b", "c", "n"],
            flops=lambda s: s["n"] ** 3 / 3.0)
