// Naive select: out[i] = a[i] where cond[i] > 0, else b[i]. One thread per element.
extern "C" __global__ void where_select(const float* cond, const float* a, const float* b, float* out,
                                        int n) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) {
        if (cond[tid] > 0.0f) {
            out[tid] = a[tid];
        } else {
            out[tid] = b[tid];
        }
    }
}
