"""The generation loop's checker is the real gate at L0 on a GPU host (pytest -m gpu)."""

from __future__ import annotations

import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.generation.loop import GateChecker
from tests.search.scripted_llm import WRITTEN_RELU, WRITTEN_RELU_PLAN

pytestmark = pytest.mark.gpu


def test_a_correct_kernel_passes_l0_and_a_wrong_one_is_caught_with_the_guard():
    checker, relu = GateChecker(), tasks.get("relu")
    good = checker.check(relu, Candidate.from_source_and_plan(WRITTEN_RELU, WRITTEN_RELU_PLAN))
    assert good.passed and good.stage == "passed", good.message
    wrong = checker.check(relu, Candidate.from_source_and_plan(
        WRITTEN_RELU.replace("fmaxf(x[i], 0.0f)", "x[i]"), WRITTEN_RELU_PLAN))
    assert not wrong.passed and wrong.stage == "L0" and wrong.guard == "wrong_values", wrong
