"""The one way a change between two candidates is shown: unified diffs of source and plan."""

from __future__ import annotations

import difflib
import json

from profiling.harness.candidate import Candidate


def candidate_diff(parent: Candidate, child: Candidate) -> str:
    """Unified diff of the CUDA source, then of the plan (sorted JSON), child against parent;
    empty when they are the same. Every line ends with a newline."""
    parts: list[str] = []
    if parent.source != child.source:
        parts += difflib.unified_diff(parent.source.splitlines(keepends=True),
                                      child.source.splitlines(keepends=True),
                                      "a/kernel.cu", "b/kernel.cu")
    before, after = (json.dumps(c.plan_dict(), indent=2, sort_keys=True) + "\n" for c in (parent, child))
    if before != after:
        parts += difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                      "a/plan.json", "b/plan.json")
    return "".join(line if line.endswith("\n") else line + "\n" for line in parts)
