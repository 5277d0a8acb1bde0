"""Plans of several launches: each launch's kernel lifts on its own, and a skeleton's
kernel is put back in its place, the file's other kernels and launches as they were
(search/engine/forms/splice.py). The suite's naive attention is three launches: a
product, a row softmax, a product."""

from __future__ import annotations

import shutil

import pytest
from cuda_on_cpu import CpuKernels, inputs_for, mismatch, mismatch_at_l0

from bench.newcomer_tasks import frob
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.forms import CONTRACTION, ROWS, Form, splice
from search.engine.forms.skeletons import by_name

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")


def attention(block: int = 256):
    task = tasks.get("self_attention")
    tunables = {**task.naive_plan["tunables"], "BLOCK": block}
    return task, task.naive_source, {**task.naive_plan, "tunables": tunables}


def spliced(skeleton: str, index: int, block: int = 256):
    task, source, plan = attention(block)
    form = dict(splice.per_launch(source, plan))[index]
    emitted = by_name(skeleton).emit(form, splice.sub_plan(plan, index), task)
    return task, source, plan, splice.splice(source, plan, index, form, emitted)


def test_each_launch_of_the_naive_attention_lifts_to_its_family():
    _, source, plan = attention()
    found = splice.per_launch(source, plan)
    families = [(i, f.family) for i, f in found if isinstance(f, Form)]
    assert families == [(0, CONTRACTION), (1, ROWS), (2, CONTRACTION)]


def test_a_tiled_launch_replaces_its_kernel_and_keeps_the_others_as_written():
    _, source, plan, (new_source, new_plan) = spliced("contraction.smem_register_tile", 0)
    assert [launch["kernel"] for launch in new_plan["launches"]] == [
        "attention_scores", "softmax_rows_inplace", "attention_output"]
    assert new_plan["launches"][0]["block"] == [256] and new_plan["launches"][1:] == plan["launches"][1:]
    assert new_source.count("optiml_As") > 0 and new_source.count("__global__") == 3
    for kept in ("softmax_rows_inplace(float* scores, int rows, int S)",
                 "acc += p[j] * vb[(long long)j * D + d];"):
        assert kept in new_source


def test_a_tunable_the_other_launches_read_at_another_value_is_renamed_in_the_new_launch():
    _, _, plan, (new_source, new_plan) = spliced("rows.block_per_row", 1, block=128)
    assert new_plan["tunables"]["BLOCK"] == 128  # the other two launches keep theirs
    renamed = [k for k in new_plan["tunables"] if k.startswith("BLOCK_")]
    assert renamed == ["BLOCK_1"], new_plan["tunables"]
    assert "BLOCK_1" in str(new_plan["launches"][1]) and new_plan["launches"][0] == plan["launches"][0]


def test_a_kernel_launched_twice_is_not_replaced():
    task, source, plan = attention()
    twice = {**plan, "launches": [*plan["launches"], plan["launches"][1]]}
    form = dict(splice.per_launch(source, twice))[1]
    emitted = by_name("rows.block_per_row").emit(form, splice.sub_plan(twice, 1), task)
    assert "launched more than once" in splice.splice(source, twice, 1, form, emitted)


@needs_gxx
def test_the_spliced_attention_computes_the_reference_on_the_cpu(tmp_path):
    task, _, _, (new_source, new_plan) = spliced("contraction.smem_register_tile", 2)
    kernels = CpuKernels(Candidate.from_dict({**new_plan, "source": new_source}), tmp_path)
    for sizes in task.l0_sizes[:3]:
        inputs = inputs_for(task, sizes)
        assert mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs)) is None, sizes


# A norm's two passes (bench/newcomer_tasks/frob.py): a sum of squares into a scratch
# value (zeroed by its own launch first), then every element divided by the root of it.
NORMALIZE, NORMALIZE_PLAN = frob.SRC, frob.TASK.naive_plan


def _normalize_spliced(task):
    form = dict(splice.per_launch(NORMALIZE, NORMALIZE_PLAN))[1]
    skeleton = by_name("full.grid_stride_accumulate")
    emitted = skeleton.emit(form, splice.sub_plan(NORMALIZE_PLAN, 1, NORMALIZE), task)
    return form, splice.splice(NORMALIZE, NORMALIZE_PLAN, 1, form, emitted)


def test_a_launch_after_its_zeroing_launch_lifts_with_it_and_the_skeleton_replaces_both():
    assert splice.first_launch(NORMALIZE, NORMALIZE_PLAN, 1) == 0
    assert splice.first_launch(NORMALIZE, NORMALIZE_PLAN, 2) == 2  # after a launch of many threads
    assert splice.sub_plan(NORMALIZE_PLAN, 1)["launches"] == NORMALIZE_PLAN["launches"][1:2]
    form, (_, new_plan) = _normalize_spliced(frob.TASK)
    assert form.family == "full_reduction"
    kernels = [launch["kernel"] for launch in new_plan["launches"]]
    assert len(kernels) == 3 and kernels[-1] == "divide_by_norm" and "zero_sum" not in kernels


@needs_gxx
def test_the_spliced_norm_computes_the_reference_on_the_cpu(tmp_path):
    task = frob.TASK
    _, (new_source, new_plan) = _normalize_spliced(task)
    assert mismatch_at_l0(task, Candidate.from_source_and_plan(new_source, new_plan), tmp_path) is None
