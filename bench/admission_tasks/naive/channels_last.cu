// NCHW -> NHWC: one thread per output element, which finds its input element.
extern "C" __global__ void channels_last(const float* x, float* y, int N, int C, int H, int W) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total = N * C * H * W;
    if (idx < total) {
        int c = idx % C;
        int w = (idx / C) % W;
        int h = (idx / (C * W)) % H;
        int n = idx / (C * W * H);
        y[idx] = x[((n * C + c) * H + h) * W + w];
    }
}
