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


# -- the checks every audit makes of its own table ---------------------------------------

ROWS, MAP, FULL, PRODUCT = "row_map_reduce", "elementwise_map", "full_reduction", "batched_contraction"
SCAN, WINDOW = "row_scan", "window_reduction"
FAMILIES = (ROWS, MAP, FULL, PRODUCT, SCAN, WINDOW, "permutation")


def check_directory(directory: Path, expected: dict, vendor_ops: Iterable[str]) -> None:
    """The folder holds the tasks of the table, and its vendor.py a call for each."""
    files = {path.stem for path in directory.glob("*.py")} - {"vendor"}
    assert files == set(expected)
    assert set(vendor_ops) == set(expected)


def check_lift(task, expected: list[str]) -> None:
    """Each launch lifts to the family written, or is refused with words that contain the
    reason written (an entry that names no family)."""
    read = lifted(naive(task))
    assert len(read) == len(expected), read
    for got, wanted in zip(read, expected, strict=True):
        assert wanted == got or (wanted not in FAMILIES and wanted in got), read


def check_offered(task, name: str, expected: list[str], wanted: set[str]) -> None:
    """At least the skeletons named are offered; none for a kernel refused outright."""
    offered = {p.source.split(":")[-1] for p in offered_skeletons(task, name)}
    assert wanted <= offered, offered
    if not any(f in FAMILIES for f in expected):
        assert offered == set()


def check_references(task, name: str, folder: Path) -> None:
    """The naive kernel and every skeleton offered compute the reference on the CPU
    emulator at every L0 size."""
    from cuda_on_cpu import mismatch_at_l0

    offered = offered_skeletons(task, name)
    for label, kernel in [("naive", naive(task)), *((p.source.split(":")[-1], p.candidate) for p in offered)]:
        assert mismatch_at_l0(task, kernel, folder / label) is None, label
