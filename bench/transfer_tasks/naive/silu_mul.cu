// Naive SwiGLU: one thread per output element. Row m of x holds the gate half
// x[m, 0:D] and the value half x[m, D:2D].
extern "C" __global__ void silu_mul(const float* x, float* out, int M, int D) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < M * D) {
        int m = idx / D;
        int d = idx % D;
        float gate = x[m * 2 * D + d];
        float value = x[m * 2 * D + D + d];
        out[idx] = gate / (1.0f + expf(-gate)) * value;
    }
}
