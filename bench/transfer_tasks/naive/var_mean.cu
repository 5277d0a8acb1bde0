// Naive per-row variance and mean: a grid-stride loop over rows, each row summed by one
// thread, twice (the mean, then the squared distances to it). Population variance.
extern "C" __global__ void var_mean_rows(const float* x, float* var, float* mean, int M, int N) {
    for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < M; row += blockDim.x * gridDim.x) {
        float s = 0.0f;
        for (int j = 0; j < N; ++j) {
            s += x[row * N + j];
        }
        float m = s / N;
        float ss = 0.0f;
        for (int j = 0; j < N; ++j) {
            float d = x[row * N + j] - m;
            ss += d * d;
        }
        mean[row] = m;
        var[row] = ss / N;
    }
}
