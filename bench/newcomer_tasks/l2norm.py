import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void l2normalize(float* in, float* out, int rows, int dim)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) {
        float sumsq = 0;
        for (int k = 0; k < dim; ++k)
            sumsq += in[i * dim + k] * in[i * dim + k];
        float norm = sqrtf(sumsq) + 1e-6f;
        for (int k = 0; k < dim; ++k)
            out[i * dim + k] = in[i * dim + k] / norm;
    }
}
'''
def ref(i, s):
    x = i["x"].astype(np.float64)
    return {"y": (x / (np.sqrt((x * x).sum(axis=1)) + 1e-6)[:, None]).astype(np.float32)}
TASK = task("l2norm", {"R": 8192, "D": 4096}, [{"R": 1, "D": 1}, {"R": 9, "D": 513}, {"R": 40, "D": 3}],
            [T("x", ("R", "D"))], [T("y", ("R", "D"))], ref, SRC, "l2normalize",
            ["cdiv(R, 128)"], [128], ["x", "y", "R", "D"])
