// Naive row softmax: one thread per row, three passes over the row
// (maximum, sum of exponentials, normalised write). Subtracting the row maximum keeps
// expf from overflowing on large inputs.
extern "C" __global__ void softmax_rows(const float* x, float* y, int M, int N) {
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) {
        return;
    }
    const float* in = x + row * N;
    float* out = y + row * N;
    float row_max = -INFINITY;
    for (int j = 0; j < N; ++j) {
        row_max = fmaxf(row_max, in[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < N; ++j) {
        sum += expf(in[j] - row_max);
    }
    for (int j = 0; j < N; ++j) {
        out[j] = expf(in[j] - row_max) / sum;
    }
}
