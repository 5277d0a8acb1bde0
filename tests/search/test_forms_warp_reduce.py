"""A warp's reduction through shuffles (search/engine/forms/warp_reduce.py): a grid-stride
partial reduced by the warp into lane 0's atomic lifts as the full reduction it is, a row
per warp reduced by butterflies as the row map-reduce it is (one thread walking the row),
and the skeletons made from them compute the reference on the CPU emulator; wherever the
lanes could see different values the kernel is left alone and the lift refused. And the
launch that zeroes the atomics' output may be tested on thread 0 of block 0
(forms/zeroing.py)."""

import shutil

import numpy as np
import pytest
from cuda_on_cpu import skeleton_mismatch
from forms_kernels import SUM_TOLERANCE, plan, task

from bench.newcomer_tasks_2 import kl_div, log_softmax
from search.engine import forms
from search.engine.forms import FULL_REDUCE, ROWS, Form, Refusal
from search.engine.forms.warp_reduce import warp_reduced

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

ROW_SUM = """#define WARP 32
extern "C" __global__ void row_sum(const float* x, float* y, int R, int C) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    int lane = threadIdx.x & 31;
    if (row >= R) return;
    float s = 0.0f;
    for (int c = lane; c < C; c += WARP) s += x[row * C + c];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if (lane == 0) y[row] = s;
}
"""
ROW_SUM_PLAN = plan("row_sum", ["x", "y", "R", "C"], grid=["cdiv(R, 4)"], block=["128"])
ROW_SUM_TASK = task("row_sum", ROW_SUM, ROW_SUM_PLAN, {"x": ("R", "C")}, {"y": ("R",)},
                    lambda i, s: {"y": i["x"].astype(np.float64).sum(1).astype(np.float32)},
                    [{"R": 1, "C": 1}, {"R": 33, "C": 3}, {"R": 5, "C": 1000}], SUM_TOLERANCE)


def test_a_row_per_warp_is_a_row_per_thread_in_blocks_of_a_32nd_the_size():
    source, launch = warp_reduced(ROW_SUM, ROW_SUM_PLAN["launches"][0], {})
    assert launch["block"] == ["4"] and "__shfl" not in source and "lane" not in source
    assert "int row = blockIdx.x * blockDim.x + threadIdx.x;" in source
    assert "for (int c = 0; c < C; c += 1) s += x[row * C + c];" in source and "y[row] = s;" in source
    form = forms.lift(ROW_SUM, ROW_SUM_PLAN)
    assert isinstance(form, Form) and form.family == ROWS, form


def test_a_reduction_in_a_helper_that_returns_its_argument_is_read_as_the_tree_inline():
    source = WARP_SUM + ROW_SUM.replace(TREE, "s = warp_sum(s);")
    form = forms.lift(source, ROW_SUM_PLAN)
    assert isinstance(form, Form) and form.family == ROWS, form


def test_the_newcomer_log_softmax_with_its_reductions_in_helpers_lifts_as_rows():
    form = forms.lift(log_softmax.SRC, log_softmax.TASK.naive_plan)
    assert isinstance(form, Form) and form.family == ROWS, form
    assert "warp_" not in "".join(str(step) for step in form.steps)


def test_a_warps_sum_into_lane_zeros_atomic_is_every_threads_atomic():
    launch = kl_div.TASK.naive_plan["launches"][1]
    source, same = warp_reduced(kl_div.SRC, launch, {})
    assert same == launch and "__shfl" not in source and "atomicAdd(out, acc);" in source
    form = forms.lift(kl_div.SRC, kl_div.TASK.naive_plan)
    assert isinstance(form, Form) and form.family == FULL_REDUCE, form


@needs_gxx
@pytest.mark.parametrize("kernel, skeleton", [
    ((ROW_SUM, ROW_SUM_PLAN, ROW_SUM_TASK), "rows.block_per_row"),
    ((log_softmax.SRC, log_softmax.TASK.naive_plan, log_softmax.TASK), "rows.block_per_row"),
    ((kl_div.SRC, kl_div.TASK.naive_plan, kl_div.TASK), "full.grid_stride_accumulate"),
])
def test_the_skeletons_of_warp_reductions_compute_the_reference(kernel, skeleton, tmp_path):
    source, the_plan, the_task = kernel
    assert skeleton_mismatch(source, the_plan, the_task, skeleton, tmp_path) is None


WARP_SUM = """__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
"""
MAX_LOOP = "float m = -INFINITY;\n    for (int c = lane; c < C; c += WARP) m = fmaxf(m, x[row * C + c]);\n"
MAX_TREE = "for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));"
TREE = "for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);"
NOT_READ = {
    # only lane 0 holds the sum after __shfl_down_sync, and every lane writes it
    "down, read by every lane": (ROW_SUM.replace(TREE, TREE.replace("xor", "down"))
                                 .replace("if (lane == 0) y[row] = s;", "y[row] = s;"), ROW_SUM_PLAN),
    # lane 0 writes its own share of a sum the warp never combined (only the max is)
    "a partial never combined": (ROW_SUM.replace(TREE, MAX_LOOP + MAX_TREE)
                                 .replace("y[row] = s;", "y[row] = s + m;"), ROW_SUM_PLAN),
    # every lane starts its sum at 1: the warp's sum counts 32 of them
    "a sum from one": (ROW_SUM.replace("float s = 0.0f;", "float s = 1.0f;"), ROW_SUM_PLAN),
    # a block that is not whole warps: the last warp's missing lanes
    "48 threads": (ROW_SUM, plan("row_sum", ["x", "y", "R", "C"], grid=["cdiv(R, 2)"], block=["48"])),
    # a lane reading its own element outside a strided loop
    "a lane's element": (ROW_SUM.replace("float s = 0.0f;", "float s = x[row * C + lane] * 0.0f;"),
                         ROW_SUM_PLAN),
    # a tree over half a warp
    "half a warp": (ROW_SUM.replace("int o = 16", "int o = 8"), ROW_SUM_PLAN),
    # the partial read again after a reduction that did not store into it
    "a partial read after": (WARP_SUM + ROW_SUM.replace(TREE, "float total = warp_sum(s);")
                             .replace("y[row] = s;", "y[row] = total + s;"), ROW_SUM_PLAN),
}


@pytest.mark.parametrize("name", sorted(NOT_READ))
def test_a_warp_reduction_whose_lanes_could_differ_is_left_alone_and_refused(name):
    source, the_plan = NOT_READ[name]
    assert warp_reduced(source, the_plan["launches"][0], {}) is None
    assert isinstance(forms.lift(source, the_plan), Refusal)


KL_TREE = "for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffff, acc, off);"
NOT_AN_ATOMIC_OF_THE_SUM = {
    "every lane adds the warp's sum": kl_div.SRC.replace("if ((threadIdx.x & 31) == 0) atomicAdd",
                                                         "atomicAdd"),
    "a max tree into a sum": kl_div.SRC.replace(KL_TREE, KL_TREE.replace(
        "acc += __shfl_down_sync(0xffffffff, acc, off)",
        "acc = fmaxf(acc, __shfl_down_sync(0xffffffff, acc, off))")),
    "lane 1 adds": kl_div.SRC.replace("(threadIdx.x & 31) == 0", "(threadIdx.x & 31) == 1"),
}


@pytest.mark.parametrize("name", sorted(NOT_AN_ATOMIC_OF_THE_SUM))
def test_a_warp_tree_into_an_atomic_that_is_not_the_warps_sum_once_is_refused(name):
    source = NOT_AN_ATOMIC_OF_THE_SUM[name]
    assert warp_reduced(source, kl_div.TASK.naive_plan["launches"][1], {}) is None
    assert isinstance(forms.lift(source, kl_div.TASK.naive_plan), Refusal)


SUM = """extern "C" __global__ void zero(float* out) { %s }
extern "C" __global__ void total(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}
"""


def _zero_first(block: str) -> dict:
    the_plan = plan("total", ["x", "out", "n"], zero=("zero", "out"))
    the_plan["launches"][0]["block"] = [block]
    return the_plan


@pytest.mark.parametrize("zeroing, block", [
    ("out[0] = 0.0f;", "1"),
    ("if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = 0.f;", "32"),
    ("if (threadIdx.x == 0) { *out = 0; }", "256"),
    ("out[0] = 0.0f;", "64"),  # every thread stores the same zero
])
def test_a_launch_that_zeroes_the_output_from_thread_zero_or_from_all_is_the_zeroing(zeroing, block):
    form = forms.lift(SUM % zeroing, _zero_first(block))
    assert isinstance(form, Form) and form.family == FULL_REDUCE, form


@pytest.mark.parametrize("zeroing", [
    "if (threadIdx.x == 1) out[0] = 0.0f;",
    "if (threadIdx.x == 0 || blockIdx.x == 0) out[0] = 0.0f; else out[0] = 1.0f;",
    "if (threadIdx.x == 0) out[0] = 1.0f;",
])
def test_a_launch_that_may_leave_the_output_unzeroed_is_not_the_zeroing(zeroing):
    form = forms.lift(SUM % zeroing, _zero_first("32"))
    assert isinstance(form, Refusal), form
