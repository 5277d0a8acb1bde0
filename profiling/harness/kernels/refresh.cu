// The harness's own kernels: fresh input values between timed runs, so that nothing a
// candidate computed earlier can be replayed. Counter-based hashing (splitmix64) gives
// every element an independent value from (seed, index) with no state.

__device__ __forceinline__ unsigned long long splitmix64(unsigned long long x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

__device__ __forceinline__ float unit_open(unsigned long long bits) {
    // 24 random bits -> (0, 1): never 0, so log() below is finite.
    return ((bits >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

extern "C" __global__ void optiml_refresh_normal_f32(float* p, unsigned long long n,
                                                     unsigned long long seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        unsigned long long h = splitmix64(seed ^ splitmix64(i));
        float u1 = unit_open(h), u2 = unit_open(splitmix64(h));
        p[i] = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);  // Box-Muller
    }
}

extern "C" __global__ void optiml_refresh_int32(int* p, unsigned long long n,
                                                unsigned long long seed, int lo, int hi) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long span = (unsigned long long)(hi - lo);
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        p[i] = lo + (int)(splitmix64(seed ^ splitmix64(i)) % span);
    }
}
