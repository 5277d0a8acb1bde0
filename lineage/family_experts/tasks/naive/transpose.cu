// y = x^T: one thread per element of x, which writes it to its place in y.
extern "C" __global__ void transpose_naive(const float* x, float* y, int M, int N) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        y[col * M + row] = x[row * N + col];
    }
}
