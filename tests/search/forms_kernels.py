"""Kernels for the family-form tests (test_forms_lift.py, test_forms_skeletons.py), written
in the ways different people write CUDA, with the plans that launch them and small
`Task`s (numpy references) for those that are not suite tasks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from profiling.harness.spec import Task, TensorSpec, Tolerance


def plan(kernel: str, args: list[str], grid="cdiv(n, BLOCK)", block="BLOCK", block_size=128,
         zero: tuple[str, str] | None = None) -> dict:
    """A one-launch plan; with `zero` = (kernel, argument), a one-thread launch of that
    kernel on that argument first."""
    grid = grid if isinstance(grid, list) else [grid]
    block = block if isinstance(block, list) else [block]
    launches = [{"kernel": kernel, "grid": grid, "block": block, "shared_bytes": 0, "args": args}]
    if zero is not None:
        launches.insert(0, {"kernel": zero[0], "grid": [1], "block": [1], "shared_bytes": 0,
                            "args": [zero[1]]})
    return {"launches": launches, "scratch": [], "tunables": {"BLOCK": block_size}}


def task(name: str, source: str, the_plan: dict, inputs: dict[str, tuple], outputs: dict[str, tuple],
         reference, l0_sizes: list[dict[str, int]], tolerance: Tolerance | None = None) -> Task:
    """A small fp32 task; its L1 size is its largest L0 size (these run on the CPU)."""
    return Task(
        name=name, description=name, sizes=dict(l0_sizes[-1]), l0_sizes=tuple(l0_sizes),
        inputs=tuple(TensorSpec(n, "float32", shape) for n, shape in inputs.items()),
        outputs=tuple(TensorSpec(n, "float32", shape) for n, shape in outputs.items()),
        reference=reference, flops=lambda s: 0.0, bytes=lambda s: 0.0,
        naive_source=source, naive_plan=the_plan,
        tolerances={"float32": tolerance or Tolerance(atol=1e-4, rtol=1e-4)},
    )


@dataclass(frozen=True)
class Kernel:
    """A kernel as written, the plan that launches it, and the task it computes."""

    name: str  # the kernel's name in the source (the plan's)
    source: str
    plan: dict
    task: Task | None = None


def _f64(a):
    return np.asarray(a, dtype=np.float64)


# --- elementwise maps: y = leaky_relu(x) over n floats ----------------------------------------

MAP_SIZES = [{"n": 1}, {"n": 7}, {"n": 1000}, {"n": 4099}]  # n % 4 = 1, 3, 0, 3: vec4's tail


def _leaky(inputs, sizes):
    x = inputs["x"]
    return {"y": np.where(x > 0, x, np.float32(0.1) * x).astype(np.float32)}


def _map(name: str, body: str, grid="cdiv(n, BLOCK)", n="n") -> Kernel:
    """`n="i64:n"` for a kernel whose n is a 64-bit parameter (the gate checks widths)."""
    source = body.replace("KERNEL", name)
    the_plan = plan(name, ["x", "y", n], grid=grid)
    return Kernel(name, source, the_plan,
                  task(name, source, the_plan, {"x": ("n",)}, {"y": ("n",)}, _leaky, MAP_SIZES))


MAP_PLAIN = _map("leaky_plain", """extern "C" __global__ void KERNEL(const float* x, float* y, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        y[idx] = x[idx] > 0.0f ? x[idx] : 0.1f * x[idx];
    }
}
""")

MAP_REVERSED = _map("leaky_reversed", """extern "C" __global__ void KERNEL(const float* x, float* y, int n)
{
    int i = threadIdx.x + blockDim.x * blockIdx.x;
    if (i < n)
        y[i] = x[i] > 0.0f ? x[i] : 0.1f * x[i];
}
""")

MAP_CAST = _map("leaky_cast", """extern "C" __global__ void KERNEL(const float* __restrict__ x,
                                   float* __restrict__ y, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.1f * v;
    }
}
""", n="i64:n")

MAP_HELPER_LOCALS = _map("leaky_locals", """extern "C" __global__
void KERNEL(const float* x, float* y, int n) {
    int tid = threadIdx.x;
    int bid = blockIdx.x;
    int i = bid * blockDim.x + tid;
    if (i < n) {
        float v = x[i];
        y[i] = v > 0.0f ? v : 0.1f * v;
    }
}
""")

MAP_EARLY_RETURN = _map("leaky_early_return", """extern "C" __global__
void KERNEL(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    y[i] = v > 0.0f ? v : 0.1f * v;
}
""")

MAP_GRID_STRIDE = _map("leaky_grid_stride", """extern "C" __global__
void KERNEL(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = x[i] > 0.0f ? x[i] : 0.1f * x[i];
    }
}
""", grid="min(cdiv(n, BLOCK), 64)")

# renamed everything, the bound on the left, a __device__ helper for the math
MAP_RENAMED = _map("activate", """__device__ float leaky(float v) { return v > 0.0f ? v : 0.1f * v; }

extern "C" __global__ void KERNEL(const float* input, float* output, int count) {
    unsigned int gid = blockIdx.x * blockDim.x + threadIdx.x;
    if (count > gid) {
        output[gid] = leaky(input[gid]);
    }
}
""")

# the math in macros, a stride local for the grid-stride loop
MAP_MACROS = _map("leaky_macros", """#define SLOPE 0.1f
#define LEAKY(v) ((v) > 0.0f ? (v) : SLOPE * (v))

extern "C" __global__ void KERNEL(const float* x, float* y, int n) {
    int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = LEAKY(x[i]);
    }
}
""")

MAP_STYLES = [MAP_PLAIN, MAP_REVERSED, MAP_CAST, MAP_HELPER_LOCALS, MAP_EARLY_RETURN, MAP_GRID_STRIDE,
              MAP_RENAMED, MAP_MACROS]


def _saxpy(inputs, sizes):
    return {"z": (np.float32(2.5) * inputs["x"] + inputs["y"]).astype(np.float32)}


_SAXPY_SOURCE = """extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* z,
                                      int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = a * x[i] + y[i];
}
"""
_SAXPY_PLAN = plan("saxpy", ["f32:2.5", "x", "y", "z", "n"])
MAP_SAXPY = Kernel("saxpy", _SAXPY_SOURCE, _SAXPY_PLAN,
                   task("saxpy", _SAXPY_SOURCE, _SAXPY_PLAN, {"x": ("n",), "y": ("n",)}, {"z": ("n",)},
                        _saxpy, MAP_SIZES))


def _reversed(inputs, sizes):
    return {"y": inputs["x"][::-1].copy()}


_REVERSE_SOURCE = """extern "C" __global__ void reverse(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[n - 1 - i];
}
"""
_REVERSE_PLAN = plan("reverse", ["x", "y", "n"])
MAP_REVERSE = Kernel("reverse", _REVERSE_SOURCE, _REVERSE_PLAN,
                     task("reverse", _REVERSE_SOURCE, _REVERSE_PLAN, {"x": ("n",)}, {"y": ("n",)}, _reversed,
                          MAP_SIZES))

# an if with an else, y written on both sides: still direct
MAP_IF_ELSE = _map("leaky_if_else", """extern "C" __global__ void KERNEL(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        if (x[i] > 0.0f) y[i] = x[i];
        else y[i] = 0.1f * x[i];
    }
}
""")

# --- maps that write y[i] but read elsewhere (map.vec4's quads, quads.py) --------------------

BROADCAST_SIZES = [{"R": 1, "C": 1}, {"R": 3, "C": 5}, {"R": 7, "C": 12}, {"R": 5, "C": 33}]


def _bias_add(inputs, sizes):
    return {"y": (inputs["x"] + inputs["b"][None, :]).astype(np.float32)}


# a bias broadcast along rows, its column worked out with %
_BIAS_SOURCE = """extern "C" __global__ void bias_add(const float* x, const float* b, float* y,
                                         int R, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < R * C) {
        int c = i % C;
        y[i] = x[i] + b[c];
    }
}
"""
_BIAS_PLAN = plan("bias_add", ["x", "b", "y", "R", "C"], grid="cdiv(R * C, BLOCK)")
MAP_BIAS = Kernel("bias_add", _BIAS_SOURCE, _BIAS_PLAN,
                  task("bias_add", _BIAS_SOURCE, _BIAS_PLAN, {"x": ("R", "C"), "b": ("C",)},
                       {"y": ("R", "C")}, _bias_add, BROADCAST_SIZES))


def _gated(inputs, sizes):
    x = inputs["x"]
    half = sizes["C"]
    return {"y": (x[:, :half] * np.maximum(x[:, half:], np.float32(0.0))).astype(np.float32)}


# a row's two halves, each read at the element's own column: neither read is the flat index
_HALVES_SOURCE = """extern "C" __global__ void gated(const float* x, float* y, int R, int C) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= R * C) return;
    int r = t / C;
    int c = t - r * C;
    float g = x[r * 2 * C + C + c];
    y[t] = x[r * 2 * C + c] * (g > 0.0f ? g : 0.0f);
}
"""
_HALVES_PLAN = plan("gated", ["x", "y", "R", "C"], grid="cdiv(R * C, BLOCK)")
MAP_HALVES = Kernel("gated", _HALVES_SOURCE, _HALVES_PLAN,
                    task("gated", _HALVES_SOURCE, _HALVES_PLAN, {"x": ("R", "2 * C")}, {"y": ("R", "C")},
                         _gated, BROADCAST_SIZES))


def _upsampled(inputs, sizes):
    return {"y": inputs["x"].repeat(2, axis=1).repeat(2, axis=2)}


# a 3-D grid (columns, rows, planes), each output reading the input value it copies
_UPSAMPLE_SOURCE = """extern "C" __global__ void upsample(const float* x, float* y, int P, int H, int W) {
    int ox = blockIdx.x * blockDim.x + threadIdx.x;
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    int p = blockIdx.z;
    if (ox < 2 * W && oy < 2 * H) {
        y[(p * 2 * H + oy) * 2 * W + ox] = x[(p * H + oy / 2) * W + ox / 2];
    }
}
"""
_UPSAMPLE_PLAN = plan("upsample", ["x", "y", "P", "H", "W"], grid=["cdiv(2 * W, 16)", "cdiv(2 * H, 16)", "P"],
                      block=[16, 16])
MAP_UPSAMPLE = Kernel("upsample", _UPSAMPLE_SOURCE, _UPSAMPLE_PLAN,
                      task("upsample", _UPSAMPLE_SOURCE, _UPSAMPLE_PLAN, {"x": ("P", "H", "W")},
                           {"y": ("P", "2 * H", "2 * W")}, _upsampled,
                           [{"P": 1, "H": 1, "W": 1}, {"P": 2, "H": 3, "W": 5}, {"P": 3, "H": 2, "W": 9}]))

# y written at another element than the thread's own: no quad of y is the thread's
_SCATTER_SOURCE = """extern "C" __global__ void scatter_reverse(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[n - 1 - i] = x[i];
}
"""
_SCATTER_PLAN = plan("scatter_reverse", ["x", "y", "n"])
MAP_SCATTER = Kernel("scatter_reverse", _SCATTER_SOURCE, _SCATTER_PLAN,
                     task("scatter_reverse", _SCATTER_SOURCE, _SCATTER_PLAN, {"x": ("n",)}, {"y": ("n",)},
                          lambda inputs, sizes: {"y": inputs["x"][::-1].copy()}, MAP_SIZES))

# --- 2-D maps ---------------------------------------------------------------------------------

GRID_2D = ["cdiv(W, 16)", "cdiv(H, 16)"]
SIZES_2D = [{"H": 1, "W": 1}, {"H": 3, "W": 37}, {"H": 17, "W": 5}, {"H": 9, "W": 130}]


def _scale_2d(inputs, sizes):
    return {"y": (inputs["x"] * np.float32(3.0) - np.float32(1.0)).astype(np.float32)}


_SCALE_2D_SOURCE = """extern "C" __global__ void scale2d(const float* x, float* y, int H, int W) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < H && col < W) {
        y[row * W + col] = 3.0f * x[row * W + col] - 1.0f;
    }
}
"""
_SCALE_2D_PLAN = plan("scale2d", ["x", "y", "H", "W"], grid=GRID_2D, block=[16, 16])
MAP_2D = Kernel("scale2d", _SCALE_2D_SOURCE, _SCALE_2D_PLAN,
                task("scale2d", _SCALE_2D_SOURCE, _SCALE_2D_PLAN, {"x": ("H", "W")}, {"y": ("H", "W")},
                     _scale_2d, SIZES_2D))

# the column read as a number: the element is not a function of the flat index alone
_RAMP_2D_SOURCE = _SCALE_2D_SOURCE.replace("scale2d", "ramp2d").replace("- 1.0f", "- (float)col")
_RAMP_2D_PLAN = plan("ramp2d", ["x", "y", "H", "W"], grid=GRID_2D, block=[16, 16])


def _ramp_2d(inputs, sizes):
    column = np.arange(sizes["W"], dtype=np.float32)[None, :]
    return {"y": (inputs["x"] * np.float32(3.0) - column).astype(np.float32)}


MAP_2D_RAMP = Kernel("ramp2d", _RAMP_2D_SOURCE, _RAMP_2D_PLAN,
                     task("ramp2d", _RAMP_2D_SOURCE, _RAMP_2D_PLAN, {"x": ("H", "W")}, {"y": ("H", "W")},
                          _ramp_2d, SIZES_2D))


def _transposed(inputs, sizes):
    return {"y": inputs["x"].T.copy()}


# early return with ||, renamed, the y axis first: a transpose (a permutation, read as a map)
_TRANSPOSE_SOURCE = """extern "C" __global__ void transpose(const float* src, float* dst,
                                          int rows, int cols) {
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    const int c = threadIdx.x + blockIdx.x * blockDim.x;
    if (r >= rows || c >= cols) return;
    dst[c * rows + r] = src[r * cols + c];
}
"""
_TRANSPOSE_PLAN = plan("transpose", ["x", "y", "H", "W"], grid=GRID_2D, block=[16, 16])
MAP_TRANSPOSE = Kernel("transpose", _TRANSPOSE_SOURCE, _TRANSPOSE_PLAN,
                       task("transpose", _TRANSPOSE_SOURCE, _TRANSPOSE_PLAN, {"x": ("H", "W")},
                            {"y": ("W", "H")}, _transposed, SIZES_2D))

# one flat index read as (row, column) before the bounds check, which bounds the row
_TRANSPOSE_FLAT_SOURCE = """extern "C" __global__ void transpose_flat(const float* x, float* y,
                                               int H, int W) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int r = i / W;
    int c = i % W;
    if (r < H) {
        y[c * H + r] = x[i];
    }
}
"""
_TRANSPOSE_FLAT_PLAN = plan("transpose_flat", ["x", "y", "H", "W"], grid="cdiv(H * W, BLOCK)")
MAP_TRANSPOSE_FLAT = Kernel("transpose_flat", _TRANSPOSE_FLAT_SOURCE, _TRANSPOSE_FLAT_PLAN,
                            task("transpose_flat", _TRANSPOSE_FLAT_SOURCE, _TRANSPOSE_FLAT_PLAN,
                                 {"x": ("H", "W")}, {"y": ("W", "H")}, _transposed, SIZES_2D))

# a batch of transposes on a 3-D grid, the threads' x along the rows (the reads scattered)
_BATCHED_TRANSPOSE_SOURCE = """extern "C" __global__ void batched_transpose(const float* x, float* y,
                                                  int B, int H, int W) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    int c = blockIdx.y * blockDim.y + threadIdx.y;
    int b = blockIdx.z;
    if (r < H && c < W) {
        y[(b * W + c) * H + r] = 2.0f * x[(b * H + r) * W + c];
    }
}
"""
_BATCHED_TRANSPOSE_PLAN = plan("batched_transpose", ["x", "y", "B", "H", "W"],
                               grid=["cdiv(H, 16)", "cdiv(W, 16)", "B"], block=[16, 16])
SIZES_3D = [{"B": 1, "H": 1, "W": 1}, {"B": 2, "H": 3, "W": 37}, {"B": 3, "H": 33, "W": 5},
            {"B": 2, "H": 40, "W": 70}]


def _batched_transposed(inputs, sizes):
    return {"y": (np.float32(2.0) * inputs["x"]).transpose(0, 2, 1).copy()}


PERMUTE_BATCHED = Kernel("batched_transpose", _BATCHED_TRANSPOSE_SOURCE, _BATCHED_TRANSPOSE_PLAN,
                         task("batched_transpose", _BATCHED_TRANSPOSE_SOURCE, _BATCHED_TRANSPOSE_PLAN,
                              {"x": ("B", "H", "W")}, {"y": ("B", "W", "H")}, _batched_transposed, SIZES_3D))

# NCHW -> NHWC plus a per-channel bias, one flat index peeled through a local
_NHWC_SOURCE = """extern "C" __global__ void to_nhwc(const float* x, const float* bias, float* out,
                                       int N, int C, int H, int W) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * C * H * W) return;
    int w = i % W;
    int rest = i / W;
    int h = rest % H;
    int c = (rest / H) % C;
    int n = i / (W * H * C);
    int o = ((n * H + h) * W + w) * C + c;
    out[o] = x[i] + bias[c];
}
"""
_NHWC_PLAN = plan("to_nhwc", ["x", "bias", "y", "N", "C", "H", "W"], grid="cdiv(N * C * H * W, BLOCK)")
SIZES_4D = [{"N": 1, "C": 1, "H": 1, "W": 1}, {"N": 2, "C": 3, "H": 5, "W": 7},
            {"N": 1, "C": 35, "H": 2, "W": 33}, {"N": 2, "C": 40, "H": 3, "W": 36}]


def _to_nhwc(inputs, sizes):
    return {"y": (inputs["x"] + inputs["bias"][None, :, None, None]).transpose(0, 2, 3, 1).copy()}


PERMUTE_NHWC = Kernel("to_nhwc", _NHWC_SOURCE, _NHWC_PLAN,
                      task("to_nhwc", _NHWC_SOURCE, _NHWC_PLAN, {"x": ("N", "C", "H", "W"), "bias": ("C",)},
                           {"y": ("N", "H", "W", "C")}, _to_nhwc, SIZES_4D))
# the same batch of transposes through pointer offsets of each matrix, the threads' x
# along the columns
_BATCHED_OFFSETS_SOURCE = """extern "C" __global__ void batched_offsets(const float* x, float* y,
                                                int B, int H, int W) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int b = blockIdx.z;
    if (r < H && c < W) {
        const float* src = x + b * H * W;
        float* dst = y + b * W * H;
        dst[c * H + r] = 2.0f * src[r * W + c];
    }
}
"""
_BATCHED_OFFSETS_PLAN = plan("batched_offsets", ["x", "y", "B", "H", "W"],
                             grid=["cdiv(W, 16)", "cdiv(H, 16)", "B"], block=[16, 16])
PERMUTE_OFFSETS = Kernel("batched_offsets", _BATCHED_OFFSETS_SOURCE, _BATCHED_OFFSETS_PLAN,
                         task("batched_offsets", _BATCHED_OFFSETS_SOURCE, _BATCHED_OFFSETS_PLAN,
                              {"x": ("B", "H", "W")}, {"y": ("B", "W", "H")}, _batched_transposed, SIZES_3D))
PERMUTATIONS = [MAP_TRANSPOSE, MAP_TRANSPOSE_FLAT, PERMUTE_BATCHED, PERMUTE_NHWC, PERMUTE_OFFSETS]

# --- row map-reduce ---------------------------------------------------------------------------
# The softmax-like kernels compute the suite's softmax (x, y, M, N): its task is reused.

ROW_GRID = "cdiv(M, BLOCK)"
SOFTMAX_ARGS = ["x", "y", "M", "N"]

SOFTMAX_POINTERS = Kernel("softmax_pointers", """extern "C" __global__
void softmax_pointers(const float* x, float* y, int M, int N) {
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const float* in = x + row * N;
    float* out = y + row * N;
    float m = -INFINITY;
    for (int j = 0; j < N; ++j) {
        m = fmaxf(m, in[j]);
    }
    float s = 0.0f;
    for (int j = 0; j < N; j++) {
        s += expf(in[j] - m);
    }
    for (int j = 0; j < N; j += 1) {
        out[j] = expf(in[j] - m) / s;
    }
}
""", plan("softmax_pointers", SOFTMAX_ARGS, grid=ROW_GRID))

# inline indexing, `if (v > m) m = v;` and `s = s + e`
SOFTMAX_INLINE = Kernel("softmax_inline", """extern "C" __global__
void softmax_inline(const float* x, float* y, int M, int N) {
    int row = threadIdx.x + blockIdx.x * blockDim.x;
    if (row < M) {
        float best = x[row * N];
        for (int j = 0; j < N; j++) {
            float v = x[row * N + j];
            if (v > best) best = v;
        }
        float total = 0.0f;
        for (int j = 0; j < N; j++) {
            total = total + __expf(x[row * N + j] - best);
        }
        float inv = 1.0f / total;
        for (int j = 0; j < N; j++)
            y[row * N + j] = __expf(x[row * N + j] - best) * inv;
    }
}
""", plan("softmax_inline", SOFTMAX_ARGS, grid=ROW_GRID))

# while loops, `if (m < v) m = v;` the other way round
SOFTMAX_WHILE = Kernel("softmax_while", """extern "C" __global__
void softmax_while(const float* x, float* y, int M, int N) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) {
        return;
    }
    const float* in = x + (long long)row * N;
    float mx = -INFINITY;
    int j = 0;
    while (j < N) {
        const float v = in[j];
        if (mx < v) mx = v;
        ++j;
    }
    float sum = 0.0f;
    int k = 0;
    while (k < N) {
        sum += expf(in[k] - mx);
        k++;
    }
    int c = 0;
    while (c < N) {
        y[(long long)row * N + c] = expf(in[c] - mx) / sum;
        c += 1;
    }
}
""", plan("softmax_while", SOFTMAX_ARGS, grid=ROW_GRID))

SOFTMAX_STYLES = [SOFTMAX_POINTERS, SOFTMAX_INLINE, SOFTMAX_WHILE]

ROW_SIZES = [{"M": 1, "N": 1}, {"M": 1, "N": 300}, {"M": 5, "N": 33}, {"M": 3, "N": 1001}]
SUM_TOLERANCE = Tolerance(atol=1e-3, rtol=1e-3)


def _rmsnorm(inputs, sizes):
    x = _f64(inputs["x"])
    rms = np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5)
    return {"y": (x / rms * _f64(inputs["w"])).astype(np.float32)}


# a while loop whose accumulator is `ss = ss + v * v`, then a for loop that writes
_RMSNORM_SOURCE = """extern "C" __global__ void rmsnorm(const float* x, const float* w, float* y,
                                        int M, int N, float eps) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float ss = 0.0f;
    int j = 0;
    while (j < N) {
        float v = x[row * N + j];
        ss = ss + v * v;
        j++;
    }
    float r = rsqrtf(ss / N + eps);
    for (int k = 0; k < N; k++) {
        y[row * N + k] = x[row * N + k] * r * w[k];
    }
}
"""
_RMSNORM_PLAN = plan("rmsnorm", ["x", "w", "y", "M", "N", "f32:1e-5"], grid=ROW_GRID)
RMSNORM = Kernel("rmsnorm", _RMSNORM_SOURCE, _RMSNORM_PLAN,
                 task("rmsnorm", _RMSNORM_SOURCE, _RMSNORM_PLAN, {"x": ("M", "N"), "w": ("N",)},
                      {"y": ("M", "N")}, _rmsnorm, ROW_SIZES, SUM_TOLERANCE))


def _row_prod(inputs, sizes):
    return {"y": np.prod(1.0 + 1e-3 * _f64(inputs["x"]), axis=1).astype(np.float32)}


# a product reduction, `p *= e`
_ROW_PROD_SOURCE = """extern "C" __global__ void row_prod(const float* x, float* y, int M, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M) {
        float p = 1.0f;
        for (int j = 0; j < N; j++) p *= 1.0f + 0.001f * x[i * N + j];
        y[i] = p;
    }
}
"""
_ROW_PROD_PLAN = plan("row_prod", ["x", "y", "M", "N"], grid=ROW_GRID)
ROW_PROD = Kernel("row_prod", _ROW_PROD_SOURCE, _ROW_PROD_PLAN,
                  task("row_prod", _ROW_PROD_SOURCE, _ROW_PROD_PLAN, {"x": ("M", "N")}, {"y": ("M",)},
                       _row_prod, ROW_SIZES, SUM_TOLERANCE))


def _row_mean(inputs, sizes):
    return {"y": _f64(inputs["x"]).mean(axis=1).astype(np.float32)}


# the row's length a #define, not a parameter (the task's N is always 1000)
_ROW_DEFINED_SOURCE = """#define WIDTH 1000
#define AT(r, c) ((r) * WIDTH + (c))
extern "C" __global__ void row_defined(const float* x, float* y, int M) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < M) {
        float s = 0.0f;
        for (int c = 0; c < WIDTH; c++) s += x[AT(r, c)];
        y[r] = s / WIDTH;
    }
}
"""
_ROW_DEFINED_PLAN = plan("row_defined", ["x", "y", "M"], grid=ROW_GRID)
ROW_DEFINED = Kernel("row_defined", _ROW_DEFINED_SOURCE, _ROW_DEFINED_PLAN,
                     task("row_defined", _ROW_DEFINED_SOURCE, _ROW_DEFINED_PLAN, {"x": ("M", "N")},
                          {"y": ("M",)}, _row_mean, [{"M": 1, "N": 1000}, {"M": 7, "N": 1000}],
                          SUM_TOLERANCE))


def _masked_mean(inputs, sizes):
    x, keep = _f64(inputs["x"]), _f64(inputs["mask"]) > 0.0
    count = keep.sum(axis=1)
    total = np.where(keep, x, 0.0).sum(axis=1)
    return {"y": np.where(count > 0, total / np.maximum(count, 1), 0.0).astype(np.float32)}


# two sums under one test: the elements the test skips add nothing
_MASKED_MEAN_SOURCE = """extern "C" __global__
void masked_mean(const float* x, const float* mask, float* y, int M, int N) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < M) {
        float s = 0.0f;
        float count = 0.0f;
        for (int j = 0; j < N; j++) {
            if (mask[r * N + j] > 0.0f) {
                s += x[r * N + j];
                count += 1.0f;
            }
        }
        y[r] = count > 0.0f ? s / count : 0.0f;
    }
}
"""
_MASKED_MEAN_PLAN = plan("masked_mean", ["x", "mask", "y", "M", "N"], grid=ROW_GRID)
MASKED_MEAN = Kernel("masked_mean", _MASKED_MEAN_SOURCE, _MASKED_MEAN_PLAN,
                     task("masked_mean", _MASKED_MEAN_SOURCE, _MASKED_MEAN_PLAN,
                          {"x": ("M", "N"), "mask": ("M", "N")}, {"y": ("M",)}, _masked_mean, ROW_SIZES,
                          SUM_TOLERANCE))


def _head_sumsq(inputs, sizes):
    x = _f64(inputs["x"])
    return {"y": (x * x).sum(axis=2).astype(np.float32)}


# a row per (batch, head): the batch from the grid's y dimension, the head from x
_HEAD_SUMSQ_SOURCE = """extern "C" __global__
void head_sumsq(const float* x, float* y, int B, int H, int D) {
    int b = blockIdx.y;
    int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h < H) {
        float acc = 0.0f;
        for (int d = 0; d < D; ++d) acc += x[(b * H + h) * D + d] * x[(b * H + h) * D + d];
        y[b * H + h] = acc;
    }
}
"""
_HEAD_SUMSQ_PLAN = plan("head_sumsq", ["x", "y", "B", "H", "D"], grid=["cdiv(H, BLOCK)", "B"])
HEAD_SUMSQ = Kernel("head_sumsq", _HEAD_SUMSQ_SOURCE, _HEAD_SUMSQ_PLAN,
                    task("head_sumsq", _HEAD_SUMSQ_SOURCE, _HEAD_SUMSQ_PLAN, {"x": ("B", "H", "D")},
                         {"y": ("B", "H")}, _head_sumsq,
                         [{"B": 1, "H": 1, "D": 1}, {"B": 3, "H": 5, "D": 33}, {"B": 2, "H": 3, "D": 1001}],
                         SUM_TOLERANCE))


def _row_range(inputs, sizes):
    x = inputs["x"]
    return {"lo": x.min(axis=1), "hi": x.max(axis=1)}


# min and max in one loop, fminf and the if-form; one writing statement after it
_RANGE_SOURCE = """extern "C" __global__ void row_range(const float* x, float* lo, float* hi, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float a = INFINITY, b = -INFINITY;
        for (int j = 0; j < N; ++j) {
            float v = x[row * N + j];
            a = fminf(a, v);
            if (v > b) b = v;
        }
        lo[row] = a;
        hi[row] = b;
    }
}
"""
_RANGE_PLAN = plan("row_range", ["x", "lo", "hi", "M", "N"], grid=ROW_GRID)
ROW_RANGE = Kernel("row_range", _RANGE_SOURCE, _RANGE_PLAN,
                   task("row_range", _RANGE_SOURCE, _RANGE_PLAN, {"x": ("M", "N")},
                        {"lo": ("M",), "hi": ("M",)}, _row_range, ROW_SIZES))


def _row_max(inputs, sizes):
    return {"y": inputs["x"].max(axis=1)}


# a max that starts from the row's first element, its loop from 1 (the usual way)
_ROW_MAX_SOURCE = """extern "C" __global__ void row_max(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float m = x[row * N];
        for (int j = 1; j < N; j++) {
            if (x[row * N + j] > m) m = x[row * N + j];
        }
        y[row] = m;
    }
}
"""
_ROW_MAX_PLAN = plan("row_max", ["x", "y", "M", "N"], grid=ROW_GRID)
ROW_MAX_FROM_ONE = Kernel("row_max", _ROW_MAX_SOURCE, _ROW_MAX_PLAN,
                          task("row_max", _ROW_MAX_SOURCE, _ROW_MAX_PLAN, {"x": ("M", "N")}, {"y": ("M",)},
                               _row_max, ROW_SIZES))


def _row_argmax(inputs, sizes):
    return {"y": inputs["x"].argmax(axis=1).astype(np.float32)}  # numpy: the first on ties


def _row_argmin_last(inputs, sizes):
    x = inputs["x"][:, ::-1]
    return {"y": (x.shape[1] - 1 - x.argmin(axis=1)).astype(np.float32)}


# argmax from element 0, loop from 1, strict test: the first index of the maximum
_ARGMAX_SOURCE = """extern "C" __global__ void row_argmax(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float best = x[row * N];
        int arg = 0;
        for (int j = 1; j < N; ++j) {
            if (x[row * N + j] > best) {
                best = x[row * N + j];
                arg = j;
            }
        }
        y[row] = (float)arg;
    }
}
"""
# argmin written the other way round (best >= v), the index set first: the last minimum
_ARGMIN_SOURCE = """extern "C" __global__ void row_argmin(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float lo = INFINITY;
    long long at = -1;
    for (int j = 0; j < N; j++) {
        float v = x[row * N + j];
        if (lo >= v) { at = j; lo = v; }
    }
    y[row] = (float)at;
}
"""
_ARGMAX_PLAN = plan("row_argmax", ["x", "y", "M", "N"], grid=ROW_GRID)
_ARGMIN_PLAN = plan("row_argmin", ["x", "y", "M", "N"], grid=ROW_GRID)
# values from a few levels, so that ties are common
ARG_SIZES = [{"M": 1, "N": 1}, {"M": 3, "N": 2}, {"M": 5, "N": 33}, {"M": 4, "N": 1001}]
ROW_ARGMAX = Kernel("row_argmax", _ARGMAX_SOURCE, _ARGMAX_PLAN,
                    task("row_argmax", _ARGMAX_SOURCE, _ARGMAX_PLAN, {"x": ("M", "N")}, {"y": ("M",)},
                         _row_argmax, ARG_SIZES, Tolerance(atol=0.0, rtol=0.0)))
ROW_ARGMIN_LAST = Kernel("row_argmin", _ARGMIN_SOURCE, _ARGMIN_PLAN,
                         task("row_argmin", _ARGMIN_SOURCE, _ARGMIN_PLAN, {"x": ("M", "N")}, {"y": ("M",)},
                              _row_argmin_last, ARG_SIZES, Tolerance(atol=0.0, rtol=0.0)))


def _groupnorm(inputs, sizes):
    x = _f64(inputs["x"])
    mean = x.mean(axis=(1, 2), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    return {"y": ((x - mean) / np.sqrt(var + 1e-5)).astype(np.float32)}


# GroupNorm-like: a row is a group of C channels x HW pixels, perfect nests for c, for hw
_GROUPNORM_SOURCE = """extern "C" __global__ void groupnorm(const float* x, float* y, int G, int C, int HW) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= G) return;
    const float* in = x + (long long)g * C * HW;
    float* out = y + (long long)g * C * HW;
    float s = 0.0f;
    for (int c = 0; c < C; ++c)
        for (int p = 0; p < HW; ++p)
            s += in[c * HW + p];
    float mean = s / (C * HW);
    float q = 0.0f;
    for (int c = 0; c < C; ++c) {
        for (int p = 0; p < HW; ++p) {
            float d = in[c * HW + p] - mean;
            q += d * d;
        }
    }
    float rstd = rsqrtf(q / (C * HW) + 1e-5f);
    for (int c = 0; c < C; ++c) {
        for (int p = 0; p < HW; ++p) {
            out[c * HW + p] = (in[c * HW + p] - mean) * rstd;
        }
    }
}
"""
_GROUPNORM_PLAN = plan("groupnorm", ["x", "y", "G", "C", "HW"], grid="cdiv(G, BLOCK)")
GROUPNORM = Kernel("groupnorm", _GROUPNORM_SOURCE, _GROUPNORM_PLAN,
                   task("groupnorm", _GROUPNORM_SOURCE, _GROUPNORM_PLAN, {"x": ("G", "C", "HW")},
                        {"y": ("G", "C", "HW")}, _groupnorm,
                        [{"G": 1, "C": 1, "HW": 1}, {"G": 1, "C": 3, "HW": 7}, {"G": 4, "C": 5, "HW": 61},
                         {"G": 3, "C": 2, "HW": 33}],
                        SUM_TOLERANCE))


def _gemv(inputs, sizes):
    return {"y": (_f64(inputs["A"]) @ _f64(inputs["x"])).astype(np.float32)}


_GEMV_SOURCE = """extern "C" __global__ void gemv(const float* A, const float* x, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) sum += A[row * K + k] * x[k];
        y[row] = sum;
    }
}
"""
_GEMV_PLAN = plan("gemv", ["A", "x", "y", "M", "K"], grid=ROW_GRID)
GEMV = Kernel("gemv", _GEMV_SOURCE, _GEMV_PLAN,
              task("gemv", _GEMV_SOURCE, _GEMV_PLAN, {"A": ("M", "K"), "x": ("K",)}, {"y": ("M",)}, _gemv,
                   [{"M": 1, "K": 1}, {"M": 7, "K": 33}, {"M": 2, "K": 1001}, {"M": 9, "K": 100}],
                   SUM_TOLERANCE))

# --- full reduction: sum of squares into out[0], zeroed by a launch before ------------------

FULL_SIZES = [{"n": 1}, {"n": 7}, {"n": 1000}, {"n": 4099}]


def _sumsq(inputs, sizes):
    x = _f64(inputs["x"])
    return {"out": np.array([(x * x).sum()], dtype=np.float32)}


def _full(name: str, source: str, grid="cdiv(n, BLOCK)", n="n") -> Kernel:
    the_plan = plan(name, ["x", "out", n], grid=grid, zero=("zero_total", "out"))
    return Kernel(name, source, the_plan,
                  task(name, source, the_plan, {"x": ("n",)}, {"out": (1,)}, _sumsq, FULL_SIZES,
                       Tolerance(atol=1e-3, rtol=1e-4)))


SUMSQ = _full("sumsq", """extern "C" __global__ void zero_total(float* out) {
    out[0] = 0.0f;
}

extern "C" __global__ void sumsq(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float d = x[i];
        atomicAdd(out, d * d);
    }
}
""")

SUMSQ_EARLY_RETURN = _full("sumsq_early", """extern "C" __global__ void zero_total(float* total) {
    *total = 0.0f;
}

extern "C" __global__ void sumsq_early(const float* x, float* total, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(&total[0], x[i] * x[i]);
}
""", n="i64:n")

# a grid-stride loop summing into a thread's partial, one atomicAdd of it after the loop
SUMSQ_PARTIAL = _full("sumsq_partial", """extern "C" __global__ void zero_total(float* out) { out[0] = 0.0f; }

extern "C" __global__ void sumsq_partial(const float* x, float* out, int n) {
    float partial = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float v = x[i];
        partial += v * v;
    }
    atomicAdd(out, partial);
}
""", grid="min(cdiv(n, BLOCK), 8)")



def _hinge_sum(inputs, sizes):
    x = _f64(inputs["x"])
    return {"out": np.array([np.maximum(1.0 - x * x, 0.0).sum()], dtype=np.float32)}


# the atomic under a test of the term (a hinge): a term that is 0 where the test fails
HINGE_GUARDED = _full("hinge_guarded", """extern "C" __global__ void zero_total(float* out) { out[0] = 0.0f; }

extern "C" __global__ void hinge_guarded(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float margin = 1.0f - x[i] * x[i];
        if (margin > 0.0f) {
            atomicAdd(out, margin);
        }
    }
}
""")
HINGE_GUARDED = Kernel(HINGE_GUARDED.name, HINGE_GUARDED.source, HINGE_GUARDED.plan,
                       task("hinge_guarded", HINGE_GUARDED.source, HINGE_GUARDED.plan, {"x": ("n",)},
                            {"out": (1,)}, _hinge_sum, FULL_SIZES, Tolerance(atol=1e-3, rtol=1e-4)))

# a grid-stride loop from a local holding the thread's index, stepping by a local stride
SUMSQ_FROM_TID = _full("sumsq_from_tid", """extern "C" __global__ void zero_total(float* out) {
    out[0] = 0.0f;
}

extern "C" __global__ void sumsq_from_tid(const float* x, float* out, int n) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;
    float local = 0.0f;
    for (int i = tid; i < n; i += stride) local += x[i] * x[i];
    atomicAdd(out, local);
}
""", grid="min(cdiv(n, BLOCK), 8)")

FULL_STYLES = [SUMSQ, SUMSQ_EARLY_RETURN, SUMSQ_PARTIAL, SUMSQ_FROM_TID, HINGE_GUARDED]


# --- strided rows: reductions across columns (rows.split_strided) ---------------------------

def _column_stats(inputs, sizes):
    x = _f64(inputs["x"])
    return {"mean": x.mean(axis=0).astype(np.float32), "std": x.std(axis=0).astype(np.float32)}


# one thread per column, two loops down the column (its mean, then the squared distances):
# the admission task's own naive kernel
_COLUMN_STATS_SOURCE = (Path(__file__).resolve().parents[2] / "bench" / "admission_tasks" / "naive" /
                        "column_stats.cu").read_text()
_COLUMN_STATS_PLAN = plan("column_stats", ["x", "mean", "std", "N", "D"], grid="cdiv(D, BLOCK)")
COLUMN_SIZES = [{"N": 1, "D": 1}, {"N": 7, "D": 33}, {"N": 1001, "D": 3}, {"N": 70, "D": 65}]
COLUMN_STATS = Kernel("column_stats", _COLUMN_STATS_SOURCE, _COLUMN_STATS_PLAN,
                      task("column_stats", _COLUMN_STATS_SOURCE, _COLUMN_STATS_PLAN, {"x": ("N", "D")},
                           {"mean": ("D",), "std": ("D",)}, _column_stats, COLUMN_SIZES, SUM_TOLERANCE))


def _sum_dim1(inputs, sizes):
    return {"y": _f64(inputs["x"]).sum(axis=1).astype(np.float32)}


# a sum over the middle dimension of (B, D1, D2), the output's flat index split by hand
_SUM_DIM1_SOURCE = """extern "C" __global__ void sum_dim1(const float *x, float *y, int B, int D1, int D2)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * D2) return;
    int b = idx / D2;
    int j = idx % D2;
    float acc = 0;
    int i = 0;
    while (i < D1) {
        acc += x[b * D1 * D2 + i * D2 + j];
        i++;
    }
    y[idx] = acc;
}
"""
_SUM_DIM1_PLAN = plan("sum_dim1", ["x", "y", "B", "D1", "D2"], grid="cdiv(B * D2, BLOCK)")
SUM_DIM1 = Kernel("sum_dim1", _SUM_DIM1_SOURCE, _SUM_DIM1_PLAN,
                  task("sum_dim1", _SUM_DIM1_SOURCE, _SUM_DIM1_PLAN, {"x": ("B", "D1", "D2")},
                       {"y": ("B", "D2")},
                       _sum_dim1, [{"B": 1, "D1": 1, "D2": 1}, {"B": 2, "D1": 9, "D2": 40},
                                   {"B": 3, "D1": 257, "D2": 5}], SUM_TOLERANCE))


def _column_argmax(inputs, sizes):
    return {"y": inputs["x"].argmax(axis=0).astype(np.float32)}  # numpy: the first on ties


# argmax down each column from row 0, strict test: the first index of the maximum
_COLUMN_ARGMAX_SOURCE = """extern "C" __global__ void column_argmax(const float* x, float* y, int N, int D) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < D) {
        float best = -INFINITY;
        int where = 0;
        for (int r = 0; r < N; r++) {
            if (x[r * D + c] > best) { best = x[r * D + c]; where = r; }
        }
        y[c] = (float)where;
    }
}
"""
_COLUMN_ARGMAX_PLAN = plan("column_argmax", ["x", "y", "N", "D"], grid="cdiv(D, BLOCK)")
COLUMN_ARGMAX = Kernel("column_argmax", _COLUMN_ARGMAX_SOURCE, _COLUMN_ARGMAX_PLAN,
                       task("column_argmax", _COLUMN_ARGMAX_SOURCE, _COLUMN_ARGMAX_PLAN, {"x": ("N", "D")},
                            {"y": ("D",)}, _column_argmax,
                            [{"N": 1, "D": 1}, {"N": 2, "D": 3}, {"N": 33, "D": 5}, {"N": 1001, "D": 4}],
                            Tolerance(atol=0.0, rtol=0.0)))


def _mean_dim1(inputs, sizes):
    return {"y": _f64(inputs["x"]).mean(axis=1).astype(np.float32)}


# the batch from the grid's y dimension, the column from x: rows over a 2-D grid
_MEAN_DIM1_SOURCE = """extern "C" __global__
void mean_dim1(const float* x, float* y, int B, int D1, int D2) {
    int b = blockIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < D2) {
        float s = 0;
        for (int i = 0; i < D1; i++) s += x[(b * D1 + i) * D2 + j];
        y[b * D2 + j] = s / D1;
    }
}
"""
_MEAN_DIM1_PLAN = plan("mean_dim1", ["x", "y", "B", "D1", "D2"], grid=["cdiv(D2, BLOCK)", "B"])
MEAN_DIM1 = Kernel("mean_dim1", _MEAN_DIM1_SOURCE, _MEAN_DIM1_PLAN,
                   task("mean_dim1", _MEAN_DIM1_SOURCE, _MEAN_DIM1_PLAN, {"x": ("B", "D1", "D2")},
                        {"y": ("B", "D2")}, _mean_dim1,
                        [{"B": 1, "D1": 1, "D2": 1}, {"B": 2, "D1": 9, "D2": 40},
                         {"B": 3, "D1": 257, "D2": 5}], SUM_TOLERANCE))


def _argmin_dim1_last(inputs, sizes):
    x = inputs["x"][:, ::-1, :]
    return {"y": (x.shape[1] - 1 - x.argmin(axis=1)).astype(np.float32)}


# two index variables in one declaration; `<=`: the last index of the minimum
_ARGMIN_DIM1_SOURCE = """extern "C" __global__
void argmin_dim1(const float* x, float* y, int B, int D1, int D2) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < B * D2) {
        int b = idx / D2, j = idx % D2;
        float m = INFINITY;
        int a = -1;
        for (int i = 0; i < D1; i++) {
            float v = x[b * D1 * D2 + i * D2 + j];
            if (v <= m) { m = v; a = i; }
        }
        y[idx] = (float)a;
    }
}
"""
_ARGMIN_DIM1_PLAN = plan("argmin_dim1", ["x", "y", "B", "D1", "D2"], grid="cdiv(B * D2, BLOCK)")
ARGMIN_DIM1 = Kernel("argmin_dim1", _ARGMIN_DIM1_SOURCE, _ARGMIN_DIM1_PLAN,
                     task("argmin_dim1", _ARGMIN_DIM1_SOURCE, _ARGMIN_DIM1_PLAN, {"x": ("B", "D1", "D2")},
                          {"y": ("B", "D2")}, _argmin_dim1_last,
                          [{"B": 1, "D1": 1, "D2": 1}, {"B": 2, "D1": 3, "D2": 2},
                           {"B": 3, "D1": 70, "D2": 5}], Tolerance(atol=0.0, rtol=0.0)))
COLUMN_KERNELS = [COLUMN_STATS, SUM_DIM1, COLUMN_ARGMAX, MEAN_DIM1, ARGMIN_DIM1]
