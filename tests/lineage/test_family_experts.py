"""Family experts (lineage/family_experts/): experts of families the suite has no task
of, whose lineages feed the skeleton cards only. Every state compiles and is correct on
the CPU emulator, the plain state lifts to its family, and the admission task of that
family (bench/admission_tasks/) lifts too and takes the card's skeleton correctly."""

from pathlib import Path

import pytest

from lineage.engine import experts, skeleton_cards
from lineage.engine.walker import Lineage
from profiling.harness import tasks
from profiling.harness.gate import compile_checked
from search.engine import forms
from search.engine.forms.skeletons import by_name

ADMISSION_DIR = Path(__file__).resolve().parents[2] / "bench" / "admission_tasks"
FAMILY = {"cumsum": forms.SCAN, "transpose": forms.PERMUTATION}


@pytest.fixture
def family_tasks(monkeypatch):
    """The family and admission tasks on the registry's path for one test only (the suite's
    registry tests count exactly the suite's tasks)."""
    monkeypatch.setenv(tasks.TASK_PATH_VARIABLE, f"{experts.FAMILY_TASKS_DIR}:{ADMISSION_DIR}")
    tasks._reset_for_tests()
    yield
    tasks._reset_for_tests()


def test_the_family_experts_are_apart_from_the_suites():
    assert experts.tasks_with_experts(experts.FAMILY_EXPERTS_DIR) == sorted(FAMILY)
    assert not set(FAMILY) & set(experts.tasks_with_experts())
    assert experts.load_any("transpose").path.endswith("family_experts/transpose")
    assert experts.load_any("softmax").path.endswith("experts/softmax")


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_every_state_compiles_and_is_correct_on_the_cpu_emulator(name, family_tasks, tmp_path):
    from tests.search.cuda_on_cpu import CpuKernels, inputs_for, mismatch

    expert, task = experts.load(name, experts.FAMILY_EXPERTS_DIR), tasks.get(name)
    for index, state in enumerate(expert.states()):
        verdict = compile_checked(task, expert.candidate(state), task.sizes)
        assert getattr(verdict, "status", "compiled") in ("compiled", "incomplete"), sorted(state)
        assert "OPT_" not in expert.plain_source(state)
        kernels = CpuKernels(expert.plain_candidate(state), tmp_path / f"state-{index}")
        for size in task.l0_sizes:
            inputs = inputs_for(task, size, seed=index)
            found = mismatch(task, size, inputs, kernels.run(task, size, inputs))
            assert found is None, (sorted(state), size, found)


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_the_plain_state_and_the_naive_kernel_lift_to_the_family(name, family_tasks):
    expert, task = experts.load(name, experts.FAMILY_EXPERTS_DIR), tasks.get(name)
    plain = forms.lift(expert.plain_source(frozenset()), expert.written_plan(frozenset()))
    assert getattr(plain, "family", plain) == FAMILY[name]
    assert getattr(forms.lift(task.naive_source, task.naive_plan), "family", None) == FAMILY[name]
    lineage = Lineage(task=name, expert=expert.path)
    assert skeleton_cards.lineage_family(lineage) == (FAMILY[name], "its plain state lifts")


def test_the_permutation_admission_task_takes_the_tile_correctly_on_the_cpu(family_tasks, tmp_path):
    from profiling.harness.candidate import Candidate
    from tests.search.cuda_on_cpu import CpuKernels, inputs_for, mismatch

    task = tasks.get("channels_last")
    form = forms.lift(task.naive_source, task.naive_plan)
    assert form.family == forms.PERMUTATION and form.along == ("w", "c")
    emitted = by_name("permutation.smem_tile").emit(form, task.naive_plan, task)
    kernels = CpuKernels(Candidate.from_source_and_plan(emitted.source, emitted.plan), tmp_path)
    for size in task.l0_sizes:
        inputs = inputs_for(task, size)
        assert mismatch(task, size, inputs, kernels.run(task, size, inputs)) is None, size


@pytest.mark.parametrize("card_id, task, family, intents", [
    ("skeleton:permutation.smem_tile", "transpose", forms.PERMUTATION, {"SMEM_TILE", "SMEM_PADDING"}),
    ("skeleton:scan.block_scan", "cumsum", forms.SCAN, {"BLOCK_PER_ROW", "WARP_SHUFFLE_SCAN"}),
])
def test_a_recorded_family_lineage_gives_its_card_its_evidence(card_id, task, family, intents):
    """The lineage walked on a GPU (bench/results/*-family-lineages/) is what the card is
    induced from: each of its intents, each step's measured effect, and an expectation
    that is their product, not a number written here."""
    cards = {card["id"]: card for card in skeleton_cards.recorded()}
    card = cards[card_id]
    assert card["family"] == family and card["tasks"] == [task]
    assert set(card["intents"]) == intents
    by_intent = {}
    for step in card["evidence"]["steps"]:
        assert step["task"] == task and step["speedup"] > 1.0
        by_intent.setdefault(step["intent"], []).append(step["speedup"])
    assert set(by_intent) == intents
    product = 1.0
    for speedups in by_intent.values():
        product *= max(speedups)
    assert abs(card["expected_speedup"] - product) / product < 0.1
    # the suite's cards stay induced from the suite's ten lineages only
    assert all(task not in c["tasks"] for c in cards.values() if c["family"] != family)


def test_the_scan_admission_task_takes_the_block_scan_correctly_on_the_cpu(family_tasks, tmp_path):
    from profiling.harness.candidate import Candidate
    from tests.search.cuda_on_cpu import CpuKernels, inputs_for, mismatch

    task = tasks.get("running_max")
    form = forms.lift(task.naive_source, task.naive_plan)
    assert form.family == forms.SCAN and form.holes()["running"].startswith("best: max")
    emitted = by_name("scan.block_scan").emit(form, task.naive_plan, task)
    kernels = CpuKernels(Candidate.from_source_and_plan(emitted.source, emitted.plan), tmp_path)
    for size in task.l0_sizes:
        inputs = inputs_for(task, size)
        assert mismatch(task, size, inputs, kernels.run(task, size, inputs)) is None, size
