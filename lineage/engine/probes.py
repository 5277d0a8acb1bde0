"""Probing an expert's declared order: each step applied without one of its prerequisites.

A manifest says `OPT_VEC4` depends on `OPT_REG_TILE`; the walker never leaves the states
that respect it, so every lineage step passes and its rejected edges stay empty. A probe
asks what the declaration protects: from the smallest state that has everything the
flag needs except that one prerequisite (and nothing that needs it), turn the flag on,
and put the result through the same gate. What comes back is evidence of an order
precondition for KLineage part 2's skill cards:

- a rejection (the step does not build, or computes wrong values, without the other) is
  a precondition with the guard and the message that show it, kept as a rejected
  attempt of the forward step;
- a flag whose code sits inside its prerequisite's (`#if OPT_GRID_STRIDE ... #if OPT_VEC4`)
  changes nothing without it: the same plain CUDA and the same launch (`no_effect`,
  decided here by partial evaluation). The step presupposes the other structurally;
- a pass says the order is a choice of the expert's author (a cost, or readability), not
  something the step needs, and is kept as such.

Compiler rejections are decided here with nvcc (the gate's own compile checks, no GPU
needed); what builds is measured by the evaluator (the screen on a GPU host, its
recording in CI).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from profiling.harness import tasks
from profiling.harness.gate import compile_checked
from profiling.harness.verdict import REJECTED
from search.engine.types import Evaluator, Measurement

from .experts import Expert, State
from .walker import key

PROBES_FORMAT = 1
NO_EFFECT = "no_effect"


@dataclass
class Probe:
    """`flag` turned on in `start`, which lacks `missing`, one of its declared prerequisites."""

    flag: str
    missing: str
    start: str
    state: str
    candidate_hash: str
    status: str  # passed, rejected, no_effect, or error (the evaluator failed: says nothing)
    guard: str | None
    message: str
    time_ms: float | None
    # "unifdef" (no effect, here), "compile" (nvcc, here), or the evaluator's level
    # ("screen", "full").
    decided_by: str
    finding: str

    @property
    def precondition_held(self) -> bool:
        """The step needs its prerequisite: refused without it, or nothing without it."""
        return self.status in (REJECTED, NO_EFFECT)


def prerequisites(expert: Expert, flag: str) -> frozenset[str]:
    """Every flag `flag` needs, transitively."""
    by_name = {f.name: f for f in expert.flags}
    found: set[str] = set()
    todo = list(by_name[flag].depends)
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(by_name[name].depends)
    return frozenset(found)


def dependents(expert: Expert, flag: str) -> frozenset[str]:
    """Every flag that needs `flag`, transitively."""
    return frozenset(f.name for f in expert.flags if flag in prerequisites(expert, f.name))


def probe_states(expert: Expert) -> list[tuple[str, str, State, State]]:
    """(flag, missing, start, probed) for each declared dependency, in manifest order:
    `start` is valid, `probed` = start + flag is not."""
    found = []
    for f in expert.flags:
        for missing in f.depends:
            start = prerequisites(expert, f.name) - {missing} - dependents(expert, missing)
            found.append((f.name, missing, start, start | {f.name}))
    return found


def probe(expert: Expert, evaluator: Evaluator, *, timeout_s: float = 3600.0) -> list[Probe]:
    """Every probe of `expert`: compile failures decided here, the rest by `evaluator`."""
    task = tasks.get(expert.task)
    results: dict[int, Probe] = {}
    pending: dict[str, list[int]] = {}
    planned = probe_states(expert)
    for index, (flag, missing, start, probed) in enumerate(planned):
        candidate = expert.candidate(probed)
        digest = candidate.content_hash()
        if (expert.plain_source(probed) == expert.plain_source(start)
                and expert.plain_plan(probed, task.sizes) == expert.plain_plan(start, task.sizes)):
            results[index] = _probe(flag, missing, start, probed, digest, NO_EFFECT, None,
                                    "the same plain CUDA and launch as without the flag", None, "unifdef")
            continue
        checked = compile_checked(task, candidate, task.sizes)
        if getattr(checked, "status", None) == REJECTED:  # the plan, the policy or nvcc said no
            results[index] = _probe(flag, missing, start, probed, digest, REJECTED, checked.guard,
                                    checked.message, None, "compile")
            continue
        if digest not in pending:
            evaluator.submit(expert.task, candidate)
        pending.setdefault(digest, []).append(index)
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the evaluator left {len(pending)} probes unanswered in {timeout_s:.0f} s")
        for digest, measurement in evaluator.collect(timeout_s=5.0):
            for index in pending.pop(digest, []):
                flag, missing, start, probed = planned[index]
                results[index] = _from_measurement(flag, missing, start, probed, digest, measurement)
    return [results[i] for i in range(len(planned))]


def _from_measurement(flag: str, missing: str, start: State, probed: State, digest: str,
                      m: Measurement) -> Probe:
    return _probe(flag, missing, start, probed, digest, m.status, m.guard, m.message or "",
                  m.time_ms if m.passed else None, m.level or "")


def _probe(flag: str, missing: str, start: State, probed: State, digest: str, status: str,
           guard: str | None, message: str, time_ms: float | None, decided_by: str) -> Probe:
    if status == REJECTED:
        finding = (f"{flag} needs {missing} first: without it the step is refused by the "
                   f"{guard} guard")
    elif status == NO_EFFECT:
        finding = (f"{flag} needs {missing} first: without it the step changes nothing (its code "
                   f"sits inside {missing}'s)")
    elif status == "passed":
        finding = (f"{flag} also passes without {missing}: the declared order is the author's "
                   f"choice, not a precondition of the step")
    else:
        finding = f"not decided: the evaluator failed ({message[:200]})"
    return Probe(flag=flag, missing=missing, start=key(start), state=key(probed), candidate_hash=digest,
                 status=status, guard=guard, message=message[:2000], time_ms=time_ms,
                 decided_by=decided_by, finding=finding)


def to_dict(task: str, gpu: str, probes: list[Probe]) -> dict[str, Any]:
    return {"format": PROBES_FORMAT, "task": task, "gpu": gpu, "probes": [asdict(p) for p in probes]}


def from_dict(data: dict[str, Any]) -> tuple[str, str, list[Probe]]:
    if data.get("format") != PROBES_FORMAT:
        raise ValueError(f"probes format {data.get('format')!r}, expected {PROBES_FORMAT}")
    return data["task"], data.get("gpu", ""), [Probe(**p) for p in data["probes"]]
