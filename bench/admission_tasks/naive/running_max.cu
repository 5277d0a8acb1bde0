// y[r][j] = max(x[r][0..j]): each thread takes one row and keeps the largest value so far.
extern "C" __global__ void running_max(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float best = x[r * cols];
    for (int c = 0; c < cols; c++) {
        float v = x[r * cols + c];
        if (v > best) {
            best = v;
        }
        y[r * cols + c] = best;
    }
}
