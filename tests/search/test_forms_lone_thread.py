"""Blocks whose work only thread 0 does (search/engine/forms/lone_thread.py): a row per
block done by its first thread lifts as the row map-reduce it is, whether the test wraps
the work or returns early, and the rows skeleton computes the reference from it on the
CPU emulator; where the other threads could matter the kernel is left alone."""

import shutil

import numpy as np
import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch
from forms_kernels import SUM_TOLERANCE, plan, task

from profiling.harness.candidate import Candidate
from search.engine import forms
from search.engine.forms.lone_thread import lone_thread
from search.engine.forms.skeletons import by_name

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

COSINE = """extern "C" __global__ void cosine(const float *a, const float *b, float *out, int n, int d) {
    int row = blockIdx.x;
    if (threadIdx.x == 0) {
        float dot = 0, na = 0, nb = 0;
        for (int k = 0; k < d; k++) {
            float x = a[row * d + k], y = b[row * d + k];
            dot += x * y; na += x * x; nb += y * y;
        }
        out[row] = dot / fmaxf(sqrtf(na) * sqrtf(nb), 1e-8f);
    }
}
"""
# The same row sum, thread 0 through an alias that returns the others early.
ROW_SUM = """extern "C" __global__ void row_sum(const float* x, float* y, int R, int C) {
    int tid = threadIdx.x;
    if (tid != 0) return;
    int r = blockIdx.x;
    float s = 0.0f;
    for (int c = 0; c < C; ++c) s += x[r * C + c];
    y[r] = s;
}
"""
COSINE_PLAN = plan("cosine", ["a", "b", "out", "N", "D"], grid=["N"], block=[32])
ROW_SUM_PLAN = plan("row_sum", ["x", "y", "R", "C"], grid=["R"], block=["BLOCK"])


def _cosine(i, s):
    a, b = i["a"].astype(np.float64), i["b"].astype(np.float64)
    return {"out": ((a * b).sum(1) / np.maximum(np.sqrt((a * a).sum(1) * (b * b).sum(1)), 1e-8))
            .astype(np.float32)}


# (a task's L1 size is its last L0 size: rows long enough for a block)
COSINE_TASK = task("cosine", COSINE, COSINE_PLAN, {"a": ("N", "D"), "b": ("N", "D")}, {"out": ("N",)},
                   _cosine, [{"N": 1, "D": 1}, {"N": 30, "D": 5}, {"N": 7, "D": 300}], SUM_TOLERANCE)
ROW_SUM_TASK = task("row_sum", ROW_SUM, ROW_SUM_PLAN, {"x": ("R", "C")}, {"y": ("R",)},
                    lambda i, s: {"y": i["x"].astype(np.float64).sum(1).astype(np.float32)},
                    [{"R": 1, "C": 1}, {"R": 33, "C": 3}, {"R": 5, "C": 1000}], SUM_TOLERANCE)


def test_a_row_done_by_thread_zero_lifts_as_rows_launched_with_blocks_of_one_thread():
    source, launch = lone_thread(COSINE, COSINE_PLAN["launches"][0])
    assert launch["block"] == ["1"] and "threadIdx" not in source and "dot += x * y;" in source
    assert forms.lift(COSINE, COSINE_PLAN).family == forms.ROWS
    source, launch = lone_thread(ROW_SUM, ROW_SUM_PLAN["launches"][0])
    assert launch["block"] == ["1"] and "tid" not in source and "return" not in source
    assert forms.lift(ROW_SUM, ROW_SUM_PLAN).family == forms.ROWS


NOT_ALONE = {
    # thread 0's test, but the other threads still work after it
    "work after the test": COSINE.replace("1e-8f);\n    }\n}", "1e-8f);\n    }\n    out[row] += 0.0f;\n}"),
    # the thread index read in the work itself
    "thread index read": ROW_SUM.replace("y[r] = s;", "y[r] = s + tid;"),
    # the block's size read: it would change with blocks of one thread
    "block size read": ROW_SUM.replace("c < C; ++c", "c < C; c += blockDim.x / blockDim.x"),
    # threads meet
    "a barrier": ROW_SUM.replace("y[r] = s;", "__syncthreads();\n    y[r] = s;"),
    # an else branch: the other threads do something
    "an else branch": COSINE.replace("1e-8f);\n    }\n}", "1e-8f);\n    } else { out[row] = 0.0f; }\n}"),
    # thread 1, not thread 0: still one thread, but not written as the first (kept strict)
    "another thread": COSINE.replace("threadIdx.x == 0", "threadIdx.x == 1"),
}


@pytest.mark.parametrize("variant", list(NOT_ALONE))
def test_a_kernel_whose_other_threads_could_matter_is_left_alone(variant):
    source = NOT_ALONE[variant]
    the_plan = COSINE_PLAN if "cosine" in source else ROW_SUM_PLAN
    assert lone_thread(source, the_plan["launches"][0]) is None
    assert forms.lift(source, the_plan).family != forms.ROWS


def test_blocks_that_are_already_one_thread_or_two_dimensional_are_not_rewritten():
    one = {**COSINE_PLAN["launches"][0], "block": [1]}
    assert lone_thread(COSINE, one) is None
    assert lone_thread(COSINE, {**COSINE_PLAN["launches"][0], "block": [16, 16]}) is None


@needs_gxx
@pytest.mark.parametrize("source, the_plan, the_task", [
    (COSINE, COSINE_PLAN, COSINE_TASK), (ROW_SUM, ROW_SUM_PLAN, ROW_SUM_TASK)], ids=["cosine", "row_sum"])
def test_the_rows_skeleton_computes_the_reference_from_the_kernel_as_written(source, the_plan, the_task,
                                                                           tmp_path):
    emitted = by_name("rows.block_per_row").emit(forms.lift(source, the_plan), the_plan, the_task)
    assert not isinstance(emitted, str), emitted
    for name, candidate in (("naive", Candidate.from_source_and_plan(source, the_plan)),
                            ("skeleton", Candidate.from_source_and_plan(emitted.source, emitted.plan))):
        kernels = CpuKernels(candidate, tmp_path / name)
        for sizes in the_task.l0_sizes:
            inputs = inputs_for(the_task, sizes)
            outputs = kernels.run(the_task, sizes, inputs)
            assert mismatch(the_task, sizes, inputs, outputs) is None, (name, sizes)
