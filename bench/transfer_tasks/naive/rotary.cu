// Naive rotary embedding (GPT-NeoX style: the head vector is split into halves).
// One thread per output element of x[S][H][D]; cos and sin are [S][D/2].
extern "C" __global__ void rotary(const float* x, const float* cos_table, const float* sin_table,
                                  float* out, int S, int H, int D) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S * H * D) return;
    int half = D / 2;
    int d = i % D;
    int s = i / (H * D);
    if (d < half) {
        float c = cos_table[s * half + d];
        float sn = sin_table[s * half + d];
        out[i] = x[i] * c - x[i + half] * sn;
    } else {
        float c = cos_table[s * half + d - half];
        float sn = sin_table[s * half + d - half];
        out[i] = x[i] * c + x[i - half] * sn;
    }
}
