// Naive per-column mean and standard deviation of an N x D matrix (row-major): one
// thread per column walks down it twice, the mean first, then the squared distances.
extern "C" __global__ void column_stats(const float* x, float* mean, float* std, int N, int D) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col < D) {
        float sum = 0.0f;
        for (int i = 0; i < N; i++) {
            sum += x[i * D + col];
        }
        float m = sum / N;
        float sq = 0.0f;
        for (int i = 0; i < N; i++) {
            float d = x[i * D + col] - m;
            sq += d * d;
        }
        mean[col] = m;
        std[col] = sqrtf(sq / N);
    }
}
