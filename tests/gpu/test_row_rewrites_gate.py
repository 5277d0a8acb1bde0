"""The row rewrites' kernels through the real gate (pytest -m gpu, on the H200): block_per_row,
online_softmax and vectorize_rows, alone and together, pass the full standard gate
(correctness at every L0 size, where rows of odd lengths take the scalar path, and at L1,
the timed runs' verified outputs and the four sanitizers). How fast they are is the
transfer benchmark's to say (bench/skills_transfer.py), not a test's."""

from __future__ import annotations

import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.gate import GateOptions, evaluate
from search.engine.rewrites import RewriteSource, all_rewrites
from search.engine.types import NodeContext

pytestmark = pytest.mark.gpu
REWRITES = {rewrite.name: rewrite for rewrite in all_rewrites()}


def after(task: str, names: tuple[str, ...]) -> Candidate:
    spec = tasks.get(task)
    candidate = Candidate.from_source_and_plan(spec.naive_source, spec.naive_plan)
    for name in names:
        context = NodeContext(task=task, candidate=candidate, measurement=None, diagnosis=None,
                              tolerance_allows_fast_math=True)
        proposals, refused = RewriteSource((REWRITES[name],)).evaluate(context)
        assert proposals, refused
        candidate = proposals[0].candidate
    return candidate


@pytest.mark.parametrize(("task", "names"), [
    ("softmax", ("block_per_row", "online_softmax", "vectorize_rows")),
    ("cross_entropy", ("block_per_row", "online_softmax", "vectorize_rows")),
    ("layernorm", ("block_per_row", "vectorize_rows")),
])
def test_the_row_rewrites_pass_the_standard_gate(task, names):
    for upto in range(1, len(names) + 1):
        verdict = evaluate(task, after(task, names[:upto]), GateOptions())
        assert verdict.passed, (names[:upto], verdict.guard, verdict.message)
