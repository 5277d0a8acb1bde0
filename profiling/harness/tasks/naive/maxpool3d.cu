// Naive 3-D max pooling, kernel 3, stride 2, padding 1 (padding never wins: it acts as
// -inf). One thread per output element, NCDHW layout.
extern "C" __global__ void maxpool3d_k3s2p1(const float* x, float* y, int N, int C, int D,
                                            int H, int W, int OD, int OH, int OW) {
    long long total = (long long)N * C * OD * OH * OW;
    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= total) {
        return;
    }
    int ow = o % OW;
    int oh = (o / OW) % OH;
    int od = (o / ((long long)OW * OH)) % OD;
    long long plane = o / ((long long)OW * OH * OD);  // n * C + c
    const float* in = x + plane * D * H * W;
    float best = -INFINITY;
    for (int kd = 0; kd < 3; ++kd) {
        int d = od * 2 - 1 + kd;
        if (d < 0 || d >= D) continue;
        for (int kh = 0; kh < 3; ++kh) {
            int h = oh * 2 - 1 + kh;
            if (h < 0 || h >= H) continue;
            for (int kw = 0; kw < 3; ++kw) {
                int w = ow * 2 - 1 + kw;
                if (w < 0 || w >= W) continue;
                best = fmaxf(best, in[((long long)d * H + h) * W + w]);
            }
        }
    }
    y[o] = best;
}
