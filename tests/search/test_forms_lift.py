"""Lifting kernels to family forms (search/engine/forms): which family a kernel is, read
from however its author wrote the index, the bounds and the loops; and the kernels that
must not lift, each refused with a reason that names the cause.

The kernels are in forms_kernels.py (shared with test_forms_skeletons.py) or, where one
test reads them, here."""

import pytest
from forms_kernels import (
    GEMV,
    GROUPNORM,
    MAP_2D,
    MAP_2D_RAMP,
    MAP_CAST,
    MAP_EARLY_RETURN,
    MAP_GRID_STRIDE,
    MAP_HELPER_LOCALS,
    MAP_IF_ELSE,
    MAP_PLAIN,
    MAP_RENAMED,
    MAP_REVERSE,
    MAP_REVERSED,
    MAP_SAXPY,
    MAP_TRANSPOSE,
    RMSNORM,
    ROW_RANGE,
    SOFTMAX_INLINE,
    SOFTMAX_POINTERS,
    SOFTMAX_WHILE,
    SUMSQ,
    SUMSQ_EARLY_RETURN,
    SUMSQ_PARTIAL,
    plan,
)

from profiling.harness import tasks
from search.engine import forms
from search.engine.forms import (
    CONTRACTION,
    FULL_REDUCE,
    MAP,
    PERMUTATION,
    ROWS,
    WINDOW,
    Form,
    LoopHole,
    Refusal,
    Uniform,
    normalize,
)


def lifted(source: str, the_plan: dict) -> Form:
    form = forms.lift(source, the_plan)
    assert isinstance(form, Form), form
    return form


def refused(source: str, the_plan: dict) -> Refusal:
    form = forms.lift(source, the_plan)
    assert isinstance(form, Refusal), form.to_dict()
    return form


def axes(form: Form) -> list[tuple[str, str, str]]:
    return [(a.name, a.ctype, a.bound) for a in form.space]


def loops(form: Form) -> list[LoopHole]:
    return [s for s in form.steps if isinstance(s, LoopHole)]


def reductions(form: Form) -> list[tuple[str, str, str]]:
    return [(r.name, r.op, r.ctype) for loop in loops(form) for r in loop.reductions]


MAP_PLAN = plan("k", ["x", "y", "n"])
ROW_PLAN = plan("k", ["x", "y", "M", "N"], grid="cdiv(M, BLOCK)")


def map_kernel(body: str, before: str = "") -> str:
    return f"""extern "C" __global__ void k(const float* x, float* y, int n) {{
{before}    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        {body}
    }}
}}
"""


def row_kernel(loop: str, before: str = "float s = 0.0f;", after: str = "y[row] = s;") -> str:
    return f"""extern "C" __global__ void k(const float* x, float* y, int M, int N) {{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    {before}
    for (int j = 0; j < N; ++j) {{
        {loop}
    }}
    {after}
}}
"""


# --- the elementwise map ----------------------------------------------------------------------



@pytest.mark.parametrize("kernel, index", [
    (MAP_PLAIN, ("idx", "int", "n")),  # int idx = blockIdx.x * blockDim.x + threadIdx.x; if (idx < n) {...}
    (MAP_REVERSED, ("i", "int", "n")),  # threadIdx.x + blockDim.x * blockIdx.x, no braces
    (MAP_CAST, ("i", "long long", "n")),  # (long long)blockIdx.x * blockDim.x + ..., const, __restrict__
    pytest.param(MAP_HELPER_LOCALS, ("i", "int", "n")),  # via tid and bid
    (MAP_EARLY_RETURN, ("i", "int", "n")),  # if (i >= n) return;
    (MAP_GRID_STRIDE, ("i", "int", "n")),  # for (...; i < n; i += blockDim.x * gridDim.x)
    (MAP_RENAMED, ("gid", "unsigned int", "count")),  # if (count > gid), renamed parameters
    (MAP_SAXPY, ("i", "int", "n")),  # two inputs and a scalar parameter
    (MAP_IF_ELSE, ("i", "int", "n")),  # y written on both sides of an if/else
], ids=lambda v: v.name if hasattr(v, "name") else None)
def test_an_elementwise_map_lifts_whichever_way_its_index_is_written(kernel, index):
    form = lifted(kernel.source, kernel.plan)
    assert form.family == MAP and form.kernel == kernel.name
    assert axes(form) == [index]
    assert form.direct, "every access is p[i] of the one index and the write is unconditional"


def test_the_map_keeps_the_math_of_one_element_and_which_pointers_it_reads_and_writes():
    form = lifted(MAP_PLAIN.source, MAP_PLAIN.plan)
    assert form.body == "y[idx] = x[idx] > 0.0f ? x[idx] : 0.1f * x[idx];"
    assert (form.reads, form.writes) == (("x",), ("y",))
    assert form.params == ("x", "y", "n")
    assert form.signature.startswith('extern "C" __global__ void leaky_plain(')
    saxpy = lifted(MAP_SAXPY.source, MAP_SAXPY.plan)
    assert (saxpy.reads, saxpy.writes, saxpy.params) == (("x", "y"), ("z",), ("a", "x", "y", "z", "n"))


def test_a_grid_stride_loops_body_is_what_one_element_runs():
    form = lifted(MAP_GRID_STRIDE.source, MAP_GRID_STRIDE.plan)
    assert form.body == "y[i] = x[i] > 0.0f ? x[i] : 0.1f * x[i];"


def test_the_device_functions_the_math_calls_are_kept_as_written():
    form = lifted(MAP_RENAMED.source, MAP_RENAMED.plan)
    assert form.helpers.startswith("__device__ float leaky(float v)")
    assert form.body == "output[gid] = leaky(input[gid]);"


def test_a_2d_grid_is_two_axes_slowest_first_whichever_is_declared_first():
    form = lifted(MAP_2D_RAMP.source, MAP_2D_RAMP.plan)  # col from .x declared first, row from .y
    assert form.family == MAP and axes(form) == [("row", "int", "H"), ("col", "int", "W")]
    transpose = lifted(MAP_TRANSPOSE.source, MAP_TRANSPOSE.plan)  # early return with ||
    assert transpose.family == PERMUTATION and axes(transpose) == [("r", "int", "rows"), ("c", "int", "cols")]


@pytest.mark.parametrize("kernel", [MAP_2D_RAMP, MAP_TRANSPOSE, MAP_REVERSE], ids=lambda k: k.name)
def test_a_map_is_not_direct_when_an_access_is_not_p_i_of_the_one_index(kernel):
    form = lifted(kernel.source, kernel.plan)
    assert form.family in (MAP, PERMUTATION) and not form.direct


def test_a_2d_map_of_row_times_width_plus_column_alone_is_a_direct_map_of_the_flat_index():
    form = lifted(MAP_2D.source, MAP_2D.plan)
    assert form.direct and axes(form) == [("optiml_element", "long long", "(long long)(H) * (W)")]
    assert form.body == "y[optiml_element] = 3.0f * x[optiml_element] - 1.0f;"
    swapped = MAP_2D.source.replace("y[row * W + col]", "y[col + row * W]")
    assert lifted(swapped, MAP_2D.plan).direct
    # the width is not the column's bound: not the flat index
    assert not lifted(MAP_2D.source.replace("x[row * W + col]", "x[row * H + col]"), MAP_2D.plan).direct


@pytest.mark.parametrize("body, direct", [
    ("if (x[i] > 0.0f) y[i] = x[i];", False),  # y written on one path only
    ("if (x[i] > 0.0f) { y[i] = x[i]; } else { z[i] = x[i]; }", False),  # each on one path
    ("y[i] = x[i + 1];", False),
    ("const float* p = x; y[i] = p[i];", False),
    ("y[i] = (float)i;", False),
    ("y[i] = 0.1f * x[i]; if (x[i] > 0.0f) y[i] = x[i];", True),  # written first on every path
    ("if (x[i] > 0.0f) y[i] = x[i]; else y[i] = 0.0f; z[i] = y[i];", True),
    ("y[i] += 2.0f * x[i];", True),
])
def test_a_map_is_direct_when_every_access_is_p_i_and_every_path_writes_each_output(body, direct):
    source = map_kernel(body).replace("float* y, int n", "float* y, float* z, int n")
    assert lifted(source, plan("k", ["x", "y", "z", "n"])).direct is direct


def test_uniform_declarations_before_the_index_are_the_prelude():
    form = lifted(map_kernel("y[i] = x[i] * scale;", before="    const float scale = 2.0f / n;\n"), MAP_PLAN)
    assert form.prelude == "const float scale = 2.0f / n;" and form.body == "y[i] = x[i] * scale;"


# --- the row map-reduce -----------------------------------------------------------------------


@pytest.mark.parametrize("kernel, row, count, found", [
    # pointer offsets (const float* in = x + row * N), fmaxf and +=, for loops three ways
    (SOFTMAX_POINTERS, ("row", "long long", "M"), 3, [("m", "max", "float"), ("s", "sum", "float")]),
    # inline x[row * N + j], `if (v > best) best = v;`, `total = total + e`
    (SOFTMAX_INLINE, ("row", "int", "M"), 3, [("best", "max", "float"), ("total", "sum", "float")]),
    # while loops, `if (mx < v) mx = v;`
    (SOFTMAX_WHILE, ("row", "int", "M"), 3, [("mx", "max", "float"), ("sum", "sum", "float")]),
    # a while loop with `ss = ss + v * v`, then a writing for loop
    (RMSNORM, ("row", "int", "M"), 2, [("ss", "sum", "float")]),
    # fminf and the if-form of max in one loop
    (ROW_RANGE, ("row", "int", "M"), 1, [("a", "min", "float"), ("b", "max", "float")]),
    # perfect nests for c, for hw (GroupNorm)
    (GROUPNORM, ("g", "int", "G"), 3, [("s", "sum", "float"), ("q", "sum", "float")]),
    # sum += A[row * K + k] * x[k]
    (GEMV, ("row", "int", "M"), 1, [("sum", "sum", "float")]),
], ids=lambda v: v.name if hasattr(v, "name") else None)
def test_a_thread_per_row_kernel_lifts_to_its_loops_and_reductions(kernel, row, count, found):
    form = lifted(kernel.source, kernel.plan)
    assert form.family == ROWS and axes(form) == [row]
    assert len(loops(form)) == count
    assert reductions(form) == found
    assert form.holes()["loops"] == count


def test_a_perfect_nest_is_one_loop_over_the_product_of_its_bounds():
    form = lifted(GROUPNORM.source, GROUPNORM.plan)
    for loop in loops(form):
        assert [(v.name, v.bound) for v in loop.variables] == [("c", "C"), ("p", "HW")]
    assert [loop.writes_memory for loop in loops(form)] == [False, False, True]


def test_a_while_loops_counter_is_the_loops_variable_and_its_step_is_not_the_math():
    form = lifted(SOFTMAX_WHILE.source, SOFTMAX_WHILE.plan)
    assert [[(v.name, v.ctype, v.bound) for v in loop.variables] for loop in loops(form)] == [
        [("j", "int", "N")], [("k", "int", "N")], [("c", "int", "N")]]
    assert "++j" not in loops(form)[0].body and "k++" not in loops(form)[1].body


def test_pointers_read_and_written_through_row_offsets_are_the_parameters():
    form = lifted(SOFTMAX_POINTERS.source, SOFTMAX_POINTERS.plan)
    assert (form.reads, form.writes) == (("x",), ("y",))


def test_statements_between_the_loops_are_uniform_and_say_whether_they_write_memory():
    form = lifted(GEMV.source, GEMV.plan)
    uniform = [(s.text, s.writes) for s in form.steps if isinstance(s, Uniform)]
    assert uniform == [("float sum = 0.0f;", False), ("y[row] = sum;", True)]


def test_int_and_double_sums_are_reductions_with_their_identities():
    form = lifted(row_kernel("c += x[row * N + j] > 0.0f;", before="int c = 0;", after="y[row] = c;"),
                  ROW_PLAN)
    assert reductions(form) == [("c", "sum", "int")] and loops(form)[0].reductions[0].identity == "0"
    form = lifted(row_kernel("d += x[row * N + j];", before="double d = 0.0;", after="y[row] = d;"), ROW_PLAN)
    assert reductions(form) == [("d", "sum", "double")]


# --- the full reduction -----------------------------------------------------------------------


@pytest.mark.parametrize("kernel, body, term, into, index", [
    (SUMSQ, "float d = x[i];", "d * d", "out", ("i", "int", "n")),
    (SUMSQ_EARLY_RETURN, "", "x[i] * x[i]", "total", ("i", "long long", "n")),  # *total = 0; &total[0]
    (SUMSQ_PARTIAL, "const float v = x[i];", "v * v", "out", ("i", "int", "n")),  # a partial, one atomic
], ids=lambda v: v.name if hasattr(v, "name") else None)
def test_a_zeroing_launch_then_atomic_adds_of_each_elements_term_is_a_full_reduction(kernel, body, term, into,
                                                                                       index):
    form = lifted(kernel.source, kernel.plan)
    assert form.family == FULL_REDUCE and form.kernel == kernel.name
    assert (form.body, form.total, form.into, axes(form)) == (body, term, into, [index])
    assert form.writes == (into,)


def test_a_partial_added_over_a_uniform_factor_keeps_the_factor_for_the_blocks_sum():
    source = SUMSQ_PARTIAL.source.replace("atomicAdd(out, partial);", "atomicAdd(out, partial / n);")
    assert lifted(source, SUMSQ_PARTIAL.plan).finish == "optiml_sum / n"
    source = SUMSQ_PARTIAL.source.replace("atomicAdd(out, partial);", "atomicAdd(out, partial * partial);")
    assert "not the partial times or over a uniform factor" in refused(source, SUMSQ_PARTIAL.plan).reason


# --- kernels that must not lift ----------------------------------------------------------------

MATMUL = """extern "C" __global__ void k(const float* A, const float* B, float* C, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
"""
MATMUL_PLAN = plan("k", ["A", "B", "C", "M", "N", "K"], grid=["cdiv(N, 16)", "cdiv(M, 16)"], block=[16, 16])
# A 2-D kernel whose loop keeps two sums: not one product into one accumulator (rows, then).
TWO_SUMS = MATMUL.replace("for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];",
                          "float other = 0.0f;\n        for (int k = 0; k < K; ++k) { acc += A[row * K + k]; "
                          "other += B[k * N + col]; }")
UNBOUNDED = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = x[i];
}
"""
WITH_ELSE = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
    else return;
}
"""
ATOMIC = map_kernel("atomicAdd(y, x[i] * x[i]);")
ZERO = 'extern "C" __global__ void zero(float* y) { y[0] = 0.0f; }\n'


@pytest.mark.parametrize("source, the_plan, cause", [
    pytest.param(map_kernel("__shared__ float t[32]; t[0] = x[i]; y[i] = t[0];"), MAP_PLAN, "__shared__",
                 id="shared memory"),
    pytest.param(map_kernel("float v = x[i]; __syncthreads(); y[i] = v;"), MAP_PLAN, "__syncthreads",
                 id="a barrier"),
    pytest.param(map_kernel("y[i] = __shfl_down_sync(0xffffffffu, x[i], 1);"), MAP_PLAN, "__shfl_down_sync",
                 id="a shuffle"),
    pytest.param(map_kernel("y[i] = threadIdx.x;"), MAP_PLAN, "reads threadIdx",
                 id="the thread index in the math"),
    pytest.param(map_kernel("y[i] = x[i] * blockDim.x;"), MAP_PLAN, "reads blockDim",
                 id="the block size in the math"),
    pytest.param(map_kernel("*(y + i) = x[i];"), MAP_PLAN, "writes through *",
                 id="a write through a pointer"),
    pytest.param(map_kernel("static float c = 1.0f; y[i] = x[i] * c;"), MAP_PLAN, "static",
                 id="a static local"),
    pytest.param(row_kernel("if (x[row * N + j] > 0.0f) break; s += x[row * N + j];"), ROW_PLAN,
                 "break statement", id="a break in the row loop"),
    pytest.param(row_kernel("s += x[row * N + j] * s;"), ROW_PLAN, "s carries a value",
                 id="an accumulator read in its own update"),
    # (a running sum written out is a scan: test_forms_scans.py)
    pytest.param(row_kernel("s += x[row * N + j]; y[row * N + j] = s; t += s;",
                            before="float s = 0.0f, t = 0.0f;", after="y[row] = t;"), ROW_PLAN,
                 "reads the accumulator s", id="a running sum read by another sum"),
    pytest.param(row_kernel("y[row * N + j] = x[row * N + j] - prev; prev = x[row * N + j];",
                            before="float prev = 0.0f;", after=""), ROW_PLAN,
                 "prev carries a value from one iteration to the next", id="a loop-carried scalar"),
    pytest.param(row_kernel("y[row] = x[row * N + j];", before="", after=""), ROW_PLAN,
                 "every iteration writes the same element", id="a loop writing one element"),
    pytest.param(row_kernel("if (x[row * N + j] > best) { best = x[row * N + j]; arg = arg + 1; }",
                            before="float best = -INFINITY; int arg = 0;", after="y[row] = arg;"), ROW_PLAN,
                 "carries a value", id="a max that also counts its rises (no argmax)"),
    pytest.param(row_kernel("if (x[row * N + j] > best) { best = x[row * N + j]; arg = j; }",
                            before="double best = -INFINITY; int arg = 0;", after="y[row] = arg;"), ROW_PLAN,
                 "arg-reduction of double", id="an argmax over double"),
    pytest.param(row_kernel("m = fmaxf(m, x[row * N + j]);", before="double m = 0.0;", after="y[row] = m;"),
                 ROW_PLAN, "max over double", id="a max over double"),
    pytest.param(row_kernel("if (x[row * N + j] > s) s += x[row * N + j];"), ROW_PLAN,
                 "carries a value", id="a sum under a test that reads the sum"),
    pytest.param(row_kernel("s += x[row * N + j];").replace("++j", "j += 2"), ROW_PLAN,
                 "steps by j += 2", id="a loop stepping by two"),
    pytest.param(row_kernel("for (int k = 0; k < j; ++k) s += x[row * N + k];"), ROW_PLAN,
                 "bound depends on an outer counter", id="a triangular nest"),
    pytest.param(UNBOUNDED, MAP_PLAN, "bounds check", id="no bounds check"),
    pytest.param(WITH_ELSE, MAP_PLAN, "else branch", id="a bounds check with an else"),
    pytest.param(ATOMIC, MAP_PLAN, "does not zero", id="an atomicAdd without a zeroing launch"),
    pytest.param(ZERO + map_kernel("if (x[i] > 0.0f) atomicAdd(y, x[i]); else atomicAdd(y, -x[i]);"),
                 plan("k", ["x", "y", "n"], zero=("zero", "y")), "not a plain atomicAdd(out, term)",
                 id="a conditional atomicAdd with an else"),
    pytest.param(ZERO + map_kernel("y[i] = x[i];"), plan("k", ["x", "y", "n"], zero=("zero", "y")),
                 "no atomic accumulates into", id="a zeroing launch and no atomic"),
    pytest.param(map_kernel("y[i] = x[i];"), {**MAP_PLAN, "launches": MAP_PLAN["launches"] * 3}, "3 launches",
                 id="three launches"),
    pytest.param(map_kernel("y[i] = x[i];"), plan("other", ["x", "y", "n"]), "no extern \"C\" kernel named",
                 id="the plan names another kernel"),
])
def test_a_kernel_the_forms_cannot_vouch_for_is_refused_with_its_cause(source, the_plan, cause):
    assert cause in refused(source, the_plan).reason


def test_a_refusal_says_which_family_it_looked_like():
    # a 2-D kernel neither a product nor rows (its loop steps by two): the product's refusal
    assert refused(TWO_SUMS.replace("++k", "k += 2"), MATMUL_PLAN).family == CONTRACTION
    assert lifted(MATMUL, MATMUL_PLAN).family == CONTRACTION
    assert refused(ATOMIC, MAP_PLAN).family == FULL_REDUCE
    assert refused(row_kernel("y[row] = x[row * N + j];", before="", after=""), ROW_PLAN).family == ROWS


# --- the suite ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task, family, cause", [
    ("relu", MAP, None),
    ("softmax", ROWS, None),
    ("layernorm", ROWS, None),
    ("cross_entropy", ROWS, None),
    ("sgemm", CONTRACTION, None),
    ("conv2d", CONTRACTION, None),  # a nest over channels and taps (implicit GEMM)
    ("self_attention", None, "3 launches"),
    ("maxpool3d", WINDOW, None),  # taps of fixed length around the output (forms/windows.py)
    ("topk", None, "not a perfect nest"),
    ("reduce_sum", FULL_REDUCE, None),  # the textbook tree into an atomic (forms/block_reduce.py)
])
def test_every_suite_tasks_naive_kernel_lifts_to_its_family_or_refuses(task, family, cause):
    spec = tasks.get(task)
    form = forms.lift(spec.naive_source, spec.naive_plan)
    if family is None:
        assert isinstance(form, Refusal) and cause in form.reason, form
    else:
        assert isinstance(form, Form) and form.family == family, form


def test_the_suites_row_kernels_lift_to_the_reductions_they_compute():
    found = {name: reductions(lifted(tasks.get(name).naive_source, tasks.get(name).naive_plan))
             for name in ("softmax", "layernorm", "cross_entropy")}
    assert found == {
        "softmax": [("row_max", "max", "float"), ("sum", "sum", "float")],
        "layernorm": [("sum", "sum", "float"), ("squares", "sum", "float")],
        "cross_entropy": [("row_max", "max", "float"), ("sum", "sum", "float")],
    }


# --- minimal reproducers of bugs found in search/engine/forms (fixed unless marked xfail) ---


@pytest.mark.parametrize("step", ["i += stride", "i = i + stride", "i = stride + i",
                                  "i += gridDim.x * blockDim.x"])
def test_a_grid_stride_loop_stepping_by_a_stride_local_lifts(step):
    source = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; STEP) y[i] = x[i];
}
""".replace("STEP", step)
    assert lifted(source, MAP_PLAN).family == MAP


def test_a_grid_stride_loop_stepping_by_anything_else_is_refused():
    source = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int stride = blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = x[i];
}
"""
    assert "not blockDim.x * gridDim.x" in refused(source, MAP_PLAN).reason


def test_a_map_reading_a_scalar_from_memory_is_not_direct():
    source = """extern "C" __global__ void k(const float* x, const float* s, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s[0];
}
"""
    assert not lifted(source, plan("k", ["x", "s", "y", "n"])).direct


def test_a_map_taking_the_address_of_an_element_is_not_direct():
    assert not lifted(map_kernel("y[i] = 2.0f * __ldg(&x[i]);"), MAP_PLAN).direct


def test_an_increment_reads_what_it_writes():
    source = """extern "C" __global__ void k(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i]++;
}
"""
    assert lifted(source, plan("k", ["y", "n"])).reads == ("y",)


def test_a_dependence_through_memory_between_iterations_is_refused():
    cumsum = row_kernel("y[row * N + j] = x[row * N + j] + (j > 0 ? y[row * N + j - 1] : 0.0f);",
                        before="", after="")
    refused(cumsum, ROW_PLAN)


def test_an_update_reading_another_accumulator_of_its_loop_is_refused():
    refused(row_kernel("m = fmaxf(m, x[row * N + j]); s += m;",
                       before="float m = -INFINITY; float s = 0.0f;"), ROW_PLAN)


def test_an_if_form_update_whose_value_reads_the_accumulator_is_refused():
    refused(row_kernel("if (m + x[row * N + j] > m) m = m + x[row * N + j];", before="float m = 0.0f;",
                       after="y[row] = m;"), ROW_PLAN)


def test_a_zeroing_launch_on_another_buffer_is_not_a_full_reduction():
    refused(ZERO + ATOMIC, plan("k", ["x", "y", "n"], zero=("zero", "x")))


def test_shared_memory_at_the_top_of_the_kernel_is_named_in_the_refusal():
    source = map_kernel("t[threadIdx.x] = x[i]; y[i] = t[threadIdx.x];",
                        before="    __shared__ float t[256];\n")
    assert "__shared__" in refused(source, MAP_PLAN).reason


def test_an_atomic_under_a_test_is_a_term_that_is_zero_where_the_test_fails():
    form = forms.lift(ZERO + map_kernel("if (x[i] > 0.0f) { atomicAdd(y, x[i]); }"),
                      plan("k", ["x", "y", "n"], zero=("zero", "y")))
    assert isinstance(form, Form) and form.family == FULL_REDUCE, form
    assert form.total == "((x[i] > 0.0f) ? (x[i]) : 0.0f)"


def test_a_2d_kernel_that_is_no_product_lifts_as_rows_over_its_grids_axes():
    form = forms.lift(TWO_SUMS, MATMUL_PLAN)
    assert isinstance(form, Form) and form.family == ROWS, form
    assert [axis.name for axis in form.space] == ["row", "col"]
    assert form.holes()["rows"] == "M * N"
    reductions = [r.name for step in form.steps if isinstance(step, LoopHole) for r in step.reductions]
    assert reductions == ["acc", "other"]


# --- accessor macros ----------------------------------------------------------------------------

_ACCESSOR_MEAN = """#define AT(r, c) x[(r) * D + (c)]

extern "C" __global__ void mean_dim0(const float* x, float* m, int N, int D) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= D) return;
    float acc = 0.0f;
    for (int r = 0; r < N; ++r) acc += AT(r, col);
    m[col] = acc / (float)N;
}
"""


def test_a_macro_whose_body_is_a_subscript_is_read_as_the_access_it_hides():
    from search.engine.forms import strides
    from search.engine.forms.normalize import accessor_macros_expanded

    form = lifted(_ACCESSOR_MEAN, plan("mean_dim0", ["x", "m", "N", "D"], grid="cdiv(D, BLOCK)"))
    assert form.family == ROWS and form.reads == ("x",)  # the macro's read is seen
    loop = next(step for step in form.steps if isinstance(step, LoopHole))
    assert "scattered" in strides.contiguity_problem(loop)  # a column walked down: not block_per_row's
    assert strides.neighbour_problem(form) is None  # but split_strided's: neighbours read side by side
    assert "acc += x[((r)) * D + ((col))];" in accessor_macros_expanded(_ACCESSOR_MEAN)
    two = "#define BOTH(i) a[i] + b[i]\n__global__ void k(float* a, float* b) { a[0] = BOTH(1); }\n"
    assert accessor_macros_expanded(two) == two  # two accesses: not one subscript, left alone


GRID_STRIDE_WHILE = """extern "C" __global__ void hardswish(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    while (i < n) {
        float v = x[i];
        y[i] = v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;
        i += blockDim.x * gridDim.x;
    }
}
"""


def test_a_grid_stride_while_loop_is_the_grid_stride_for_it_stands_for():
    form = lifted(GRID_STRIDE_WHILE, plan("hardswish", ["x", "y", "n"]))
    assert form.family == forms.MAP and form.direct
    # a stride the body changes is no grid stride: the loop stays a while (refused)
    wider = GRID_STRIDE_WHILE.replace("int i =", "int s = blockDim.x * gridDim.x;\n    int i =").replace(
        "i += blockDim.x * gridDim.x;", "s = s + 1;\n        i += s;")
    assert "while (i < n)" in wider
    assert isinstance(forms.lift(wider, plan("hardswish", ["x", "y", "n"])), forms.Refusal)
    # nor is a bound the body changes: the loop would not walk 0..n
    shrinking = GRID_STRIDE_WHILE.replace("float v = x[i];", "float v = x[i]; n = n - 1;")
    refused = forms.lift(shrinking, plan("hardswish", ["x", "y", "n"]))
    assert isinstance(refused, forms.Refusal) and "changes n" in refused.reason


RUNNING_MAX_WHILE = """extern "C" __global__ void k(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    int j = 0;
    float m = -INFINITY;
    while (j < N) {
        m = fmaxf(m, x[row * N + j]);
        y[row * N + j] = m;
        j++;
    }
}
"""


def test_a_counter_declared_before_other_statements_still_counts_its_while_loop():
    assert lifted(RUNNING_MAX_WHILE, ROW_PLAN).family == forms.SCAN
    # read between its declaration and its loop, the counter is not the loop's alone
    read_before = RUNNING_MAX_WHILE.replace("float m = -INFINITY;", "float m = x[row * N + j];")
    assert isinstance(forms.lift(read_before, ROW_PLAN), forms.Refusal)


def test_a_skeleton_given_a_refusal_says_so_instead_of_failing():
    from search.engine.forms.skeletons import SKELETONS

    refusal = forms.Refusal("a reason", family=forms.ROWS)
    for skeleton in SKELETONS:
        assert "no form to emit: a reason" in skeleton.emit(refusal, ROW_PLAN, None)


# one counter, declared once and set again for a second loop, as people often write it
LOGSUMEXP_REUSED_COUNTER = """extern "C" __global__ void k(const float* x, float* y, int M, int N) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < M) {
        const float* row = x + r * N;
        float m = -INFINITY;
        int j = 0;
        while (j < N) { m = fmaxf(m, row[j]); j++; }
        float s = 0.0f;
        j = 0;
        while (j < N) { s += expf(row[j] - m); j++; }
        y[r] = m + logf(s);
    }
}
"""


def test_a_counter_set_again_for_a_second_loop_counts_both_loops():
    form = lifted(LOGSUMEXP_REUSED_COUNTER, ROW_PLAN)
    assert form.family == forms.ROWS
    assert [[(v.name, v.ctype, v.bound) for v in loop.variables] for loop in loops(form)] == [
        [("j", "int", "N")], [("j", "int", "N")]]


@pytest.mark.parametrize("after, why", [
    ("y[r] = m + logf(s) + (float)j;", "the counter's value after the second loop is read"),
    ("if (j > 0) s = s + 1.0f;\n        y[r] = m + logf(s);", "read before it is set again"),
])
def test_a_counter_whose_value_after_its_loop_is_read_keeps_its_while_loop(after, why):
    source = LOGSUMEXP_REUSED_COUNTER.replace("y[r] = m + logf(s);", after)
    assert source != LOGSUMEXP_REUSED_COUNTER, why
    normalized = normalize.counted_whiles_as_fors(source)
    assert "while (j < N)" in normalized, why


def test_a_counter_read_between_its_loops_keeps_the_first_loop_a_while():
    source = LOGSUMEXP_REUSED_COUNTER.replace("float s = 0.0f;", "float s = (float)j;")
    normalized = normalize.counted_whiles_as_fors(source)
    assert normalized.count("while (j < N)") == 1 and "for (int j = 0; j < N; ++j)" in normalized
    assert "float s = (float)j;" in normalized  # j still declared for it: the source compiles as before


# a block of one thread a row, as people launch a first kernel: <<<M, 1>>>
ROWSUM_BLOCK_A_ROW = """extern "C" __global__ void k(const float* x, float* y, int M, int N) {
    int r = blockIdx.x;
    float s = 0.0f;
    for (int j = 0; j < N; j++) s += x[r * N + j];
    y[r] = s;
}
"""
ONE_THREAD_BLOCKS = plan("k", ["x", "y", "M", "N"], grid="M", block="1")


def test_blocks_of_one_thread_index_their_rows_by_block_alone():
    form = lifted(ROWSUM_BLOCK_A_ROW, ONE_THREAD_BLOCKS)
    assert form.family == forms.ROWS
    assert [(a.name, a.bound) for a in form.space] == [("r", "M")]
    assert [[(v.name, v.bound) for v in loop.variables] for loop in loops(form)] == [[("j", "N")]]


def test_blocks_of_many_threads_indexed_by_block_alone_do_not_lift():
    """Every thread of a block would run the row again: a form of one point a row would
    not be the kernel (with an atomic, it would add a block's worth of times)."""
    wide = {**ONE_THREAD_BLOCKS, "launches": [{**ONE_THREAD_BLOCKS["launches"][0], "block": ["BLOCK"]}]}
    assert isinstance(forms.lift(ROWSUM_BLOCK_A_ROW, wide), forms.Refusal)


def test_a_map_of_one_thread_blocks_is_a_map():
    source = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x;
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
    form = lifted(source, plan("k", ["x", "y", "n"], grid="n", block="1"))
    assert form.family == forms.MAP and [(a.name, a.bound) for a in form.space] == [("i", "n")]
