"""rows.block_per_row is proposed only where the row loop walks memory contiguously."""

from __future__ import annotations

from profiling.harness import tasks
from search.engine.forms import LoopHole, lift, strides
from search.engine.forms.skeletons import by_name
from search.engine.forms.strides import contiguity_problem, stride

# A pointwise convolution as a newcomer writes it: a thread per output, a channel loop
# that steps by a whole image per iteration.
# A sum down each column, one thread a column: its loop walks a column, a row apart.
COLUMN_SUM = """extern "C" __global__ void column_sum(const float* x, float* y, int R, int C) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= C) return;
    float acc = 0.0f;
    for (int r = 0; r < R; r++) {
        acc += x[r * C + col];
    }
    y[col] = acc;
}
"""
COLUMN_PLAN = {"launches": [{"kernel": "column_sum", "grid": ["cdiv(C, BLOCK)"], "block": ["BLOCK"],
                             "args": ["x", "y", "R", "C"]}], "tunables": {"BLOCK": 256}}


def test_the_stride_of_an_index_is_measured_at_two_iterations():
    assert stride("row * N + j", "j") == 1
    assert stride("(long long)row * N + j", "j") == 1
    assert stride("w[0]", "j") is None  # not plain arithmetic
    assert stride("(n * C + c) * HW + p", "c") not in (0, 1, -1)
    assert stride("k / 4", "j") == 0


def test_a_loop_that_jumps_through_memory_is_not_spread_over_a_block():
    form = lift(COLUMN_SUM, COLUMN_PLAN)
    (loop,) = [s for s in form.steps if isinstance(s, LoopHole)]
    assert "x[r * C + col] steps by a size" in contiguity_problem(loop)


def test_row_loops_that_walk_their_row_are_spread_over_a_block():
    for name in ("softmax", "layernorm", "cross_entropy"):
        task = tasks.get(name)
        form = lift(task.naive_source, task.naive_plan)
        assert not isinstance(by_name("rows.block_per_row").emit(form, task.naive_plan, task), str), name


ROWS_THROUGH_A_MACRO = """#define IDX(r, c, n) ((r) * (n) + (c))
extern "C" __global__ void rows_define(const float* x, float* y, int M, int N) {
    const int tid = threadIdx.x + blockIdx.x * blockDim.x;
    if (tid < M) {
        float acc = 0.f;
        for (int j = 0; j < N; j += 1) acc = acc + x[IDX(tid, j, N)] * x[IDX(tid, j, N)];
        y[tid] = sqrtf(acc);
    }
}
"""


def test_an_index_written_through_a_function_like_macro_is_measured_after_expanding_it():
    plan = {"launches": [{"kernel": "rows_define", "grid": ["cdiv(M, 128)"], "block": [128],
                          "args": ["x", "y", "M", "N"]}]}
    form = lift(ROWS_THROUGH_A_MACRO, plan)
    loop = next(step for step in form.steps if isinstance(step, LoopHole))
    assert strides.contiguity_problem(loop, form.helpers) is None
    assert "cannot be worked out" in strides.contiguity_problem(loop)  # without the #define
    assert "from one tid to the next" in strides.neighbour_problem(form)


def test_macros_expand_with_their_arguments_nested_parentheses_and_objects():
    helpers = "#define IDX(r, c, n) ((r) * (n) + (c))\n#define WIDTH 1024\n"
    assert strides.expand_macros("IDX(f(a, b), j + 1, WIDTH)", helpers) == \
        "((((f(a, b))) * (((1024))) + ((j + 1))))"
    assert strides.stride(strides.expand_macros("IDX(row, j, WIDTH)", helpers), "j") == 1
    assert strides.expand_macros("IDX[3]", helpers) == "IDX[3]"  # not a call: left alone


# A reduction over one dimension written for any layout: the row's elements INNER apart.
GENERIC_ROWS = """extern "C" __global__ void row_max(const float* x, float* y, long long OUTER, long long R,
                                   long long INNER) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < OUTER * INNER) {
        long long o = t / INNER;
        long long i = t % INNER;
        const float* xr = x + o * R * INNER + i;
        float m = -INFINITY;
        for (long long j = 0; j < R; j++) m = fmaxf(m, xr[j * INNER]);
        y[t] = m;
    }
}
"""


def _generic_plan(inner: str) -> dict:
    return {"launches": [{"kernel": "row_max", "grid": ["cdiv(M, BLOCK)"], "block": ["BLOCK"],
                          "args": ["x", "y", "M", "N", inner]}], "tunables": {"BLOCK": 256}}


def test_a_stride_the_plan_passes_as_a_number_is_that_number():
    form = lift(GENERIC_ROWS, _generic_plan("(1)"))
    assert strides.literal_arguments(form, _generic_plan("(1)")["launches"][0]["args"]) == {"INNER": 1}
    assert strides.literal_arguments(form, ["x", "y", "i64:M", "i64:N", "i64:1"]) == {"INNER": 1}
    loop = next(step for step in form.steps if isinstance(step, LoopHole))
    assert strides.contiguity_problem(loop, fixed={"INNER": 1}) is None
    assert "steps by a size" in strides.contiguity_problem(loop)  # INNER unknown: any size
    # rows side by side are a row apart when INNER is 1: not a column layout
    assert "do not read side by side" in strides.neighbour_problem(form, {"INNER": 1})
    assert strides.neighbour_problem(form) is None  # INNER unknown: the next row is the next address


def test_block_per_row_takes_a_generic_kernel_only_where_its_stride_is_one():
    task = tasks.get("softmax")  # sizes M and N; the kernel's own names do not matter here
    skeleton = by_name("rows.block_per_row")
    emitted = skeleton.emit(lift(GENERIC_ROWS, _generic_plan("1")), _generic_plan("1"), task)
    assert not isinstance(emitted, str), emitted
    refused = skeleton.emit(lift(GENERIC_ROWS, _generic_plan("N")), _generic_plan("N"), task)
    assert isinstance(refused, str) and "steps by" in refused
