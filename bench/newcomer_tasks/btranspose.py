import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void batched_transpose(const float* in, float* out, int B, int M, int N) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int b = blockIdx.z;
    if (row < M && col < N) {
        out[b * M * N + col * M + row] = in[b * M * N + row * N + col];
    }
}
'''
def ref(i, s):
    return {"y": np.ascontiguousarray(i["x"].transpose(0, 2, 1))}
TASK = task("btranspose", {"B": 32, "M": 1024, "N": 2048}, [{"B": 1, "M": 1, "N": 1}, {"B": 2, "M": 33,
            "N": 17}, {"B": 3, "M": 5, "N": 40}],
            [T("x", ("B", "M", "N"))], [T("y", ("B", "N", "M"))], ref, SRC, "batched_transpose",
            ["cdiv(N, 32)", "cdiv(M, 8)", "B"], [32, 8], ["x", "y", "B", "M", "N"])
