"""Constructs the second newcomer audit (bench/newcomer_tasks_2/) found the lift did not
read, each read now, and the nearby kernels that must still be refused:

- checks one index at a time: `if (row < R) { if (col < C) {...} }`, or an early return
  per index (reading._guarded);
- row loops counting down, `for (int c = C - 1; c >= 0; --c)` or an unsigned `i > 0`,
  read as the same iterations counted up, an arg-reduction's tie rule kept by flipping
  its test's strictness (rows._ascending, rows._loop).
"""

import shutil
from dataclasses import replace

import numpy as np
import pytest
from cuda_on_cpu import skeleton_mismatch
from forms_kernels import plan

from bench.newcomer_tasks_2 import argmax_ties, col_min, glu
from search.engine import forms
from search.engine.forms import MAP, ROWS, Form, LoopHole, Refusal

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

MAP_2D = """extern "C" __global__ void scale(const float* x, float* y, int R, int C) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    %s
}
"""
MAP_2D_PLAN = plan("scale", ["x", "y", "R", "C"], grid=["cdiv(C, 32)", "cdiv(R, 8)"], block=[32, 8])
WORK = "y[row * C + col] = 2.0f * x[row * C + col];"


def lift(source: str, the_plan: dict):
    return forms.lift(source, the_plan)


@pytest.mark.parametrize("checks", [
    f"if (row < R) {{ if (col < C) {{ {WORK} }} }}",
    f"if (row < R) if (col < C) {WORK}",
    f"if (row >= R) return;\n    if (col >= C) return;\n    {WORK}",
    f"if (col >= C) return;\n    if (row < R) {{ {WORK} }}",
])
def test_a_map_checked_one_index_at_a_time_lifts_as_if_checked_at_once(checks):
    form = lift(MAP_2D % checks, MAP_2D_PLAN)
    at_once = lift(MAP_2D % f"if (row < R && col < C) {{ {WORK} }}", MAP_2D_PLAN)
    assert isinstance(form, Form) and form.family == MAP, form
    assert form.space == at_once.space and form.body == at_once.body


@pytest.mark.parametrize("checks", [
    # a statement between the checks runs for columns the second check leaves out
    f"if (row < R) {{ y[row * C] = 0.0f; if (col < C) {{ {WORK} }} }}",
    # work after the inner check, inside the outer one
    f"if (row < R) {{ if (col < C) {{ {WORK} }} y[row * C] = 1.0f; }}",
    # the same index checked twice, the other never
    f"if (row < R) {{ if (row < R - 1) {{ {WORK} }} }}",
    # an inner test that is not a bound
    f"if (row < R) {{ if (x[row * C + col] > 0.0f) {{ {WORK} }} }}",
])
def test_checks_one_index_at_a_time_that_leave_threads_unbounded_are_refused(checks):
    assert isinstance(lift(MAP_2D % checks, MAP_2D_PLAN), Refusal)


FLAT = """extern "C" __global__ void band(const float* x, float* y, int M, int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int row = idx / N;
    int col = idx % N;
    if (row >= M) return;
    if (col < 5) { y[idx] = x[idx]; }
}
"""


def test_a_test_after_the_check_of_a_flat_index_read_as_digits_stays_the_work():
    # the digits are bounded together by their one check; `col < 5` is what the work does
    form = lift(FLAT, plan("band", ["x", "y", "M", "N"], grid="cdiv(M * N, BLOCK)"))
    assert isinstance(form, Form) and form.family == MAP, form
    assert "col < 5" in form.body


def test_the_newcomer_glu_with_its_nested_checks_lifts_as_a_map():
    form = lift(glu.SRC, glu.TASK.naive_plan)
    assert isinstance(form, Form) and form.family == MAP, form


ROW_MAX = """extern "C" __global__ void row_max(const float* x, float* y, int R, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) return;
    float m = -INFINITY;
    for (%s) m = fmaxf(m, x[r * C + c]);
    y[r] = m;
}
"""
ROW_PLAN = plan("row_max", ["x", "y", "R", "C"], grid="cdiv(R, BLOCK)")


@pytest.mark.parametrize("head, start, bound", [
    ("int c = C - 1; c >= 0; --c", "0", "(C - 1) + 1"),
    ("int c = C - 1; c >= 0; c--", "0", "(C - 1) + 1"),
    ("int c = C - 1; 0 <= c; c -= 1", "0", "(C - 1) + 1"),
    ("unsigned c = C - 1; c > 0; c--", "(0) + 1", "(C - 1) + 1"),
])
def test_a_row_loop_counting_down_is_the_same_iterations_counted_up(head, start, bound):
    form = lift(ROW_MAX % head, ROW_PLAN)
    assert isinstance(form, Form) and form.family == ROWS, form
    loop = next(s for s in form.steps if isinstance(s, LoopHole))
    assert (loop.start, loop.variables[0].bound) == (start, bound)


@pytest.mark.parametrize("head, cause", [
    ("unsigned c = C - 1; c >= 0; c--", "unsigned counter counting down"),  # never ends
    ("int c = C - 1; c != 0; --c", "condition is not `c >= bound`"),
    ("int c = C - 1; c >= 0; c -= 2", "steps by c -= 2"),
    ("int c = C - 1; c >= c / 2; --c", "not `c >= bound`"),
])
def test_a_loop_counting_down_that_is_not_a_range_is_refused(head, cause):
    form = lift(ROW_MAX % head, ROW_PLAN)
    assert isinstance(form, Refusal) and cause in form.reason, form


def test_an_argmax_counting_down_keeps_its_tie_rule_by_flipping_the_tests_strictness():
    form = lift(argmax_ties.SRC, argmax_ties.TASK.naive_plan)
    loop = next(s for s in form.steps if isinstance(s, LoopHole))
    (found,) = loop.reductions
    # `v >= best` counted down keeps the first of equal values: `v > best` counted up
    assert (found.op, found.compare) == ("argmax", ">") and "if (v > best)" in loop.body


def test_an_argmax_counting_up_keeps_its_test_as_written():
    source = argmax_ties.SRC.replace("int c = C - 1; c >= 0; --c", "int c = 0; c < C; ++c")
    loop = next(s for s in lift(source, argmax_ties.TASK.naive_plan).steps if isinstance(s, LoopHole))
    assert loop.reductions[0].compare == ">=" and "if (v >= best)" in loop.body


@needs_gxx
@pytest.mark.parametrize("compare", [">=", ">"])
def test_the_rows_skeleton_of_an_argmax_counting_down_computes_its_ties_as_written(compare, tmp_path):
    source = argmax_ties.SRC.replace("v >= best", f"v {compare} best")
    the_task = argmax_ties.TASK
    if compare == ">":  # counted down, `>` keeps the last of equal values
        the_task = replace(the_task, naive_source=source, reference=_last_argmax)
    problem = skeleton_mismatch(source, the_task.naive_plan, the_task, "rows.block_per_row", tmp_path)
    assert problem is None, problem


def _last_argmax(inputs, sizes):
    x = inputs["x"][:, ::-1]
    return {"idx": (x.shape[1] - 1 - x.argmax(axis=1)).astype(np.int32)}


def test_the_newcomer_column_min_counting_down_an_unsigned_counter_lifts_as_rows():
    form = lift(col_min.SRC, col_min.TASK.naive_plan)
    assert isinstance(form, Form) and form.family == ROWS, form
