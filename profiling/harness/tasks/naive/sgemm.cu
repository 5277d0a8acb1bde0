// Naive SGEMM, C = A @ B, row-major: one thread per output element, a plain fp32 loop
// over K. 2-D blocks of TILE x TILE threads, x along the columns of C.
extern "C" __global__ void sgemm_naive(const float* A, const float* B, float* C, int M, int N,
                                       int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) {
        return;
    }
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[(long long)row * K + k] * B[(long long)k * N + col];
    }
    C[(long long)row * N + col] = acc;
}
