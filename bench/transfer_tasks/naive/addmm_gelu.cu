// Naive out = gelu(bias + A @ B) with the exact (erf) GELU: one thread per output
// element on a 2-D grid, x along the columns, a plain fp32 loop over K.
extern "C" __global__ void addmm_gelu(const float* A, const float* B, const float* bias, float* out,
                                      int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float sum = bias[col];
        for (int k = 0; k < K; k++) {
            sum += A[row * K + k] * B[k * N + col];
        }
        out[row * N + col] = 0.5f * sum * (1.0f + erff(sum / sqrtf(2.0f)));
    }
}
