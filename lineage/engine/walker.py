"""Walking an expert backwards: remove one optimization at a time, through the gate.

From the all-on state the walker proposes turning off each flag that no flag still on
depends on. Every simplified state goes through the same gate as the search (any
search.engine Evaluator: the gate on a GPU host, a replay of its recordings in CI).

- A simplification that passes is an **accepted** edge, stored as its forward
  transition (the simpler state -> the optimized one): both sources with the flags
  partially evaluated away (unifdef.py), their unified diff, the plan's tunables, the
  time and metric deltas, and the rule judge's diagnosis of the simpler state (what a
  search standing there would have been told).
- A simplification that fails is a **rejected** edge, kept as evidence: the guard, the
  gate's message, and what it says about a precondition (the flags that were still on).

The walk is breadth-first over the flag lattice, bounded by `max_states` evaluations:
several removal orders reach the same state, and every edge between visited states is
recorded, so a lineage keeps the alternative orders, down to the all-off state when the
bound allows.
"""

from __future__ import annotations

import difflib
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from profiling.harness import tasks
from search.engine.types import Evaluator, Measurement, NodeContext

from .experts import Expert, State
from .vocabulary import intent_of

LINEAGE_FORMAT = 1


def key(state: State) -> str:
    """A state's name: its flags on, sorted, joined ("" is the plain first attempt)."""
    return ",".join(sorted(state))


@dataclass
class StateRecord:
    flags: list[str]
    candidate_hash: str
    measurement: dict[str, Any]  # Measurement.to_dict()


@dataclass
class Transition:
    """A forward step: `before` (fewer flags) -> `after` = before + the flag of `intent`."""

    intent: str
    flag: str
    before: str
    after: str
    before_ms: float | None
    after_ms: float | None
    speedup: float | None  # before_ms / after_ms
    metric_deltas: dict[str, float]
    source_diff: str
    tunables: dict[str, int]
    diagnosis_before: dict[str, Any]
    # The launch plan's diff at the task's suite sizes (Expert.plain_plan): grid, block,
    # shared bytes and tunables ("" in lineages recorded before it was kept).
    plan_diff: str = ""
    # Who made the step: "flags" (the expert's own OPT_ flag turned off) or
    # "llm:<model>" (the LLM de-optimizer, for a kernel without flags).
    proposer: str = "flags"


@dataclass
class Rejected:
    """Turning `flag` off from `start` gave `state`, which the gate refused."""

    flag: str
    start: str
    state: str
    guard: str | None
    message: str
    precondition: str
    proposer: str = "flags"


@dataclass
class Lineage:
    task: str
    expert: str
    gpu: str = ""
    states: dict[str, StateRecord] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # states in the order they were measured
    transitions: list[Transition] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    complete: bool = False  # the all-off state was reached through accepted edges
    # Why the walk ended, in a sentence: the lattice walked out, the bound on states, or
    # the expert itself failing the gate ("" in lineages recorded before it was kept).
    stopped: str = ""
    seconds: float = 0.0
    format: int = LINEAGE_FORMAT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Lineage:
        data = dict(data)
        if data.get("format") != LINEAGE_FORMAT:
            raise ValueError(f"lineage format {data.get('format')!r}, expected {LINEAGE_FORMAT}")
        data["states"] = {k: StateRecord(**v) for k, v in data.get("states", {}).items()}
        data["transitions"] = [Transition(**t) for t in data.get("transitions", [])]
        data["rejected"] = [Rejected(**r) for r in data.get("rejected", [])]
        return cls(**data)

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=1)


def walk(expert: Expert, evaluator: Evaluator, *, max_states: int = 64, judge=None,
         timeout_s: float = 3600.0) -> Lineage:
    """The lineage of `expert` (see the module docstring)."""
    from search.engine.judges import RuleJudge

    judge = judge or RuleJudge()
    started = time.monotonic()
    lineage = Lineage(task=expert.task, expert=expert.path)
    measured: dict[State, Measurement] = {}
    top = expert.all_on()
    _measure(expert, evaluator, [top], measured, lineage, timeout_s)
    frontier = [top] if measured[top].passed else []
    seen_edges: set[tuple[State, str]] = set()
    left_out: set[State] = set()  # reachable states the bound kept from being measured
    while frontier:
        children = [(state, flag, state - {flag}) for state in frontier
                    for flag in expert.removable(state) if (state, flag) not in seen_edges]
        fresh = list(dict.fromkeys(child for _, _, child in children if child not in measured))
        room = max(0, max_states - len(measured))
        left_out.update(fresh[room:])
        fresh = fresh[:room]
        _measure(expert, evaluator, fresh, measured, lineage, timeout_s)
        next_frontier: list[State] = []
        for state, flag, child in children:
            if child not in measured:
                continue  # past the bound: not measured, no edge
            seen_edges.add((state, flag))
            result = measured[child]
            if result.passed:
                lineage.transitions.append(_transition(expert, judge, child, state, flag, measured))
                if child in fresh and child not in next_frontier:
                    next_frontier.append(child)
            else:
                lineage.rejected.append(_rejected(flag, state, child, result))
        frontier = next_frontier
    lineage.complete = frozenset() in measured and measured[frozenset()].passed and any(
        t.before == "" for t in lineage.transitions)
    lineage.stopped = _stopped(measured[top], left_out - set(measured), len(measured), max_states,
                               lineage.complete, len(expert.states()))
    lineage.seconds = time.monotonic() - started
    return lineage


def _stopped(top: Measurement, left_out: set[State], measured: int, max_states: int,
             complete: bool, possible: int) -> str:
    if not top.passed:
        return (f"the expert (every flag on) did not pass the gate ({top.status}"
                f"{': ' + top.guard if top.guard else ''}): there is nothing to walk back from")
    if left_out:
        return (f"the bound: {measured} states measured (--max-states {max_states}), at least "
                f"{len(left_out)} more reachable of the {possible} valid states")
    if complete:
        return f"walked out: every state reachable through accepted edges measured ({measured} of {possible})"
    return (f"walked out without reaching the plain attempt through accepted edges: {measured} of "
            f"{possible} states measured, the rest lie behind rejected edges")


def _measure(expert: Expert, evaluator: Evaluator, states: list[State],
             measured: dict[State, Measurement], lineage: Lineage, timeout_s: float) -> None:
    by_hash = {}
    for state in states:
        candidate = expert.candidate(state)
        by_hash[candidate.content_hash()] = state
        evaluator.submit(expert.task, candidate)
    deadline = time.monotonic() + timeout_s
    while by_hash.keys() - {h for h, s in by_hash.items() if s in measured}:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the evaluator answered {len(measured)} states in {timeout_s:.0f} s")
        for digest, measurement in evaluator.collect(timeout_s=5.0):
            state = by_hash.get(digest)
            if state is None or state in measured:
                continue
            measured[state] = measurement
            lineage.gpu = lineage.gpu or measurement.gpu
            lineage.order.append(key(state))
            lineage.states[key(state)] = StateRecord(sorted(state), digest, _compact(measurement))


def _compact(measurement: Measurement) -> dict[str, Any]:
    """The measurement without the verdict's bulk (compile logs, every check's record)."""
    data = measurement.to_dict()
    verdict = data.pop("verdict", {}) or {}
    profile = verdict.get("profile") or {}
    data["verdict"] = {"settings": verdict.get("settings", {}), "stage": verdict.get("stage", ""),
                       "profile": {"bottleneck": profile.get("bottleneck"),
                                   "evidence": profile.get("evidence", [])}}
    return data


def _transition(expert: Expert, judge, before: State, after: State, flag: str,
                measured: dict[State, Measurement]) -> Transition:
    slow, fast = measured[before], measured[after]
    plain_before, plain_after = expert.plain_source(before), expert.plain_source(after)
    diff = "".join(difflib.unified_diff(plain_before.splitlines(keepends=True),
                                        plain_after.splitlines(keepends=True),
                                        fromfile="before.cu", tofile="after.cu"))
    sizes = tasks.get(expert.task).sizes
    plan_diff = "".join(difflib.unified_diff(
        expert.plain_plan(before, sizes).splitlines(keepends=True),
        expert.plain_plan(after, sizes).splitlines(keepends=True),
        fromfile="before.plan", tofile="after.plan"))
    deltas = {m: fast.metrics[m] - slow.metrics[m] for m in slow.metrics if m in fast.metrics}
    speedup = (slow.time_ms / fast.time_ms) if slow.time_ms and fast.time_ms else None
    context = NodeContext(task=expert.task, candidate=expert.candidate(before), measurement=slow,
                          diagnosis=None)
    return Transition(intent=intent_of(flag).name, flag=flag, before=key(before), after=key(after),
                      before_ms=slow.time_ms, after_ms=fast.time_ms, speedup=speedup,
                      metric_deltas=deltas, source_diff=diff,
                      tunables=expert.candidate(after).tunables,
                      diagnosis_before=judge.diagnose(context).to_dict(), plan_diff=plan_diff)


def _rejected(flag: str, start: State, state: State, result: Measurement) -> Rejected:
    still_on = sorted(state)
    if result.status == "error":
        why = "the host could not measure it (not a finding about the kernel)"
    elif result.guard in ("compile", "plan"):
        why = f"the code without {flag} does not build with {still_on or 'nothing else'} on"
    else:
        why = (f"the code without {flag} is {result.guard} with {still_on or 'nothing else'} on: "
               f"{flag} is a precondition of the others, or of these sizes")
    return Rejected(flag=flag, start=key(start), state=key(state), guard=result.guard,
                    message=result.message[:2000], precondition=why)
