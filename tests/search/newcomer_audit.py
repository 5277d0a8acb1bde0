"""What the newcomer audits' tests share (test_newcomer_kernels.py, test_newcomer_kernels_2.py):
a folder of tasks put on the task path with the skeleton cards alone, each task's naive
kernel, the families the lift reads in it, and the skeletons the skills source offers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from lineage.engine.skills import SkillSource
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.forms import Refusal, cached
from search.engine.types import NodeContext, Proposal


@contextlib.contextmanager
def tasks_in(directory: Path, names: Iterable[str]) -> Iterator[dict]:
    """The named tasks of `directory`, read with it alone on the task path and the skeleton
    cards alone (no token induction); the registry forgets them afterwards."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(tasks.TASK_PATH_VARIABLE, str(directory))
        patch.setenv("OPTIML_SKILL_CARDS", "skeletons")
        tasks._reset_for_tests()
        try:
            yield {name: tasks.get(name) for name in names}
        finally:
            tasks._reset_for_tests()


def naive(task) -> Candidate:
    return Candidate.from_source_and_plan(task.naive_source, task.naive_plan)


def lifted(candidate: Candidate) -> list[str]:
    """Each launch's family, or the words of its refusal."""
    found = cached.lifted_launches(candidate.source, json.dumps(candidate.plan_dict(), sort_keys=True))
    return [form.reason if isinstance(form, Refusal) else form.family for _, form in found]


def offered_skeletons(task, name: str) -> list[Proposal]:
    context = NodeContext(task=name, candidate=naive(task), measurement=None, diagnosis=None)
    return [p for p in SkillSource().propose(context) if p.source.startswith("skill:skeleton:")]
