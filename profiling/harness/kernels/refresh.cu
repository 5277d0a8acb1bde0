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

__device__ __forceinline__ float normal_from(unsigned long long h) {
    float u1 = unit_open(h), u2 = unit_open(splitmix64(h));
    return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);  // Box-Muller
}

extern "C" __global__ void optiml_refresh_normal_f32(float* p, unsigned long long n,
                                                     unsigned long long seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        p[i] = normal_from(splitmix64(seed ^ splitmix64(i)));
    }
}

// -- the gate's L1 inputs (worker.py, Session.generate_on_gpu) --------------------------
// The distributions of spec.generate_float, drawn from (seed, index) as above: 0 normal,
// 1 heavy_tailed (Student-t with 3 degrees of freedom times 4: a normal over the root of
// a chi-square(3) / 3, the sum of three more squared normals), 2 uniform on (-1, 1).
// Element i's k-th normal comes from the hash chain h, splitmix64(h), ... two links each.
// inputs.gpu_like_values is the same arithmetic in numpy, for replaying on a host.
extern "C" __global__ void optiml_generate_f32(float* p, unsigned long long n,
                                               unsigned long long seed, int distribution) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        unsigned long long h = splitmix64(seed ^ splitmix64(i));
        float value;
        if (distribution == 1) {
            float z = normal_from(h), v = 0.0f;
            for (int k = 0; k < 3; ++k) {
                h = splitmix64(splitmix64(h));
                float w = normal_from(h);
                v += w * w;
            }
            value = 4.0f * z / fmaxf(sqrtf(v * (1.0f / 3.0f)), 1e-12f);
        } else if (distribution == 2) {
            value = 2.0f * unit_open(h) - 1.0f;
        } else {
            value = normal_from(h);
        }
        p[i] = value;
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

// -- the screen's comparisons on the GPU (worker.py, Session.check_resident) ------------
// A search's screen keeps one seed's inputs and reference outputs on the GPU between
// candidates and compares there, instead of copying gigabytes to the host per candidate.
// With GateOptions.compare_on_gpu the full gate compares its outputs here too, with the
// reference copied in after the candidate's work has finished (gpu_compare.py). Anything these find is looked at again
// on the host, whose guards name it exactly.

// result: [0] outputs still holding the poison where the reference does not,
//         [1] elements outside atol + rtol * |ref| or NaN/Inf where the reference differs,
//         [2] bits of the largest absolute error, [3] bits of the largest relative error
//         (non-negative floats order like their bit patterns).
extern "C" __global__ void optiml_compare_f32(const float* out, const float* ref,
                                              unsigned long long n, double atol, double rtol,
                                              unsigned int* result) {
    unsigned int unwritten = 0, bad = 0;
    float max_abs = 0.0f, max_rel = 0.0f;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        float o = out[i], r = ref[i];
        if (__float_as_uint(o) == 0xFFFFFFFFu) {
            unwritten += __float_as_uint(r) != 0xFFFFFFFFu;
        } else if (isnan(r)) {
            bad += !isnan(o);
        } else if (isinf(r)) {
            bad += o != r;
        } else if (!isfinite(o)) {
            bad += 1;
        } else {
            double diff = fabs((double)o - (double)r);
            bad += diff > atol + rtol * fabs((double)r);
            max_abs = fmaxf(max_abs, (float)diff);
            if (r != 0.0f) max_rel = fmaxf(max_rel, (float)(diff / fabs((double)r)));
        }
    }
    unwritten = __reduce_add_sync(0xFFFFFFFFu, unwritten);
    bad = __reduce_add_sync(0xFFFFFFFFu, bad);
    unsigned int abs_bits = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(max_abs));
    unsigned int rel_bits = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(max_rel));
    if ((threadIdx.x & 31) == 0) {
        if (unwritten) atomicAdd(&result[0], unwritten);
        if (bad) atomicAdd(&result[1], bad);
        atomicMax(&result[2], abs_bits);
        atomicMax(&result[3], rel_bits);
    }
}

// A task with an allowance (spec.Task.allowance): element i passes when
// |out - ref| <= allowed[i] in double (NaN never does), `allowed` a double per element or,
// when null, `allowed_all` for every one; the result as optiml_compare_f32's.
extern "C" __global__ void optiml_within_allowance_f32(const float* out, const float* ref,
                                                       const double* allowed, double allowed_all,
                                                       unsigned long long n, unsigned int* result) {
    unsigned int unwritten = 0, bad = 0;
    float max_abs = 0.0f, max_rel = 0.0f;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        float o = out[i], r = ref[i];
        if (__float_as_uint(o) == 0xFFFFFFFFu && __float_as_uint(r) != 0xFFFFFFFFu) {
            unwritten += 1;
            continue;
        }
        double error = fabs((double)o - (double)r);
        double bound = allowed != nullptr ? allowed[i] : allowed_all;
        bad += !(error <= bound);
        if (isfinite(error)) {
            max_abs = fmaxf(max_abs, (float)error);
            if (r != 0.0f) max_rel = fmaxf(max_rel, (float)(error / fabs((double)r)));
        }
    }
    unwritten = __reduce_add_sync(0xFFFFFFFFu, unwritten);
    bad = __reduce_add_sync(0xFFFFFFFFu, bad);
    unsigned int abs_bits = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(max_abs));
    unsigned int rel_bits = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(max_rel));
    if ((threadIdx.x & 31) == 0) {
        if (unwritten) atomicAdd(&result[0], unwritten);
        if (bad) atomicAdd(&result[1], bad);
        atomicMax(&result[2], abs_bits);
        atomicMax(&result[3], rel_bits);
    }
}

// result[0] += how many 4-byte words (and tail bytes) differ between a and b (an input
// against its untouched copy).
extern "C" __global__ void optiml_count_differences(const unsigned char* a, const unsigned char* b,
                                                    unsigned long long nbytes,
                                                    unsigned int* result) {
    unsigned long long words = nbytes / 4, stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned int* a4 = (const unsigned int*)a;
    const unsigned int* b4 = (const unsigned int*)b;
    unsigned int differ = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += stride) {
        differ += a4[i] != b4[i];
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (unsigned long long i = words * 4; i < nbytes; ++i) differ += a[i] != b[i];
    }
    differ = __reduce_add_sync(0xFFFFFFFFu, differ);
    if ((threadIdx.x & 31) == 0 && differ) atomicAdd(&result[0], differ);
}

// -- timed runs (worker.py, Session.time_runs) ------------------------------------------
// result[run] += how many 4-byte words of a float32 output still hold the poison (all
// bits set) after that timed run. Launched after every run's stop event, the same for
// every run, so it costs no timed time and tells a kernel nothing.
extern "C" __global__ void optiml_count_poison(const unsigned int* out, unsigned long long words,
                                               unsigned int* result, unsigned int run) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned int poisoned = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += stride) {
        poisoned += out[i] == 0xFFFFFFFFu;
    }
    poisoned = __reduce_add_sync(0xFFFFFFFFu, poisoned);
    if ((threadIdx.x & 31) == 0 && poisoned) atomicAdd(&result[run], poisoned);
}

// -- the screen's resident seeds (device.py, ResidentSeeds) -----------------------------
// result[0] += sum over words of w(key, i) * (word + 1), mod 2^64, with w odd and drawn
// from a per-process secret key: a candidate that changes a resident seed cannot keep
// this sum without knowing the key.
extern "C" __global__ void optiml_keyed_checksum(const unsigned char* p, unsigned long long nbytes,
                                                 unsigned long long key,
                                                 unsigned long long* result) {
    unsigned long long words = nbytes / 4, stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned int* p4 = (const unsigned int*)p;
    unsigned long long sum = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += stride) {
        sum += (splitmix64(key ^ splitmix64(i)) | 1ull) * ((unsigned long long)p4[i] + 1ull);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (unsigned long long i = words * 4; i < nbytes; ++i)
            sum += (splitmix64(key ^ splitmix64(i + (1ull << 62))) | 1ull) * (p[i] + 1ull);
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(result, sum);
}

// -- ceilings of a GPU without a datasheet entry (ceilings.py, measure_ceilings) --------
// Eight independent FMA chains per thread, `iterations` steps each: 16 flops a step.
extern "C" __global__ void optiml_fma_loop(float* out, int iterations, float seed) {
    float a[8];
    for (int k = 0; k < 8; ++k) a[k] = seed + threadIdx.x * 1e-7f + k;
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int k = 0; k < 8; ++k) a[k] = fmaf(a[k], 0.9999999f, 1e-7f);
    }
    float s = 0.0f;
    for (int k = 0; k < 8; ++k) s += a[k];
    if (s == 12345.678f) out[0] = s;  // never true; keeps the chains from being removed
}
