import numpy as np

from bench.newcomer_tasks._make import T, task
from profiling.harness.spec import TensorSpec

SRC = r'''
extern "C" __global__ void embed(const int* ids, const float* table, float* out, int n, int dim, int vocab) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * dim) {
        int tok = i / dim;
        int d = i % dim;
        out[i] = table[ids[tok] * dim + d];
    }
}
'''
def gen(rng, shape, distribution, sizes):
    return rng.integers(0, sizes["V"], size=shape).astype(np.int32)
def ref(i, s):
    return {"y": i["table"][i["ids"]].astype(np.float32)}
TASK = task("embedding", {"n": 65536, "D": 1024, "V": 32000}, [{"n": 1, "D": 1, "V": 1}, {"n": 7, "D": 33,
            "V": 5}, {"n": 100, "D": 4, "V": 1000}],
            [TensorSpec("ids", "int32", ("n",), generate=gen), T("table", ("V", "D"))], [T("y", ("n",
            "D"))], ref, SRC, "embed",
            ["cdiv(n * D, 256)"], [256], ["ids", "table", "y", "n", "D", "V"])
