"""Scans written as newcomers write them (a thread per row walking it), for
test_forms_scans.py: a running value in a local or in memory, inclusive or exclusive,
forward or from the row's end, under a mask, with the row's total written after; and
kernels that look like scans but are not, each with the reason the lift must give."""

from __future__ import annotations

import numpy as np
from forms_kernels import ROW_GRID, SUM_TOLERANCE, Kernel, plan, task

from profiling.harness.spec import Tolerance

SCAN_SIZES = [{"M": 1, "N": 1}, {"M": 1, "N": 300}, {"M": 5, "N": 33}, {"M": 3, "N": 1001},
              {"M": 2, "N": 2500}]


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def _scan_task(name, source, the_plan, inputs, outputs, reference, tolerance=SUM_TOLERANCE):
    return task(name, source, the_plan, inputs, outputs, reference, SCAN_SIZES, tolerance)


def _kernel(name, source, args, inputs, outputs, reference, tolerance=SUM_TOLERANCE) -> Kernel:
    the_plan = plan(name, args, grid=ROW_GRID)
    return Kernel(name, source, the_plan, _scan_task(name, source, the_plan, inputs, outputs, reference,
                                                     tolerance))


CUMSUM = _kernel("cumsum", """extern "C" __global__ void cumsum(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float s = 0.0f;
        for (int j = 0; j < N; j++) {
            s += x[row * N + j];
            y[row * N + j] = s;
        }
    }
}
""", ["x", "y", "M", "N"], {"x": ("M", "N")}, {"y": ("M", "N")},
    lambda i, s: {"y": np.cumsum(_f64(i["x"]), axis=1).astype(np.float32)})

# the running value kept in the output: y[j] = y[j - 1] + x[j], an early return
CUMSUM_IN_MEMORY = _kernel("cumsum_mem", """extern "C" __global__
void cumsum_mem(const float *input, float *output, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    output[r * cols] = input[r * cols];
    for (int c = 1; c < cols; ++c) {
        output[r * cols + c] = output[r * cols + c - 1] + input[r * cols + c];
    }
}
""", ["x", "y", "M", "N"], {"x": ("M", "N")}, {"y": ("M", "N")},
    lambda i, s: {"y": np.cumsum(_f64(i["x"]), axis=1).astype(np.float32)})


def _reverse_masked(inputs, sizes):
    x, m = _f64(inputs["x"]), _f64(inputs["m"])
    kept = np.where(m > 0.0, x, 0.0)
    return {"y": np.cumsum(kept[:, ::-1], axis=1)[:, ::-1].astype(np.float32)}


# from the row's end, only where the mask is set, 64-bit offsets
REVERSE_MASKED = _kernel("rev_masked_cumsum", """extern "C" __global__
void rev_masked_cumsum(const float* x, const float* m, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        long long base = (long long)row * N;
        float acc = 0.0f;
        for (int j = N - 1; j >= 0; j--) {
            if (m[base + j] > 0.0f) acc += x[base + j];
            y[base + j] = acc;
        }
    }
}
""", ["x", "m", "y", "M", "N"], {"x": ("M", "N"), "m": ("M", "N")}, {"y": ("M", "N")}, _reverse_masked)


def _exclusive_prod(inputs, sizes):
    x = 1.0 + 0.001 * _f64(inputs["x"])
    before = np.cumprod(x, axis=1) / x
    return {"y": before.astype(np.float32)}


# exclusive: the element written before the update; the term from a local
EXCLUSIVE_PROD = _kernel("excl_cumprod", """extern "C" __global__
void excl_cumprod(const float* x, float* y, int M, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M) {
        float p = 1.0f;
        for (int j = 0; j < N; ++j) {
            float v = 1.0f + 0.001f * x[i * N + j];
            y[i * N + j] = p;
            p *= v;
        }
    }
}
""", ["x", "y", "M", "N"], {"x": ("M", "N")}, {"y": ("M", "N")}, _exclusive_prod)


def _cummax_total(inputs, sizes):
    x = _f64(inputs["x"])
    running = np.maximum.accumulate(x, axis=1)
    return {"y": running.astype(np.float32), "top": running[:, -1].astype(np.float32)}


# a running maximum written as `if (v > best) best = v;`, then the row's maximum after the loop
CUMMAX_TOTAL = _kernel("cummax_total", """extern "C" __global__
void cummax_total(const float* x, float* y, float* top, int M, int N) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float best = -INFINITY;
    for (int k = 0; k < N; k++) {
        const float v = x[row * N + k];
        if (v > best) best = v;
        y[row * N + k] = best;
    }
    top[row] = best;
}
""", ["x", "y", "top", "M", "N"], {"x": ("M", "N")}, {"y": ("M", "N"), "top": ("M",)}, _cummax_total,
    Tolerance(atol=0.0, rtol=0.0))

# in memory through an index local, the earlier element second: out[idx] = in[idx] + out[idx - 1]
CUMSUM_LOCAL_INDEX = _kernel("cumsum_idx", """extern "C" __global__
void cumsum_idx(const float* in, float* out, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        out[r * cols] = in[r * cols];
        for (int c = 1; c < cols; c++) {
            int idx = r * cols + c;
            out[idx] = in[idx] + out[idx - 1];
        }
    }
}
""", ["x", "y", "M", "N"], {"x": ("M", "N")}, {"y": ("M", "N")},
    lambda i, s: {"y": np.cumsum(_f64(i["x"]), axis=1).astype(np.float32)})

def _exclusive_sum(inputs, sizes):
    x = _f64(inputs["x"])
    before = np.cumsum(x, axis=1) - x
    return {"y": before.astype(np.float32)}


# exclusive, in memory: y[0] = 0, then y[j] = y[j - 1] + x[j - 1], a loop without braces
EXCLUSIVE_SUM_IN_MEMORY = _kernel("excl_sum_mem", """extern "C" __global__
void excl_sum_mem(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        y[row * N] = 0.0f;
        for (int j = 1; j < N; j++)
            y[row * N + j] = y[row * N + j - 1] + x[row * N + j - 1];
    }
}
""", ["x", "y", "M", "N"], {"x": ("M", "N")}, {"y": ("M", "N")}, _exclusive_sum)

# a running minimum with fminf in a counted while loop, size_t offsets
CUMMIN_WHILE = _kernel("cummin_while", """extern "C" __global__
void cummin_while(const float* x, float* y, int M, int N) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const size_t base = (size_t)row * N;
    float low = INFINITY;
    int j = 0;
    while (j < N) {
        low = fminf(low, x[base + j]);
        y[base + j] = low;
        ++j;
    }
}
""", ["x", "y", "M", "N"], {"x": ("M", "N")}, {"y": ("M", "N")},
    lambda i, s: {"y": np.minimum.accumulate(i["x"], axis=1)}, Tolerance(atol=0.0, rtol=0.0))

SCAN_STYLES = [CUMSUM, CUMSUM_IN_MEMORY, REVERSE_MASKED, EXCLUSIVE_PROD, CUMMAX_TOTAL, CUMSUM_LOCAL_INDEX,
               EXCLUSIVE_SUM_IN_MEMORY, CUMMIN_WHILE]


def _not_scan(name: str, loop: str, before: str = "float s = 0.0f;") -> str:
    return f"""extern "C" __global__ void {name}(const float* x, float* y, int M, int N) {{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {{
        {before}
        for (int j = 0; j < N; j++) {{
            {loop}
        }}
    }}
}}
"""


# (source, why the lift refuses it as a scan)
NOT_SCANS = [
    (_not_scan("grows", "s = s + s * x[row * N + j]; y[row * N + j] = s;"), "running values"),
    (_not_scan("two", "s += x[row * N + j]; t = fmaxf(t, x[row * N + j]); y[row * N + j] = s - t;",
               "float s = 0.0f; float t = -INFINITY;"), "2 running values"),
    (_not_scan("lag_by_division",
               "y[row * N + j] = (j >= 1 ? y[(row * N + j) / 1 - 1] : 0.0f) + x[row * N + j];", ""),
     "running values"),
    (_not_scan("lag2", "y[row * N + j] = (j >= 2 ? y[row * N + j - 2] : 0.0f) + x[row * N + j];", ""),
     "running values"),
    (_not_scan("same", "s += x[row * N + j]; y[row] = s;"), "writes the same element"),
    (_not_scan("reads_term", "float t = s * 0.5f; s += t + x[row * N + j]; y[row * N + j] = s;"),
     "reads"),
]
