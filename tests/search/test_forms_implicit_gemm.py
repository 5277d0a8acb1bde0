"""Convolutions written as a thread per output lift as contractions over a nest of loops
(implicit GEMM): the nest is one reduction index, the padding test belongs to the
input's factor, and the locals each factor reads are recomputed in its tile load. The
tiled skeleton (induced from sgemm's lineage) then computes them on the CPU emulator as
the naive kernel's reference does. Kernels that are not such a product must not lift as
one."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task, TensorSpec, Tolerance
from search.engine.forms import CONTRACTION, Form, Refusal, lift
from search.engine.forms.contraction import NEST_K
from search.engine.forms.normalize import skips_as_tests
from search.engine.forms.skeletons import by_name

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")

# Stride 2, padding 1, sizes as #defines, a 2-D grid of output pixels with a plane of
# blockIdx.z per (image, output channel), the test written around the sum.
STRIDED = """#define STRIDE 2
#define PAD 1
extern "C" __global__ void conv_s2(const float* input, const float* weight, float* output,
                                   int batch, int in_ch, int out_ch, int height, int width) {
    int out_h = (height + 2 * PAD - 3) / STRIDE + 1;
    int out_w = (width + 2 * PAD - 3) / STRIDE + 1;
    int ox = blockIdx.x * blockDim.x + threadIdx.x;
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    int plane = blockIdx.z;
    if (ox < out_w && oy < out_h) {
        int oc = plane % out_ch;
        int b = plane / out_ch;
        float acc = 0.0f;
        for (int ic = 0; ic < in_ch; ic++)
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) {
                    int iy = oy * STRIDE - PAD + ky;
                    int ix = ox * STRIDE - PAD + kx;
                    if (iy >= 0 && iy < height && ix >= 0 && ix < width)
                        acc += input[((b * in_ch + ic) * height + iy) * width + ix] *
                               weight[((oc * in_ch + ic) * 3 + ky) * 3 + kx];
                }
        output[((b * out_ch + oc) * out_h + oy) * out_w + ox] = acc > 0.0f ? acc : 0.0f;
    }
}
"""
OUT = "((height + 2 - 3) / 2 + 1)", "((width + 2 - 3) / 2 + 1)"
STRIDED_PLAN = {"launches": [{"kernel": "conv_s2", "grid": [f"cdiv({OUT[1]}, 16)", f"cdiv({OUT[0]}, 16)",
                                                             "batch * out_ch"], "block": [16, 16],
                              "args": ["input", "weight", "output", "batch", "in_ch", "out_ch", "height",
                                       "width"]}]}


def _strided_reference(inputs, sizes):
    x = np.pad(inputs["input"].astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = inputs["weight"].astype(np.float64)
    oh, ow = (sizes["height"] - 1) // 2 + 1, (sizes["width"] - 1) // 2 + 1
    y = np.zeros((sizes["batch"], sizes["out_ch"], oh, ow))
    for r in range(3):
        for s in range(3):
            taps = x[:, :, r:r + 2 * oh:2, s:s + 2 * ow:2]  # (b, ic, oh, ow)
            y += np.einsum("bchw,oc->bohw", taps, w[:, :, r, s])
    return {"output": np.maximum(y, 0).astype(np.float32)}


STRIDED_TASK = Task(
    name="conv_s2_test", description="relu(conv3x3(x, w, stride 2, padding 1))",
    sizes={"batch": 2, "in_ch": 5, "out_ch": 7, "height": 9, "width": 12},
    l0_sizes=({"batch": 1, "in_ch": 1, "out_ch": 1, "height": 1, "width": 1},
              {"batch": 2, "in_ch": 3, "out_ch": 5, "height": 7, "width": 10},
              {"batch": 1, "in_ch": 6, "out_ch": 3, "height": 4, "width": 3}),
    inputs=(TensorSpec("input", "float32", ("batch", "in_ch", "height", "width")),
            TensorSpec("weight", "float32", ("out_ch", "in_ch", 3, 3))),
    outputs=(TensorSpec("output", "float32", ("batch", "out_ch", "(height + 1) // 2", "(width + 1) // 2")),),
    reference=_strided_reference, flops=lambda s: 0.0, bytes=lambda s: 0.0,
    naive_source=STRIDED, naive_plan=STRIDED_PLAN, tolerances={"float32": Tolerance(atol=1e-4, rtol=1e-4)})


# A transposed convolution (stride 2, padding 1) written as a gather: an output takes the
# taps whose input position divides by the stride, a test and locals between the tests.
TRANSPOSED = """extern "C" __global__ void conv_transpose2d(const float* x, const float* w, float* y,
                                            int N, int C, int K,
                                            int H, int W) {
    int OH = (H - 1) * 2 - 2 + 3;
    int OW = (W - 1) * 2 - 2 + 3;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * K * OH * OW) return;
    int ow = idx % OW;
    int oh = (idx / OW) % OH;
    int k = (idx / (OW * OH)) % K;
    int n = idx / (OW * OH * K);
    float sum = 0.0f;
    for (int c = 0; c < C; c++) {
        for (int r = 0; r < 3; r++) {
            for (int s = 0; s < 3; s++) {
                int ih_s = oh + 1 - r;
                int iw_s = ow + 1 - s;
                if (ih_s % 2 == 0 && iw_s % 2 == 0) {
                    int ih = ih_s / 2;
                    int iw = iw_s / 2;
                    if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
                        sum += x[((n * C + c) * H + ih) * W + iw] * w[((c * K + k) * 3 + r) * 3 + s];
                    }
                }
            }
        }
    }
    y[idx] = sum;
}
"""
TRANSPOSED_PLAN = {"launches": [{"kernel": "conv_transpose2d", "block": [256],
                                 "grid": ["cdiv(N * K * (2 * H - 1) * (2 * W - 1), 256)"],
                                 "args": ["x", "w", "y", "N", "C", "K", "H", "W"]}]}


def _transposed_reference(inputs, sizes):
    x, w = inputs["x"].astype(np.float64), inputs["w"].astype(np.float64)
    n, _, h, width = x.shape
    full = np.zeros((n, w.shape[1], 2 * h + 1, 2 * width + 1))  # every tap scattered, then cropped
    for r in range(3):
        for s in range(3):
            full[:, :, r:r + 2 * h:2, s:s + 2 * width:2] += np.einsum("nchw,ck->nkhw", x, w[:, :, r, s])
    return {"y": full[:, :, 1:2 * h, 1:2 * width].astype(np.float32)}


TRANSPOSED_TASK = Task(
    name="conv_transpose_test", description="conv_transpose2d(x, w, stride 2, padding 1)",
    sizes={"N": 2, "C": 3, "K": 5, "H": 6, "W": 7},
    l0_sizes=({"N": 1, "C": 1, "K": 1, "H": 1, "W": 1}, {"N": 2, "C": 3, "K": 5, "H": 6, "W": 7},
              {"N": 1, "C": 4, "K": 3, "H": 3, "W": 2}),
    inputs=(TensorSpec("x", "float32", ("N", "C", "H", "W")), TensorSpec("w", "float32", ("C", "K", 3, 3))),
    outputs=(TensorSpec("y", "float32", ("N", "K", "2 * H - 1", "2 * W - 1")),),
    reference=_transposed_reference,
    flops=lambda s: 0.0, bytes=lambda s: 0.0, naive_source=TRANSPOSED, naive_plan=TRANSPOSED_PLAN,
    tolerances={"float32": Tolerance(atol=1e-4, rtol=1e-4)})

def test_a_skip_in_a_loop_body_is_read_as_the_test_around_the_rest_of_the_body():
    source = """__global__ void f(const float* x, float* y, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) {
        int j = i - 1;
        if (j < 0) continue;
        s += x[j];
    }
    if (n > 0) { continue_here(); }
    y[0] = s;
}"""
    rewritten = skips_as_tests(source)
    assert "continue;" not in rewritten
    assert "if (!(j < 0)) {\n        s += x[j];\n    }" in rewritten
    assert "if (n > 0) { continue_here(); }" in rewritten  # not a loop's body: kept


def test_the_suites_convolution_lifts_as_a_product_over_its_channel_and_tap_nest():
    """conv2d's naive kernel: pointer locals per channel, the padding written as skips."""
    task = tasks.get("conv2d")
    form = lift(task.naive_source, task.naive_plan)
    assert isinstance(form, Form) and form.family == CONTRACTION, form
    assert form.reduction.name == NEST_K and form.reduction.bound == "(C) * (3) * (3)"
    # rows: the output channel; columns: images and pixels, merged into one tile index
    assert [c.name for c in form.coordinates] == ["k", "optiml_col"]
    assert [c.name for c in dict(form.merged)["optiml_col"]] == ["n", "row", "col"]
    weights, pixels = form.factors
    assert weights == "taps[r * 3 + s]"
    assert pixels.startswith("(((!(h < 0 || h >= H)) && (!(wc < 0 || wc >= W))) ? (plane[")
    # each load recomputes only what its factor reads
    assert "const float* taps" in form.setups[0] and "plane" not in form.setups[0]
    assert "int h = row - 1 + r;" in form.setups[1] and "taps" not in form.setups[1]


def test_a_strided_convolution_on_a_grid_of_planes_lifts_with_the_test_on_the_input():
    form = lift(STRIDED, STRIDED_PLAN)
    assert isinstance(form, Form) and form.family == CONTRACTION, form
    assert [c.name for c in form.coordinates] == ["oc", "optiml_col"]
    assert [c.name for c in dict(form.merged)["optiml_col"]] == ["b", "oy", "ox"]
    assert form.factors[0].startswith("weight[")
    assert form.factors[1].startswith("((iy >= 0 && iy < height && ix >= 0 && ix < width) ? (input[")


def test_a_transposed_convolution_lifts_with_both_tests_and_the_locals_between_them_on_the_input():
    form = lift(TRANSPOSED, TRANSPOSED_PLAN)
    assert isinstance(form, Form) and form.family == CONTRACTION, form
    assert form.factors[1].startswith("(((ih_s % 2 == 0 && iw_s % 2 == 0) && (ih >= 0 && ih < H")
    assert form.setups[1].endswith("int ih = ih_s / 2;\nint iw = iw_s / 2;")


# The same strided convolution with its taps counted from -1 to 1 (`<=`).
CENTRED = STRIDED.replace("int ky = 0; ky < 3; ky++", "int ky = -1; ky <= 1; ky++").replace(
    "int kx = 0; kx < 3; kx++", "int kx = -1; kx <= 1; kx++").replace(
    "oy * STRIDE - PAD + ky", "oy * STRIDE + ky").replace(
    "ox * STRIDE - PAD + kx", "ox * STRIDE + kx").replace(
    "* 3 + ky) * 3 + kx]", "* 3 + ky + 1) * 3 + kx + 1]")


def test_taps_counted_from_minus_one_are_digits_from_their_start():
    assert CENTRED.count("<= 1") == 2 and "ky + 1) * 3 + kx + 1]" in CENTRED
    form = lift(CENTRED, STRIDED_PLAN)
    assert isinstance(form, Form) and form.family == CONTRACTION, form
    assert form.reduction.bound == "(in_ch) * (((1) + 1) - (-1)) * (((1) + 1) - (-1))"  # 3 taps each
    assert "const int kx = (int)((-1) + (optiml_k) % (((1) + 1) - (-1)));" in form.setups[1]


@needs_gxx
@pytest.mark.parametrize("name", ["conv2d", "conv2d not prefetched", "strided", "centred", "transposed"])
def test_the_tiled_skeleton_computes_the_convolutions(name, tmp_path):
    """(`not prefetched`: the tile's switch that loads the next step while one computes, off;
    it is on by default.)"""
    centred = Task(**{**STRIDED_TASK.__dict__, "naive_source": CENTRED})
    task = {"conv2d": tasks.get("conv2d"), "conv2d not prefetched": tasks.get("conv2d"),
            "strided": STRIDED_TASK, "centred": centred, "transposed": TRANSPOSED_TASK}[name]
    emitted = by_name("contraction.smem_register_tile").emit(lift(task.naive_source, task.naive_plan),
                                                             task.naive_plan, task)
    source = emitted.source
    if name.endswith("not prefetched"):
        assert "#define OPTIML_PREFETCH 1" in source
        source = source.replace("#define OPTIML_PREFETCH 1", "#define OPTIML_PREFETCH 0")
    kernels = CpuKernels(Candidate.from_dict({**emitted.plan, "source": source}), tmp_path)
    for sizes in task.l0_sizes[:3]:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes


@pytest.mark.parametrize(("change", "cause"), [
    # depthwise: the weights read the output's channel too; no factor has a column of its own
    (("input[((b * in_ch + ic) * height + iy) * width + ix] *\n                               "
      "weight[((oc * in_ch + ic) * 3 + ky) * 3 + kx]",
      "input[((b * in_ch + oc) * height + iy) * width + ix] * weight[(oc * 3 + ky) * 3 + kx]"),
     "one factor must follow k"),
    # a test that reads the output channel and the pixel: neither factor's alone
    (("ix >= 0 && ix < width)", "ix >= 0 && ix < width && oc != ox)"), "reads coordinates of both factors"),
    # a local a factor reads, changed after its declaration
    (("float acc = 0.0f;", "int shift = PAD;\n        shift += 0;\n        float acc = 0.0f;\n"
      "        shift = ox * 0 + shift;"), "changes after its declaration"),
    # a local read from memory, under the padding test
    (("int ix = ox * STRIDE - PAD + kx;", "int ix = ox * STRIDE - PAD + kx + (int)input[0];"),
     "read memory, under the test"),
    # a loop whose start is worked out per output
    (("int ky = 0; ky < 3", "int ky = oy - oy; ky < 3"), "worked out per output"),
    # a test with an else around the sum
    (("acc += input", "acc += 0.0f; else acc += input"), "a test with an else"),
])
def test_nests_that_are_no_product_of_two_tiles_are_refused_as_contractions(change, cause):
    assert change[0] in STRIDED
    source = STRIDED.replace(*change)
    if "shift" in change[1]:
        source = source.replace("int ix = ox * STRIDE - PAD + kx;", "int ix = ox * STRIDE - shift + kx;")
    form = lift(source, STRIDED_PLAN)
    assert not (isinstance(form, Form) and form.family == CONTRACTION), form
    # refused as a product, and said why (a kernel then read as rows keeps it as a note)
    reason = form.reason if isinstance(form, Refusal) else " ".join(form.notes)
    assert cause in reason, form
