// Naive attention, out = softmax(q k^T / sqrt(D)) v, in three launches through a
// scratch buffer of scores (B*H x S x S): scores, row softmax in place, then the
// weighted sum of v. One thread per score, per row, per output element.

extern "C" __global__ void attention_scores(const float* q, const float* k, float* scores,
                                            int BH, int S, int D) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)BH * S * S) {
        return;
    }
    long long j = idx % S;
    long long i = (idx / S) % S;
    long long bh = idx / ((long long)S * S);
    const float* qi = q + (bh * S + i) * D;
    const float* kj = k + (bh * S + j) * D;
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) {
        dot += qi[d] * kj[d];
    }
    scores[idx] = dot / sqrtf((float)D);
}

extern "C" __global__ void softmax_rows_inplace(float* scores, int rows, int S) {
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) {
        return;
    }
    float* p = scores + row * S;
    float row_max = -INFINITY;
    for (int j = 0; j < S; ++j) {
        row_max = fmaxf(row_max, p[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < S; ++j) {
        p[j] = expf(p[j] - row_max);
        sum += p[j];
    }
    for (int j = 0; j < S; ++j) {
        p[j] /= sum;
    }
}

extern "C" __global__ void attention_output(const float* probs, const float* v, float* out,
                                            int BH, int S, int D) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)BH * S * D) {
        return;
    }
    long long d = idx % D;
    long long i = (idx / D) % S;
    long long bh = idx / ((long long)S * D);
    const float* p = probs + (bh * S + i) * S;
    const float* vb = v + bh * S * D;
    float acc = 0.0f;
    for (int j = 0; j < S; ++j) {
        acc += p[j] * vb[(long long)j * D + d];
    }
    out[idx] = acc;
}
