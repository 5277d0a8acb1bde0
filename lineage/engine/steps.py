"""A card's step materialised on a kernel: its edits on the source (apply_step), its
launch change on the plan (step_plan), and the key that says when two kernels are one
(kernel_key). The skills source (skills.py) and the lineage replay use them."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from profiling.harness import expr
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.spec import Task

from . import antiunify, experts


@lru_cache(maxsize=512)
def recorded_state_key(task: str, state: str) -> tuple[str, str] | None:
    """The kernel key of a lineage's recorded state (its flags, comma-separated; "" the
    plain attempt) as written, the kernel its steps were measured from; None when that
    lineage's expert is not in this checkout."""
    try:
        written = experts.load(task).written_candidate(frozenset(f for f in state.split(",") if f))
    except (experts.ExpertError, OSError, CandidateError):
        return None
    return kernel_key(written)


def kernel_key(candidate: Candidate) -> tuple[str, str]:
    """What makes two proposals one kernel: the source's tokens (layout and comments
    aside: a card's own edits and its generalised ones often write the same code
    differently laid out) and the plan."""
    return antiunify.tokens_digest(candidate.source), json.dumps(candidate.plan_dict(), sort_keys=True)


def materialise_step(step: dict[str, Any], parent: Candidate, task: Task,
                     parsed: antiunify.Parsed | None = None) -> Candidate | None:
    """A card step on `parent`: its edits on the source (apply_step) and its launch
    change on the plan (step_plan); None when either does not apply."""
    source = apply_step(step, parent.source, parsed)
    if source is None:
        return None
    plan = step_plan(step, parent, source, task)
    if plan is None:
        return None
    try:
        return Candidate.from_source_and_plan(source, plan)
    except CandidateError:
        return None


def step_plan(step: dict[str, Any], parent: Candidate, source: str, task: Task) -> dict[str, Any] | None:
    """`parent`'s plan with the step's launch change made (cards._launch_change): the
    launches' grid, block and shared bytes become the step's `after` where they equal its
    `before` at every size the task checks (its L0 sizes and the full one: a kernel written
    otherwise but launched the same way matches); the kernel names and arguments stay
    the parent's. The tunables the new source and launches use that the parent lacks come
    from the step (the parent's own values win: its source was written with them). None
    when the launches differ, so the new code would be launched wrongly."""
    plan = parent.plan_dict()
    change = step.get("launches")
    step_tunables = step.get("tunables", {})
    if change and change["before"] != change["after"]:
        if len(change["before"]) != len(plan["launches"]):
            return None
        for mine, theirs in zip(plan["launches"], change["before"], strict=True):
            if not _same_dims(mine, plan.get("tunables", {}), theirs, step_tunables, task):
                return None
        plan["launches"] = [{**mine, **after} for mine, after in zip(plan["launches"], change["after"],
                                                                     strict=True)]
    used = set(re.findall(r"[A-Za-z_]\w*", source))
    for launch in plan["launches"]:
        for value in (*launch.get("grid", []), *launch.get("block", []), launch.get("shared_bytes", 0)):
            used |= expr.names_in(value)
    tunables = plan.setdefault("tunables", {})
    for name, value in step_tunables.items():
        if name in used and name not in tunables:
            tunables[name] = value
    return plan


def same_launches(a: dict[str, Any], b: dict[str, Any], task: Task) -> bool:
    """Whether two plans launch the same grids, blocks and shared bytes at every size
    the task checks, each with its own tunables (kernel names and arguments aside)."""
    return len(a["launches"]) == len(b["launches"]) and all(
        _same_dims(x, a.get("tunables", {}), y, b.get("tunables", {}), task)
        for x, y in zip(a["launches"], b["launches"], strict=True))


def _same_dims(mine: dict[str, Any], my_tunables: dict[str, Any], theirs: dict[str, Any],
               their_tunables: dict[str, Any], task: Task) -> bool:
    """Whether two launches have the same grid, block and shared bytes at every size."""
    for sizes in (task.sizes, *task.l0_sizes):
        for key, default in (("grid", [1]), ("block", [1]), ("shared_bytes", 0)):
            a, b = mine.get(key, default), theirs.get(key, default)
            if key != "shared_bytes" and len(a) != len(b):
                return False
            pairs = zip(a, b, strict=True) if key != "shared_bytes" else [(a, b)]
            try:
                if any(expr.evaluate_int(x, {**sizes, **my_tunables}) !=
                       expr.evaluate_int(y, {**sizes, **their_tunables}) for x, y in pairs):
                    return False
            except expr.ExpressionError:
                return False
    return True


def apply_step(step: dict[str, Any], source: str, parsed: antiunify.Parsed | None = None) -> str | None:
    """A card step's edits applied together, each at one place (a step's edits are one a
    site: an edit made in two places is two edits): where the expert made it when the
    edit matches as many places as it did in the expert's before-state (`sites`,
    antiunify.sites_toward), else the first place it matches. None unless the step is
    complete and every edit matches. `parsed`: `source` parsed already."""
    if not step.get("complete"):
        return None
    whole = step.get("whole")
    if whole:  # the concrete vector: only on the step's own before-state, token for token
        return whole["after"] if antiunify.tokens_digest(source) == whole["before"] else None
    return antiunify.apply_at_sites(step["edits"], step.get("sites"), source, parsed)
