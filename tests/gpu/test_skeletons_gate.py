"""Every skeleton on every kernel of its family that tests/search/test_forms_skeletons.py
runs on the CPU emulator, through the real gate on a GPU (pytest -m gpu): correctness at
every L0 size of the kernel's small task and at its L1 size, the plan as launched, the
timed runs' outputs verified. Sanitizers off (the CPU tests and the suite's own gate runs
cover them); how fast the skeletons are is bench/skeleton_transfer.py's to say."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "search")]

import skeleton_tasks  # noqa: E402
import test_forms_contraction as c  # noqa: E402
import test_forms_implicit_gemm as implicit  # noqa: E402
from test_forms_skeletons import CASES, IDS, candidate, emitted, task_of  # noqa: E402

from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate_task  # noqa: E402
from profiling.harness.verdict import PASSED  # noqa: E402
from search.engine.forms import lift  # noqa: E402
from search.engine.forms.skeletons import by_name  # noqa: E402

pytestmark = pytest.mark.gpu
HERE = Path(__file__).resolve().parent
# The gate builds inputs and references in subprocesses that find a task by name in the
# registry: each test task gets a file there that takes it from skeleton_tasks.py.
TEMPLATE = """import sys
sys.path.insert(0, {gpu!r})
from skeleton_tasks import task_named
TASK = task_named({name!r})
"""


def quick(cache) -> GateOptions:
    """Correctness is the point here: fewer seeds and timed runs than the standard gate."""
    return GateOptions(profile=False, sanitize=(), seed=20261206, input_cache=str(cache), seeds=2,
                       warmup_runs=1, timing_runs=3, spot_checks=1)


@pytest.fixture(scope="module", autouse=True)
def registered(tmp_path_factory):
    directory = tmp_path_factory.mktemp("skeleton-tasks")
    known = {task.name for task in tasks.all_tasks()}  # the suite's own (softmax, ...)
    for name in set(skeleton_tasks.small_tasks()) - known:
        text = TEMPLATE.format(gpu=str(HERE), name=name)
        (directory / f"{name}.py").write_text(text)
    tasks.add_directory(directory)


@pytest.mark.parametrize("kernel, skeleton", CASES, ids=IDS)
def test_what_a_skeleton_emits_passes_the_gate_on_a_gpu(kernel, skeleton, tmp_path):
    verdict = evaluate_task(task_of(kernel), candidate(emitted(kernel, skeleton)),
                            quick(tmp_path))
    assert verdict.status == PASSED, (verdict.guard, verdict.message[:500])


@pytest.mark.parametrize("source, plan", [(c.BMM_PLANE, c.PLANE_PLAN), (c.BMM_FLAT, c.FLAT_PLAN),
                                          (c.BMM_REST, c.FLAT_PLAN), (c.LINEAR, c.PLAN)],
                         ids=["bmm grid plane", "bmm flat index", "bmm through a local", "linear relu"])
def test_the_contraction_tile_passes_the_gate_on_a_gpu(source, plan, tmp_path):
    """The 128 x 128 tile (bmm at 300 x 260) and the 64 x 64 (linear at 130 x 70), each
    factor loaded along its own contiguous index (the linear's Bt[c * K + k] along k)."""
    task = c.LINEAR_TASK if source is c.LINEAR else c._bmm_task(source, plan)
    emitted = by_name("contraction.smem_register_tile").emit(lift(source, plan), plan, task)
    verdict = evaluate_task(task, Candidate.from_dict({**emitted.plan, "source": emitted.source}),
                            quick(tmp_path))
    assert verdict.status == PASSED, (verdict.guard, verdict.message[:500])


@pytest.mark.parametrize("name", ["conv2d", "strided", "centred", "transposed"])
def test_the_tile_computes_convolutions_read_as_implicit_gemm_on_a_gpu(name, tmp_path):
    """The suite's conv2d at its L1 size (images and pixels merged into one tile index), a
    stride-2 convolution with taps from 0 and from -1, and a transposed one."""
    task = {"conv2d": tasks.get("conv2d"), "strided": implicit.STRIDED_TASK,
            "centred": implicit.STRIDED_TASK, "transposed": implicit.TRANSPOSED_TASK}[name]
    source = implicit.CENTRED if name == "centred" else task.naive_source
    tile = by_name("contraction.smem_register_tile")
    emitted = tile.emit(lift(source, task.naive_plan), task.naive_plan, task)
    verdict = evaluate_task(task, Candidate.from_dict({**emitted.plan, "source": emitted.source}),
                            quick(tmp_path))
    assert verdict.status == PASSED, (verdict.guard, verdict.message[:500])


@pytest.mark.parametrize("skeleton, index", [("contraction.smem_register_tile", 0), ("rows.block_per_row", 1),
                                             ("contraction.smem_register_tile", 2)])
def test_a_skeleton_spliced_into_the_naive_attention_passes_the_gate_on_a_gpu(skeleton, index, tmp_path):
    from search.engine.forms import splice

    task = tasks.get("self_attention")
    plan = task.naive_plan
    form = dict(splice.per_launch(task.naive_source, plan))[index]
    emitted = by_name(skeleton).emit(form, splice.sub_plan(plan, index), task)
    source, new_plan = splice.splice(task.naive_source, plan, index, form, emitted)
    verdict = evaluate_task(task, Candidate.from_dict({**new_plan, "source": source}), quick(tmp_path))
    assert verdict.status == PASSED, (verdict.guard, verdict.message[:500])
