"""Blocks whose work only thread 0 does (search/engine/forms/lone_thread.py): a row per
block done by its first thread lifts as the row map-reduce it is, whether the test wraps
the work or returns early, and the rows skeleton computes the reference from it on the
CPU emulator; where the other threads could matter the kernel is left alone."""

import shutil

import numpy as np
import pytest
from cuda_on_cpu import skeleton_mismatch
from forms_kernels import SUM_TOLERANCE, plan, task

from bench.newcomer_tasks import cosine
from search.engine import forms
from search.engine.forms.lone_thread import lone_thread

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

# The newcomer task's row per block done by thread 0 (bench/newcomer_tasks/cosine.py).
COSINE, COSINE_PLAN, COSINE_TASK = cosine.SRC, cosine.TASK.naive_plan, cosine.TASK
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
ROW_SUM_PLAN = plan("row_sum", ["x", "y", "R", "C"], grid=["R"], block=["BLOCK"])


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
    the_plan = COSINE_PLAN if "cosine_sim" in source else ROW_SUM_PLAN
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
    assert skeleton_mismatch(source, the_plan, the_task, "rows.block_per_row", tmp_path) is None
