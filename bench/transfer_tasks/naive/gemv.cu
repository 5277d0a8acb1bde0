// Naive matrix-vector product y = A x, A row-major M x K: one thread per row of A.
extern "C" __global__ void gemv(const float* A, const float* x, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[row * K + k] * x[k];
        }
        y[row] = acc;
    }
}
