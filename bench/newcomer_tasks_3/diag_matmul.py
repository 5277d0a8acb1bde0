import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
#define IDX(r, c, ld) ((r) * (ld) + (c))

// diag(d) @ B without building the diagonal matrix: row i of B scaled by d[i]
extern "C" __global__ void diag_matmul(const float* d, const float* B, float* C, int N, int M) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y;
    if (i < N && j < M) {
        C[IDX(i, j, M)] = d[i] * B[IDX(i, j, M)];
    }
}
'''
def ref(i, s):
    return {"c": (i["d"].astype(np.float64)[:, None] * i["b"]).astype(np.float32)}
TASK = task("diag_matmul", {"N": 4096, "M": 4096}, [{"N": 1, "M": 1}, {"N": 7, "M": 129}, {"N": 33, "M": 5}],
            [T("d", ("N",)), T("b", ("N", "M"))], [T("c", ("N", "M"))], ref, SRC, "diag_matmul",
            ["cdiv(M, 256)", "N"], [256], ["d", "b", "c", "N", "M"])
