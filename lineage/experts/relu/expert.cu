// relu expert: y = max(x, 0) at the copy ceiling. Each optimization is one flag
// (lineage/experts/relu/manifest.json); with every flag off this is the plain first
// attempt, one thread per element.

#if OPT_LAUNCH_BOUNDS
#define RELU_BOUNDS __launch_bounds__(BLOCK)
#else
#define RELU_BOUNDS
#endif

#if OPT_RESTRICT
#define RELU_IN const float* __restrict__
#define RELU_OUT float* __restrict__
#else
#define RELU_IN const float*
#define RELU_OUT float*
#endif

extern "C" __global__ void RELU_BOUNDS relu(RELU_IN x, RELU_OUT y, int n) {
#if OPT_GRID_STRIDE
    long long stride = (long long)gridDim.x * blockDim.x;
    long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
#if OPT_VEC4
    // Whole float4s first (the buffers are 16-byte aligned), then the tail one by one.
    long long quads = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
#if OPT_UNROLL
    // Two quads in flight per thread per step.
    long long i = first;
    for (; i + stride < quads; i += 2 * stride) {
        float4 a = x4[i], b = x4[i + stride];
        y4[i] = make_float4(fmaxf(a.x, 0.0f), fmaxf(a.y, 0.0f), fmaxf(a.z, 0.0f), fmaxf(a.w, 0.0f));
        y4[i + stride] = make_float4(fmaxf(b.x, 0.0f), fmaxf(b.y, 0.0f), fmaxf(b.z, 0.0f), fmaxf(b.w, 0.0f));
    }
    for (; i < quads; i += stride) {
        float4 a = x4[i];
        y4[i] = make_float4(fmaxf(a.x, 0.0f), fmaxf(a.y, 0.0f), fmaxf(a.z, 0.0f), fmaxf(a.w, 0.0f));
    }
#else
    for (long long i = first; i < quads; i += stride) {
        float4 a = x4[i];
        y4[i] = make_float4(fmaxf(a.x, 0.0f), fmaxf(a.y, 0.0f), fmaxf(a.z, 0.0f), fmaxf(a.w, 0.0f));
    }
#endif
    for (long long i = quads * 4 + first; i < n; i += stride) y[i] = fmaxf(x[i], 0.0f);
#else
    for (long long i = first; i < n; i += stride) y[i] = fmaxf(x[i], 0.0f);
#endif
#else
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
#endif
}
