"""The expert corpus: every state a walk can visit compiles, reads as plain CUDA, and
(where the CPU emulator covers what the kernel uses) is correct at the small sizes."""

import pytest

from lineage.engine import experts
from profiling.harness import tasks
from profiling.harness.gate import compile_checked

TASKS = experts.tasks_with_experts()
# Elements across a task's tensors above which the emulator (a thread per CUDA thread)
# is too slow for CI.
EMULATOR_LIMIT = 300_000


@pytest.mark.parametrize("task_name", TASKS)
def test_every_state_of_the_expert_compiles_and_its_plan_fits_the_kernels(task_name):
    expert = experts.load(task_name)
    task = tasks.get(task_name)
    for state in expert.states():
        verdict = compile_checked(task, expert.candidate(state), task.sizes)
        assert getattr(verdict, "status", "compiled") in ("compiled", "incomplete"), \
            f"{sorted(state)}: {verdict.guard}: {verdict.message}"


@pytest.mark.parametrize("task_name", TASKS)
def test_every_state_reads_as_plain_cuda_with_no_flag_left(task_name):
    expert = experts.load(task_name)
    for state in expert.states():
        plain = expert.plain_source(state)
        assert "OPT_" not in plain, sorted(state)
    assert expert.plain_source(frozenset()) != expert.plain_source(expert.all_on())


@pytest.mark.parametrize("task_name", [t for t in TASKS if experts.load(t).cpu_emulator])
def test_every_state_is_correct_at_small_sizes_on_the_cpu_emulator(task_name, tmp_path):
    from tests.search.cuda_on_cpu import CpuKernels, inputs_for, mismatch

    expert = experts.load(task_name)
    task = tasks.get(task_name)
    sizes = [s for s in task.l0_sizes if task.footprint_bytes(s) // 4 <= EMULATOR_LIMIT]
    assert sizes, "no L0 size is small enough for the emulator"
    for index, state in enumerate(expert.states()):
        kernels = CpuKernels(expert.plain_candidate(state), tmp_path / f"state-{index}")
        for size in sizes:
            inputs = inputs_for(task, size, seed=index)
            found = mismatch(task, size, inputs, kernels.run(task, size, inputs))
            assert found is None, f"{sorted(state)} at {size}: {found}"
