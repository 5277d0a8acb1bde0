import numpy as np

from bench.newcomer_tasks._make import T, task

SRC = r'''
extern "C" __global__ void bmm(const float* A, const float* B, float* C, int batch, int M, int K, int N) {
    int b = blockIdx.z;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M && j < N) {
        float acc = 0;
        for (int k = 0; k < K; k++)
            acc += A[b * M * K + i * K + k] * B[b * K * N + k * N + j];
        C[b * M * N + i * N + j] = acc;
    }
}
'''
def ref(i, s):
    return {"C": np.matmul(i["A"].astype(np.float64), i["B"].astype(np.float64)).astype(np.float32)}
TASK = task("bmm", {"Bt": 32, "M": 512, "K": 512, "N": 512},
            [{"Bt": 1, "M": 1, "K": 1, "N": 1}, {"Bt": 3, "M": 17, "K": 33, "N": 9}, {"Bt": 2, "M": 5,
            "K": 70, "N": 40}],
            [T("A", ("Bt", "M", "K")), T("B", ("Bt", "K", "N"))], [T("C", ("Bt", "M", "N"))], ref, SRC, "bmm",
            ["cdiv(N, 16)", "cdiv(M, 16)", "Bt"], [16, 16], ["A", "B", "C", "Bt", "M", "K", "N"],
            flops=lambda s: 2.0 * s["Bt"] * s["M"] * s["N"] * s["K"])
