// Naive top-k: one thread per row, k selection passes over the row. Pass t picks the
// largest element that comes after pick t-1 in the order (value descending, index
// ascending), so ties are taken in index order and no element is picked twice.
extern "C" __global__ void topk_rows(const float* x, float* values, int* indices, int M, int N,
                                     int k) {
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) {
        return;
    }
    const float* in = x + row * N;
    float last_value = INFINITY;
    int last_index = -1;
    for (int t = 0; t < k; ++t) {
        float best_value = -INFINITY;
        int best_index = -1;
        for (int j = 0; j < N; ++j) {
            float v = in[j];
            bool after_last = v < last_value || (v == last_value && j > last_index);
            bool better = best_index < 0 || v > best_value;  // equal: keep the lower index
            if (after_last && better) {
                best_value = v;
                best_index = j;
            }
        }
        values[row * k + t] = best_value;
        indices[row * k + t] = best_index;
        last_value = best_value;
        last_index = best_index;
    }
}
