// maxpool3d expert: 3-D max pooling, kernel 3, stride 2, padding 1 (padding acts as
// -inf), NCDHW fp32, at the copy ceiling. Each optimization is one flag (manifest.json);
// with every flag off this is the plain first attempt, one thread per output reading its
// 27 inputs, each input loaded by every window that holds it (27 / 8 times on average).
//
// The windows overlap by one input along each axis and the output is 1/8 of the input:
// the compulsory traffic is x read once and y written once (604 MB at 16x32x64^3, 0.142
// ms at 4.25 TB/s). With every flag on, a thread owns TILE_W neighbouring outputs of one
// output row and walks them down the whole depth. Per output plane it loads the two
// input planes new to it (2 od and 2 od + 1), 3 rows of 2 TILE_W + 1 columns each, as
// float4s and one halo column; the third plane (2 od - 1) is the previous step's, carried
// as its 3 x 3 maximum. What neighbouring threads share (the odd rows, the halo columns)
// they request at the same step, so L1 and L2 serve the repeats and DRAM sees each input
// once.
//
// Offsets inside one (n, c) volume are 32-bit (D H W < 2^31 elements, 8 GiB a channel):
// 64-bit row offsets cost the all-flags kernel the registers it needs to keep a step's
// loads in flight within 64. Offsets across volumes and into y are 64-bit.

#if OPT_LAUNCH_BOUNDS
#define POOL_BOUNDS __launch_bounds__(BLOCK, MIN_BLOCKS_PER_SM)
#else
#define POOL_BOUNDS
#endif

#if OPT_RESTRICT
#define POOL_IN const float* __restrict__
#define POOL_OUT float* __restrict__
#else
#define POOL_IN const float*
#define POOL_OUT float*
#endif

#if OPT_REG_TILE
// Outputs a thread computes along W.
#define OUTS TILE_W
#else
#define OUTS 1
#endif

#if OPT_VEC4
static_assert(TILE_W % 4 == 0, "a tile is whole float4s of outputs and of input pairs");
#endif

#if OPT_REG_TILE
// Columns w0 .. w0 + 2 OUTS of one input row; outside [0, W) they are padding (-inf).
__device__ __forceinline__ void load_columns(POOL_IN row, int W, int w0, float* v) {
#if OPT_VEC4
    // When W % (2 TILE_W) == 0, columns w0 + 1 .. w0 + 2 OUTS are inside the row and
    // 16-byte aligned (w0 + 1 = 2 ow0 and W are multiples of 8), so they come as float4s;
    // only the halo column w0, the last of the neighbouring tile's, is loaded alone.
    if (W % (2 * TILE_W) == 0) {
        v[0] = (w0 >= 0) ? row[w0] : -INFINITY;
        const float4* quads = reinterpret_cast<const float4*>(row + w0 + 1);
#pragma unroll
        for (int k = 0; k < OUTS / 2; ++k) {
            const float4 q = quads[k];
            v[4 * k + 1] = q.x, v[4 * k + 2] = q.y, v[4 * k + 3] = q.z, v[4 * k + 4] = q.w;
        }
        return;
    }
#endif
#pragma unroll
    for (int c = 0; c < 2 * OUTS + 1; ++c) {
        const int w = w0 + c;
        v[c] = (w >= 0 && w < W) ? row[w] : -INFINITY;
    }
}

// m[j] = max(m[j], the three columns of window j), v holding a row's 2 OUTS + 1 columns.
__device__ __forceinline__ void merge_row(const float* v, float* m) {
#pragma unroll
    for (int j = 0; j < OUTS; ++j) {
        m[j] = fmaxf(m[j], fmaxf(fmaxf(v[2 * j], v[2 * j + 1]), v[2 * j + 2]));
    }
}
#endif

// m[j] = the maximum over the 3 x 3 (h, w) window of output (oh, ow0 + j) in one input
// plane.
__device__ __forceinline__ void plane_max(POOL_IN plane, int H, int W, int oh, int ow0,
                                          float* m) {
#if OPT_REG_TILE
    // The OUTS windows of a row overlap by one column: 2 OUTS + 1 loads instead of 3 OUTS.
#pragma unroll
    for (int j = 0; j < OUTS; ++j) m[j] = -INFINITY;
#pragma unroll
    for (int kh = 0; kh < 3; ++kh) {
        const int h = 2 * oh - 1 + kh;
        float v[2 * OUTS + 1];
#if OPT_UNROLL
        // No branch around the loads, so the rows of a plane are in flight together: a row
        // outside the plane is read as row 2 oh instead, which is inside and in the window
        // anyway, and a maximum taken twice is the same maximum.
        const bool inside = h >= 0 && h < H;
        load_columns(plane + (inside ? h : 2 * oh) * W, W, 2 * ow0 - 1, v);
#else
        if (h < 0 || h >= H) continue;
        load_columns(plane + h * W, W, 2 * ow0 - 1, v);
#endif
        merge_row(v, m);
    }
#else
    float best = -INFINITY;
    for (int kh = 0; kh < 3; ++kh) {
        const int h = 2 * oh - 1 + kh;
        if (h < 0 || h >= H) continue;
        for (int kw = 0; kw < 3; ++kw) {
            const int w = 2 * ow0 - 1 + kw;
            if (w < 0 || w >= W) continue;
            best = fmaxf(best, plane[h * W + w]);
        }
    }
    m[0] = best;
#endif
}

// The outputs ow0 .. ow0 + OUTS - 1 of one output row (`row` points at ow0); those past
// OW belong to no window and are not written.
__device__ __forceinline__ void store_outputs(POOL_OUT row, int OW, int ow0, const float* m) {
#if OPT_VEC4
    // When OW % TILE_W == 0 every tile is whole and 16-byte aligned (TILE_W % 4 == 0).
    if (OW % TILE_W == 0) {
#pragma unroll
        for (int k = 0; k < OUTS / 4; ++k) {
            reinterpret_cast<float4*>(row)[k] =
                make_float4(m[4 * k], m[4 * k + 1], m[4 * k + 2], m[4 * k + 3]);
        }
        return;
    }
#endif
    for (int j = 0; j < OUTS; ++j) {
        if (ow0 + j < OW) row[j] = m[j];
    }
}

// plane_max of plane d, one of the window's 2 od - 1 .. 2 od + 1; a plane outside the
// volume is padding and adds nothing to the window's maximum.
__device__ __forceinline__ void plane_max_or_padding(POOL_IN volume, int d, int D, int H, int W,
                                                     int oh, int ow0, float* m) {
#if OPT_UNROLL
    // No branch here either: a plane outside the volume (d = -1 or D, only ever as
    // 2 od - 1 = -1 or 2 od + 1 = D) is read as the window's middle plane 2 od instead,
    // its nearest plane inside, which the maximum already holds.
    const int nearest = d < 0 ? 0 : (d >= D ? D - 1 : d);
    plane_max(volume + nearest * H * W, H, W, oh, ow0, m);
#else
    if (d < 0 || d >= D) {
        for (int j = 0; j < OUTS; ++j) m[j] = -INFINITY;
        return;
    }
    plane_max(volume + d * H * W, H, W, oh, ow0, m);
#endif
}

// The outputs of thread g = blockIdx.x * blockDim.x + threadIdx.x.
__device__ __forceinline__ void pool(POOL_IN x, POOL_OUT y, int N, int C, int D, int H, int W,
                                     int OD, int OH, int OW) {
    const int tiles = (OW + OUTS - 1) / OUTS;  // tiles of OUTS outputs in an output row
    const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int ow0 = (int)(g % tiles) * OUTS;
    const int oh = (int)(g / tiles % OH);
    const long long out_plane = (long long)OH * OW;
#if OPT_WINDOW_REUSE
    // A thread per (n c, oh, tile), walking the whole depth: output plane od reads input
    // planes 2 od - 1, 2 od, 2 od + 1, and 2 od + 1 is the next one's 2 (od + 1) - 1, so
    // its maximum is carried and each step loads two planes. Walking all of D (not a
    // chunk of it) leaves no plane that two threads load at different times.
    if (g >= (long long)N * C * OH * tiles) return;
    const long long nc = g / ((long long)tiles * OH);
    POOL_IN volume = x + nc * D * H * W;
    POOL_OUT out = y + nc * OD * out_plane + (long long)oh * OW + ow0;
    float low[OUTS], mid[OUTS], high[OUTS];
#pragma unroll
    for (int j = 0; j < OUTS; ++j) low[j] = -INFINITY;  // plane -1 is padding
    for (int od = 0; od < OD; ++od) {
        // 2 od < D always (OD = (D - 1) / 2 + 1); 2 od + 1 is padding when D is odd.
        plane_max(volume + 2 * od * H * W, H, W, oh, ow0, mid);
        plane_max_or_padding(volume, 2 * od + 1, D, H, W, oh, ow0, high);
#pragma unroll
        for (int j = 0; j < OUTS; ++j) {
            mid[j] = fmaxf(fmaxf(low[j], mid[j]), high[j]);
            low[j] = high[j];
        }
        store_outputs(out + od * out_plane, OW, ow0, mid);
    }
#else
    // A thread per (n c, od, oh, tile), reading its three input planes.
    if (g >= (long long)N * C * OD * OH * tiles) return;
    const int od = (int)(g / ((long long)tiles * OH) % OD);
    const long long nc = g / ((long long)tiles * OH * OD);
    POOL_IN volume = x + nc * D * H * W;
    float best[OUTS], m[OUTS];
    for (int j = 0; j < OUTS; ++j) best[j] = -INFINITY;
    for (int kd = 0; kd < 3; ++kd) {
        plane_max_or_padding(volume, 2 * od - 1 + kd, D, H, W, oh, ow0, m);
        for (int j = 0; j < OUTS; ++j) best[j] = fmaxf(best[j], m[j]);
    }
    store_outputs(y + (nc * OD + od) * out_plane + (long long)oh * OW + ow0, OW, ow0, best);
#endif
}

extern "C" __global__ void POOL_BOUNDS maxpool3d_k3s2p1(POOL_IN x, POOL_OUT y, int N, int C,
                                                        int D, int H, int W, int OD, int OH,
                                                        int OW) {
#if OPT_VEC4
    // The same code twice, for widths that are whole float4s and for the others: each copy
    // knows the answer of load_columns' width test, so neither branches on it per plane,
    // and the loads of a step's planes can all be in flight together.
    if (W % (2 * TILE_W) == 0) {
        pool(x, y, N, C, D, H, W, OD, OH, OW);
        return;
    }
#endif
    pool(x, y, N, C, D, H, W, OD, OH, OW);
}
