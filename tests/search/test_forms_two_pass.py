"""A reduction in two launches (search/engine/forms/two_pass.py): partials per block (or
per thread) into a scratch buffer, then one thread or one block adding them into the
output, lifts as the full reduction it computes, in the styles people write it; the
family's skeleton computes the reference from it on the CPU emulator; a second launch
that does more than add the partials, or a first that could leave a slot unwritten or
write it twice, is refused with the reason."""

import shutil

import numpy as np
import pytest
from cuda_on_cpu import mismatch_at_l0, skeleton_mismatch

from bench.newcomer_tasks._make import T, task
from bench.newcomer_tasks_2 import dot
from profiling.harness.candidate import Candidate
from search.engine import forms
from search.engine.forms import splice
from search.engine.forms.skeletons import by_name

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

# A sum of squares: a halving `for` over blockDim.x, thread 0 storing the block's partial;
# the partials added by one block of 128 threads striding over them and combining them in
# shared memory.
SQUARES = """extern "C" __global__ void squares_partial(const float* x, float* parts, int n) {
    __shared__ float buf[256];
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += x[i] * x[i];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) parts[blockIdx.x] = buf[0];
}

extern "C" __global__ void squares_total(const float* parts, float* total, int count) {
    __shared__ float sh[128];
    int tid = threadIdx.x;
    float s = 0.0f;
    for (int k = tid; k < count; k += blockDim.x) s += parts[k];
    sh[tid] = s;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (tid < h) sh[tid] += sh[tid + h];
        __syncthreads();
    }
    if (tid == 0) total[0] = sh[0];
}
"""
BLOCKS = "min(64, cdiv(n, 256))"
SQUARES_PLAN = {"launches": [
    {"kernel": "squares_partial", "grid": [BLOCKS], "block": [256], "shared_bytes": 0,
     "args": ["x", "parts", "n"]},
    {"kernel": "squares_total", "grid": [1], "block": [128], "shared_bytes": 0,
     "args": ["parts", "total", BLOCKS]}],
    "scratch": [{"name": "parts", "dtype": "float32", "count": BLOCKS}], "tunables": {}}

# Each thread's own partial (its grid-stride sum) in its slot, through an index local;
# one thread adds them from the first, `*out = s`, the count spelt another way.
OWN = """#define THREADS 128
extern "C" __global__ void abs_partial(const float* x, float* partial, int n) {
    int gid = blockIdx.x * THREADS + threadIdx.x;
    float acc = 0.0f;
    for (int i = gid; i < n; i += THREADS * gridDim.x) acc += fabsf(x[i]);
    partial[gid] = acc;
}

extern "C" __global__ void abs_total(const float* partial, float* out, int count) {
    float s = partial[0];
    for (int k = 1; k < count; ++k) s = s + partial[k];
    *out = s;
}
"""
OWN_PLAN = {"launches": [
    {"kernel": "abs_partial", "grid": ["GRID"], "block": [128], "shared_bytes": 0,
     "args": ["x", "partial", "n"]},
    {"kernel": "abs_total", "grid": [1], "block": [1], "shared_bytes": 0,
     "args": ["partial", "out", "128 * GRID"]}],
    "scratch": [{"name": "partial", "dtype": "float32", "count": "GRID * 128"}], "tunables": {"GRID": 24}}


def _task(name, outputs, summed):
    def ref(i, s):
        return {outputs: np.array([summed(i["x"].astype(np.float64))], dtype=np.float32)}
    return task(name, {"n": 1 << 22}, [{"n": 1}, {"n": 999}, {"n": 40003}], [T("x", ("n",))],
                [T(outputs, (1,))], ref, "", None, None, None, None)


SQUARES_TASK = _task("squares", "total", lambda x: float((x * x).sum()))
OWN_TASK = _task("abs_sum", "out", lambda x: float(np.abs(x).sum()))


@pytest.mark.parametrize("source, the_plan, into, total", [
    (dot.SRC, dot.TASK.naive_plan, "out", "a[i] * b[i]"),
    (SQUARES, SQUARES_PLAN, "total", "x[i] * x[i]"),
    (OWN, OWN_PLAN, "out", "fabsf(x[i])"),
], ids=["dot-while-tree-one-thread", "for-tree-one-block", "own-partials-one-thread"])
def test_partials_then_their_sum_lift_as_one_full_reduction(source, the_plan, into, total):
    form = forms.lift(source, the_plan)
    assert isinstance(form, forms.Form), form
    assert form.family == forms.FULL_REDUCE and form.into == into and form.total == total
    # the kernel's partials parameter is passed the output now
    assert into in form.launch_args and not set(form.launch_args) & {"partial", "parts"}


@needs_gxx
@pytest.mark.parametrize("source, the_plan, the_task", [
    (dot.SRC, dot.TASK.naive_plan, dot.TASK), (SQUARES, SQUARES_PLAN, SQUARES_TASK),
    (OWN, OWN_PLAN, OWN_TASK),
], ids=["dot", "squares", "own-partials"])
def test_the_full_reductions_skeleton_computes_the_reference_from_the_two_launches(source, the_plan, the_task,
                                                                                    tmp_path):
    assert skeleton_mismatch(source, the_plan, the_task, "full.grid_stride_accumulate", tmp_path) is None


def _total(change):
    return SQUARES.replace(*change)


def _launch(plan, index, **fields):
    launches = [dict(launch) for launch in plan["launches"]]
    launches[index].update(fields)
    return {**plan, "launches": launches}


ONE_THREAD_TOTAL = OWN.replace("float s = partial[0];\n    for (int k = 1;",
                               "float s = 0.0f;\n    for (int k = 0;")
NOT_ONLY_THEIR_SUM = {
    "stores `*out = s / count;`, not the partials' sum": (
        ONE_THREAD_TOTAL.replace("*out = s;", "*out = s / count;"), OWN_PLAN),
    "combines the partials by max": (
        ONE_THREAD_TOTAL.replace("s = s + partial[k];", "s = fmaxf(s, partial[k]);"), OWN_PLAN),
    "starts at `float s = 1.0f;`": (ONE_THREAD_TOTAL.replace("float s = 0.0f;", "float s = 1.0f;"), OWN_PLAN),
    "adds cdiv(n, 256) partials; the first writes each block's, min(64, cdiv(n, 256))": (
        SQUARES, _launch(SQUARES_PLAN, 1, args=["parts", "total", "cdiv(n, 256)"])),
    "adds 128 * GRID - 1 partials": (OWN, _launch(OWN_PLAN, 1, args=["partial", "out", "128 * GRID - 1"])),
    "runs a grid of [2]": (OWN, _launch(OWN_PLAN, 1, grid=[2])),
    # every thread adds its own partial sums: blockDim.x copies of the total
    "do not add the partials as one thread or one block's reduction": (OWN, _launch(OWN_PLAN, 1, block=[32])),
    "every thread of a block stores the block's partial": (
        _total(("if (threadIdx.x == 0) parts[blockIdx.x] = buf[0];", "parts[blockIdx.x] = buf[0];")),
        SQUARES_PLAN),
    # the blocks past the data leave their slots as they were
    "returns early": (_total(("    float v = 0.0f;\n", "    if (blockIdx.x * blockDim.x >= n) return;\n"
                                                       "    float v = 0.0f;\n")), SQUARES_PLAN),
    "under a test other than thread 0's": (
        _total(("if (threadIdx.x == 0) parts[blockIdx.x]", "if (threadIdx.x == 1) parts[blockIdx.x]")),
        SQUARES_PLAN),
    # the grid-stride loop moved `i` on: the slot after the loop is not the thread's own
    "is not the block's (blockIdx.x) nor the thread's own": (
        dot.SRC.replace("if (tid == 0) partial[blockIdx.x] = cache[0];",
                        "if (tid == 0) partial[i] = cache[0];"),
        dot.TASK.naive_plan),
    # the blocks keep their maximum, which the second launch then adds: not one sum
    "the first launch, its partials added into total": (
        _total(("buf[threadIdx.x] += buf[threadIdx.x + s];",
                "buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);")), SQUARES_PLAN),
}


@pytest.mark.parametrize("reason", list(NOT_ONLY_THEIR_SUM))
def test_two_launches_that_do_more_than_add_partials_are_refused_with_the_reason(reason):
    source, the_plan = NOT_ONLY_THEIR_SUM[reason]
    form = forms.lift(source, the_plan)
    assert isinstance(form, forms.Refusal), form
    assert form.family == forms.FULL_REDUCE and "partials then their sum" in form.reason
    assert reason in form.reason, form.reason


def test_two_launches_without_a_scratch_buffer_between_them_are_read_as_before():
    plan = {**OWN_PLAN, "scratch": []}  # `partial` is then an output of the task: its values matter
    form = forms.lift(OWN, plan)
    assert isinstance(form, forms.Refusal) and "partials then their sum" not in form.reason


# The sum of squares inside a longer plan: its total, in scratch, divides every element.
NORMALIZED = SQUARES + """
extern "C" __global__ void divide(const float* x, const float* total, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / sqrtf(total[0]);
}
"""
NORMALIZED_PLAN = {"launches": [*SQUARES_PLAN["launches"],
                                {"kernel": "divide", "grid": ["cdiv(n, 256)"], "block": [256],
                                 "shared_bytes": 0, "args": ["x", "total", "y", "n"]}],
                   "scratch": [*SQUARES_PLAN["scratch"], {"name": "total", "dtype": "float32", "count": 1}],
                   "tunables": {}}


def _normalized_task():
    def ref(i, s):
        x = i["x"].astype(np.float64)
        return {"y": (x / np.sqrt((x * x).sum())).astype(np.float32)}
    return task("normalized", {"n": 1 << 22}, [{"n": 1}, {"n": 999}, {"n": 40003}], [T("x", ("n",))],
                [T("y", ("n",))], ref, "", None, None, None, None)


def _normalized_spliced(the_task):
    form = dict(splice.per_launch(NORMALIZED, NORMALIZED_PLAN))[1]
    emitted = by_name("full.grid_stride_accumulate").emit(
        form, splice.sub_plan(NORMALIZED_PLAN, 1, NORMALIZED), the_task)
    return form, splice.splice(NORMALIZED, NORMALIZED_PLAN, 1, form, emitted)


def test_the_two_launches_inside_a_longer_plan_lift_together_and_the_skeleton_replaces_both():
    assert splice.first_launch(NORMALIZED, NORMALIZED_PLAN, 1) == 0
    form, (source, new_plan) = _normalized_spliced(_normalized_task())
    assert form.family == forms.FULL_REDUCE and form.launch_args == ("x", "total", "n")
    kernels = [launch["kernel"] for launch in new_plan["launches"]]
    assert kernels == ["squares_partial_zero_total", "squares_partial", "divide"]
    assert "squares_total" not in source and source.count("void squares_partial(") == 1


@needs_gxx
def test_the_spliced_longer_plan_computes_the_reference_on_the_cpu(tmp_path):
    the_task = _normalized_task()
    _, (source, new_plan) = _normalized_spliced(the_task)
    candidate = Candidate.from_source_and_plan(source, new_plan)
    assert mismatch_at_l0(the_task, candidate, tmp_path) is None
