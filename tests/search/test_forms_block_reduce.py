"""A block's reduction through shared memory (search/engine/forms/block_reduce.py): the
tutorial's tree reduction into an atomic lifts as the full reduction it computes, a row
per block whose threads stride over it and combine in shared memory lifts as the row
map-reduce, and the families' skeletons compute the reference from them on the CPU
emulator; a combine that could compute something else is left as written."""

import shutil

import pytest
from cuda_on_cpu import mismatch_at_l0, skeleton_mismatch
from forms_kernels import plan

from bench.newcomer_tasks import l1sum, rowmax, softmax_shared
from profiling.harness.candidate import Candidate
from search.engine import forms
from search.engine.forms.block_reduce import block_reduced
from search.engine.forms.skeletons import by_name

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

# The newcomer tasks' kernels (bench/newcomer_tasks/): the tutorial's tree into an atomic,
# and a row per block whose thread 0 combines the shared array in a loop.
ABS_SUM, ABS_SUM_PLAN, ABS_SUM_TASK = l1sum.SRC, l1sum.TASK.naive_plan, l1sum.TASK
ROW_MAX, ROW_MAX_PLAN, ROW_MAX_TASK = rowmax.SRC, rowmax.TASK.naive_plan, rowmax.TASK
# The same row, summed by a halving tree, with an if/else store and an epilogue.
ROW_MEAN = """extern "C" __global__ void row_mean(const float* x, float* out, int R, int C) {
    __shared__ float part[128];
    int row = blockIdx.x;
    float s = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += x[row * C + c];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[row] = part[0] / C;
}
"""
ROW_MEAN_PLAN = plan("row_mean", ["x", "out", "R", "C"], grid=["R"], block=[128])

def test_the_tree_into_an_atomic_is_each_threads_own_atomic_add():
    source, launch = block_reduced(ABS_SUM, ABS_SUM_PLAN["launches"][1], ABS_SUM_PLAN["tunables"])
    assert "if (i < n) atomicAdd(out, fabsf(x[i]));" in source and "__shared__" not in source
    assert launch["block"] == [256]  # every thread still runs
    assert forms.lift(ABS_SUM, ABS_SUM_PLAN).family == forms.FULL_REDUCE


@pytest.mark.parametrize("store, written", [
    ("if (i < n) buf[tid] = fabsf(x[i]);\n    else buf[tid] = 0.0f;",
     "if (i < n) atomicAdd(out, fabsf(x[i]));"),
    ("float v = 0.0f;\n    for (int j = i; j < n; j += blockDim.x * gridDim.x) v += fabsf(x[j]);\n"
     "    buf[tid] = v;", "atomicAdd(out, v);"),
], ids=["if-else", "grid-stride-partial"])
def test_other_stores_into_the_tree_are_read_the_same_way(store, written):
    source = ABS_SUM.replace("buf[tid] = (i < n) ? fabsf(x[i]) : 0.0f;", store)
    rewritten, _ = block_reduced(source, ABS_SUM_PLAN["launches"][1], ABS_SUM_PLAN["tunables"])
    assert written in rewritten and "buf" not in rewritten
    assert forms.lift(source, ABS_SUM_PLAN).family == forms.FULL_REDUCE


def test_a_row_combined_in_shared_memory_is_one_thread_walking_the_row():
    source, launch = block_reduced(ROW_MAX, ROW_MAX_PLAN["launches"][0], ROW_MAX_PLAN["tunables"])
    assert "for (int c = 0; c < C; c += 1)" in source and "out[row] = m;" in source
    assert launch["block"] == ["1"] and "threadIdx" not in source and "blockDim" not in source
    assert forms.lift(ROW_MAX, ROW_MAX_PLAN).family == forms.ROWS


NOT_A_BLOCK_REDUCTION = {
    # the tree halves over 96 threads: it drops elements, so it is not the row's sum
    "a tree over a block that is not a power of two": (ROW_MEAN, {**ROW_MEAN_PLAN, "launches": [
        {**ROW_MEAN_PLAN["launches"][0], "block": [96]}]}),
    # the combine takes the max of partial sums: not the values' operator
    "a combine of another operator": (ROW_MEAN.replace("part[threadIdx.x] += part[threadIdx.x + h]",
                                                       "part[threadIdx.x] = fmaxf(part[threadIdx.x], "
                                                       "part[threadIdx.x + h])"), ROW_MEAN_PLAN),
    # the out-of-range threads store 1, not the sum's identity
    "an identity that is not the operator's": (ABS_SUM.replace(": 0.0f;", ": 1.0f;"), ABS_SUM_PLAN),
    # thread 0 writes the block's value and the others write theirs too
    "work after thread 0's": (ROW_MAX.replace("out[row] = best;\n    }\n",
                                              "out[row] = best;\n    }\n    out[row] += sm[t];\n"),
                              ROW_MAX_PLAN),
    # the epilogue reads another thread's slot
    "another slot read after the combine": (ROW_MAX.replace("out[row] = best;", "out[row] = sm[1];"),
                                            ROW_MAX_PLAN),
    # the strided loop starts elsewhere than the thread's index
    "a partial that does not stride from the thread": (ROW_MAX.replace("int c = t;", "int c = 2 * t;"),
                                                       ROW_MAX_PLAN),
}


@pytest.mark.parametrize("variant", list(NOT_A_BLOCK_REDUCTION))
def test_a_combine_that_could_compute_something_else_is_left_as_written(variant):
    source, the_plan = NOT_A_BLOCK_REDUCTION[variant]
    assert block_reduced(source, the_plan["launches"][-1], the_plan["tunables"]) is None
    assert not isinstance(forms.lift(source, the_plan), forms.Form)


def test_the_halving_tree_over_a_power_of_two_lifts():
    assert forms.lift(ROW_MEAN, ROW_MEAN_PLAN).family == forms.ROWS


@needs_gxx
@pytest.mark.parametrize("source, the_plan, the_task, skeleton", [
    (ABS_SUM, ABS_SUM_PLAN, ABS_SUM_TASK, "full.grid_stride_accumulate"),
    (ROW_MAX, ROW_MAX_PLAN, ROW_MAX_TASK, "rows.block_per_row"),
], ids=["abs_sum", "row_max"])
def test_the_familys_skeleton_computes_the_reference_from_the_kernel_as_written(source, the_plan, the_task,
                                                                                skeleton, tmp_path):
    assert skeleton_mismatch(source, the_plan, the_task, skeleton, tmp_path) is None


# A softmax whose block reduces twice through one shared array (the max, then the sum of
# exponentials), every thread reading the block's value back, then writing its share.
SOFTMAX, SOFTMAX_PLAN, SOFTMAX_TASK = softmax_shared.SRC, softmax_shared.TASK.naive_plan, softmax_shared.TASK


def test_two_reductions_through_one_shared_array_are_two_walks_of_the_row():
    source, launch = block_reduced(SOFTMAX, SOFTMAX_PLAN["launches"][0], SOFTMAX_PLAN["tunables"])
    assert "float rowmax = m;" in source and "float total = sum;" in source and "red" not in source
    assert source.count("c < C; c += 1)") == 3 and launch["block"] == ["1"]
    assert forms.lift(SOFTMAX, SOFTMAX_PLAN).family == forms.ROWS
    # the second reduction read back before its combine: another thread's partial
    early = SOFTMAX.replace("    float total = red[0];\n", "").replace(
        "    red[tid] = sum;\n", "    red[tid] = sum;\n    float total = red[0];\n")
    assert block_reduced(early, SOFTMAX_PLAN["launches"][0], SOFTMAX_PLAN["tunables"]) is None


@needs_gxx
def test_the_rows_skeleton_computes_the_softmax_from_the_kernel_as_written(tmp_path):
    form = forms.lift(SOFTMAX, SOFTMAX_PLAN)
    emitted = by_name("rows.block_per_row").emit(form, SOFTMAX_PLAN, SOFTMAX_TASK)
    assert not isinstance(emitted, str), emitted
    candidate = Candidate.from_source_and_plan(emitted.source, emitted.plan)
    assert mismatch_at_l0(SOFTMAX_TASK, candidate, tmp_path) is None


@pytest.mark.parametrize("variant, change", [
    # every thread's partial starts from 1: the block adds blockDim.x ones, one walk adds one
    ("a sum's partial that does not start from 0", ("float sum = 0.0f;", "float sum = 1.0f;")),
    # every thread adds 1 to its partial after its loop: blockDim.x times in the block
    ("a partial changed outside its loop",
     ("    red[tid] = sum;\n", "    sum += 1.0f;\n    red[tid] = sum;\n")),
])
def test_a_partial_the_threads_would_each_change_is_not_one_walk(variant, change):
    source = SOFTMAX.replace(*change)
    assert source != SOFTMAX, variant
    assert block_reduced(source, SOFTMAX_PLAN["launches"][0], SOFTMAX_PLAN["tunables"]) is None
    # a max may start anywhere: max over the block of the same start is that start
    started = SOFTMAX.replace("float m = -INFINITY;", "float m = -1.0e30f;")
    assert started != SOFTMAX
    assert block_reduced(started, SOFTMAX_PLAN["launches"][0], SOFTMAX_PLAN["tunables"]) is not None
