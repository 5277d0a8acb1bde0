"""Walking a kernel without flags backwards: an LLM removes one optimization at a time.

A kernel a user uploads has no `OPT_` flags to turn off, so the model is asked for a
simpler version with exactly one optimization removed, named from the shared vocabulary
(vocabulary.py). Each answer goes through the same gate as the flag walker (any
search.engine Evaluator) and lands in the same records (walker.py's dataclasses), with
`proposer="llm:<model>"` so a lineage says which steps a model made:

- an answer the gate accepts becomes the new current state ("step-1", "step-2", ...;
  "step-0" is the given kernel) and a forward Transition (simpler -> more optimized);
- an answer the gate refuses is a Rejected record with the gate's guard, and its
  measured state is kept as "step-<n>-rejected-<attempt>";
- an answer that is no candidate at all (not JSON, an intent outside the vocabulary,
  the kernel unchanged, a plan that does not parse) is a Rejected record with guard
  `LLM_OUTPUT` and is never measured.

Both kinds of refusal are asked again, up to `attempts_per_step`, with the reasons in the
prompt. The walk is a single chain (one model, one removal order) and stops when the
model says nothing is left to remove (`{"intent": null}`: the lineage is `complete`),
when it names an intent it already removed, after `max_steps`, when a step runs out of
attempts, or when the endpoint cannot answer (a Rejected record with guard
`LLM_UNAVAILABLE` says why). No exception from the model escapes: the lineage holds what
was reached.
"""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any

from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.spec import Task
from search.engine.judges import prompts
from search.engine.types import Evaluator, JudgeError, Measurement, NodeContext

from .vocabulary import INTENTS, flag_name
from .walker import Lineage, Rejected, StateRecord, Transition, _compact

LLM_OUTPUT = "llm_output"  # the answer is not a usable simpler candidate (never measured)
LLM_UNAVAILABLE = "llm_unavailable"  # the endpoint gave no answer after its own retries
EVALUATOR_TIMEOUT = "evaluator_timeout"  # the evaluator did not answer within timeout_s

SYSTEM = (
    "You are a CUDA performance engineer reconstructing how an optimized kernel was "
    "written, one optimization at a time, backwards. You undo exactly one optimization "
    "and keep the kernel correct. Reply with one JSON object and nothing else."
)


class UnusableAnswer(ValueError):
    """The model's answer cannot be measured; the message says why (it goes in the prompt
    of the next attempt and in the Rejected record)."""

    def __init__(self, message: str, intent: str = "") -> None:
        super().__init__(message)
        self.intent = intent


@dataclass(frozen=True)
class Answer:
    intent: str | None  # None: the model says nothing in the vocabulary is left to remove
    candidate: Candidate | None
    why: str = ""


@dataclass
class _Step:
    key: str
    candidate: Candidate
    measurement: Measurement


def walk_unmarked(task: Task, candidate: Candidate, evaluator: Evaluator, llm, *,
                  max_steps: int = 8, attempts_per_step: int = 2, judge=None,
                  expert: str = "uploaded", timeout_s: float = 3600.0) -> Lineage:
    """The lineage of `candidate`, a kernel without flags, de-optimized by `llm` (an
    LLMJudge: its retries, timeouts and token accounting apply to every request).

    max_steps: accepted removals at most (each costs one to `attempts_per_step` requests
        and gate runs). expert: what the lineage names as its expert (the upload's label).
    timeout_s: how long one gate run may take before the walk stops (the walker's bound).
    """
    from search.engine.judges import RuleJudge

    judge = judge or RuleJudge()
    started = time.monotonic()
    lineage = Lineage(task=task.name, expert=expert)
    current = _measure_into(lineage, evaluator, task, "step-0", candidate, timeout_s)
    if current is None or not current.measurement.passed:
        lineage.stopped = (f"the evaluator gave no measurement within {timeout_s:g} s" if current is None
                           else "the kernel itself did not pass the gate: there is nothing to walk back from")
        lineage.seconds = time.monotonic() - started
        return lineage
    removed: dict[str, str] = {}  # intent -> the state that no longer has it
    seen = {candidate.content_hash()}
    lineage.stopped = f"the bound: {max_steps} accepted removals (max_steps)"
    for number in range(1, max_steps + 1):
        rejected_before = len(lineage.rejected)
        outcome = _one_step(task, current, number, evaluator, llm, judge, lineage, removed, seen,
                            attempts_per_step, timeout_s)
        if outcome is None:
            lineage.stopped = _stopped(lineage, rejected_before, attempts_per_step)
            break
        current = outcome
    lineage.seconds = time.monotonic() - started
    return lineage


def _stopped(lineage: Lineage, rejected_before: int, attempts: int) -> str:
    """Why the step that returned no state ended the walk."""
    if lineage.complete:
        return "the model found nothing of the vocabulary left to remove"
    last = lineage.rejected[-1] if len(lineage.rejected) > rejected_before else None
    if last is not None and last.precondition.startswith("the walk stopped here"):
        return last.precondition.removeprefix("the walk stopped here: ")
    return f"every one of the step's {attempts} attempts was refused (its rejected attempts say why)"


def _one_step(task: Task, current: _Step, number: int, evaluator: Evaluator, llm, judge,
              lineage: Lineage, removed: dict[str, str], seen: set[str], attempts: int,
              timeout_s: float) -> _Step | None:
    """The next state, or None when the walk ends here (the reason is in `lineage`)."""
    failures: list[str] = []
    for attempt in range(1, attempts + 1):
        messages = deopt_messages(task, current.candidate, list(removed), failures)
        try:
            text = llm.ask("deoptimize", messages, str)  # the judge's retries, our reading
        except JudgeError as error:
            lineage.rejected.append(_refusal(llm, current.key, "", LLM_UNAVAILABLE, str(error),
                                             "the walk stopped here: the model gave no answer"))
            return None
        try:
            answer = read_answer(text, current.candidate, seen)
        except UnusableAnswer as error:
            lineage.rejected.append(_refusal(llm, current.key, error.intent, LLM_OUTPUT, str(error),
                                             "the model's answer is not a simpler candidate"))
            failures.append(f"attempt {attempt}: {error}")
            continue
        if answer.intent is None:
            lineage.complete = True  # by the model's reading: nothing left to remove
            return None
        if answer.intent in removed:
            message = f"{answer.intent} was already removed (in {removed[answer.intent]})"
            lineage.rejected.append(_refusal(llm, current.key, answer.intent, LLM_OUTPUT, message,
                                             "the walk stopped here: the model repeats itself"))
            return None
        seen.add(answer.candidate.content_hash())
        name = f"step-{number}"
        simpler = _measure_into(lineage, evaluator, task, name, answer.candidate, timeout_s,
                                rejected_key=f"{name}-rejected-{attempt}")
        if simpler is None:
            lineage.rejected.append(_refusal(llm, current.key, answer.intent, EVALUATOR_TIMEOUT,
                                             f"no measurement within {timeout_s:g} s",
                                             "the walk stopped here: the evaluator did not answer"))
            return None
        if not simpler.measurement.passed:
            lineage.rejected.append(_gate_refusal(llm, current.key, simpler, answer.intent))
            failures.append(f"attempt {attempt}: removing {answer.intent} was refused by the gate "
                            f"({simpler.measurement.guard}: {simpler.measurement.message[:300]})")
            continue
        lineage.transitions.append(_transition(task, judge, llm, simpler, current, answer.intent))
        removed[answer.intent] = name
        return simpler
    return None


# --- asking -------------------------------------------------------------------------------


def deopt_messages(task: Task, candidate: Candidate, removed: list[str],
                   failures: Sequence[str] = ()) -> list[dict[str, str]]:
    """The request: the kernel and its plan, the task's contract (never the reference's
    code), the vocabulary with its sentences, and what was removed or tried already."""
    vocabulary = "\n".join(f"- {i.name} ({i.family}): {i.sentence}" for i in INTENTS.values())
    shape = {"intent": "the vocabulary name of the ONE optimization you removed, or null when "
                       "none of the vocabulary is left to remove",
             "source": "the FULL simpler CUDA source",
             "plan": "optional: changes to the launch plan ({\"tunables\": {...}}) or the FULL plan",
             "why": "one sentence: what you removed and how the code reads without it"}
    tried = "\n".join(f"- {f}" for f in failures)
    prompt = "\n\n".join(part for part in [
        "Remove exactly ONE optimization from this kernel: rewrite it the way it would read "
        "without that idea, simpler and still correct. Change nothing else.",
        prompts.task_facts(task),
        f"CUDA source:\n```cuda\n{candidate.source}\n```",
        f"Launch plan: {json.dumps(candidate.plan_dict(), separators=(',', ':'))}",
        f"Name the optimization from this vocabulary:\n{vocabulary}",
        f"Already removed on the way here: {', '.join(removed) or 'nothing yet'} "
        "(never name these again).",
        f"Your earlier answers for this step that could not be used:\n{tried}" if failures else "",
        prompts.CANDIDATE_RULES,
        f"Answer with JSON of this shape: {json.dumps(shape)}",
    ] if part)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def read_answer(text: str, current: Candidate, seen: Set[str] = frozenset()) -> Answer:
    """The model's answer as a measurable candidate, or UnusableAnswer saying why not.
    `seen`: content hashes already in the lineage (an answer may not go back to one)."""
    try:
        data = prompts.parse_object(text)
    except prompts.MalformedReply as error:
        raise UnusableAnswer(str(error)) from None
    intent = data.get("intent")
    if intent is None:
        return Answer(None, None, str(data.get("why") or ""))
    if not isinstance(intent, str) or intent.strip().upper().removeprefix("OPT_") not in INTENTS:
        raise UnusableAnswer(f"intent {intent!r} is not in the shared vocabulary", str(intent))
    intent = intent.strip().upper().removeprefix("OPT_")
    source = data.get("source")
    if not isinstance(source, str) or not source.strip():
        raise UnusableAnswer("'source' must be the full simpler CUDA source", intent)
    source = prompts.strip_fences(source)
    if "".join(source.split()) == "".join(current.source.split()):
        raise UnusableAnswer(f"the source is unchanged: nothing of {intent} was removed", intent)
    try:
        candidate = Candidate.from_source_and_plan(source, _plan(current, data.get("plan")))
    except CandidateError as error:
        raise UnusableAnswer(f"not a candidate: {error}", intent) from None
    if candidate.content_hash() in seen:
        raise UnusableAnswer("the kernel is one the lineage already holds", intent)
    return Answer(intent, candidate, str(data.get("why") or ""))


def _plan(current: Candidate, change: Any) -> dict[str, Any]:
    """The current plan, replaced by a full plan (one with "launches") or updated by a
    partial one; tunables are merged name by name."""
    plan = current.plan_dict()
    if change is None:
        return plan
    if not isinstance(change, dict):
        raise CandidateError("'plan' must be a JSON object")
    if "launches" in change:
        return change
    tunables = change.get("tunables")
    if tunables is not None and not isinstance(tunables, dict):
        raise CandidateError("'tunables' must be an object of NAME: integer")
    return {**plan, **change, "tunables": {**plan["tunables"], **(tunables or {})}}


# --- measuring and recording --------------------------------------------------------------


def _measure_into(lineage: Lineage, evaluator: Evaluator, task: Task, name: str,
                  candidate: Candidate, timeout_s: float, rejected_key: str = "") -> _Step | None:
    """Measure one candidate and record its state (under `rejected_key` when the gate
    refuses it, so that "step-<n>" always names an accepted state); None on timeout."""
    digest = candidate.content_hash()
    evaluator.submit(task.name, candidate)
    deadline = time.monotonic() + timeout_s
    measurement = None
    while measurement is None:
        if time.monotonic() > deadline:
            return None
        measurement = next((m for h, m in evaluator.collect(timeout_s=5.0) if h == digest), None)
    key = name if measurement.passed or not rejected_key else rejected_key
    lineage.gpu = lineage.gpu or measurement.gpu
    lineage.order.append(key)
    # No flags: an uploaded kernel's optimizations are not known up front.
    lineage.states[key] = StateRecord([], digest, _compact(measurement))
    return _Step(key, candidate, measurement)


def _transition(task: Task, judge, llm, simpler: _Step, current: _Step, intent: str) -> Transition:
    slow, fast = simpler.measurement, current.measurement
    deltas = {m: fast.metrics[m] - slow.metrics[m] for m in slow.metrics if m in fast.metrics}
    speedup = (slow.time_ms / fast.time_ms) if slow.time_ms and fast.time_ms else None
    context = NodeContext(task=task.name, candidate=simpler.candidate, measurement=slow,
                          diagnosis=None)
    return Transition(intent=intent, flag=flag_name(intent), before=simpler.key, after=current.key,
                      before_ms=slow.time_ms, after_ms=fast.time_ms, speedup=speedup,
                      metric_deltas=deltas, source_diff=plain_diff(simpler.candidate, current.candidate),
                      tunables=current.candidate.tunables,
                      diagnosis_before=judge.diagnose(context).to_dict(), proposer=llm.name)


def plain_diff(before: Candidate, after: Candidate) -> str:
    """The source's unified diff, then the plan's when the model changed it."""
    def lines(text: str) -> list[str]:
        return text.splitlines(keepends=True)

    diff = "".join(difflib.unified_diff(lines(before.source), lines(after.source),
                                        fromfile="before.cu", tofile="after.cu"))
    if before.plan_dict() != after.plan_dict():
        plans = [json.dumps(c.plan_dict(), indent=1, sort_keys=True) + "\n" for c in (before, after)]
        diff += "".join(difflib.unified_diff(lines(plans[0]), lines(plans[1]),
                                             fromfile="before.plan.json", tofile="after.plan.json"))
    return diff


def _gate_refusal(llm, start: str, simpler: _Step, intent: str) -> Rejected:
    result = simpler.measurement
    if result.status == "error":
        why = "the host could not measure it (not a finding about the kernel)"
    elif result.guard in ("compile", "plan"):
        why = f"the model's kernel without {intent} does not build"
    else:
        why = (f"the model's kernel without {intent} is {result.guard}: the removal was not "
               "done right, or the others depend on it")
    return _refusal(llm, start, intent, result.guard, result.message, why, state=simpler.key)


def _refusal(llm, start: str, intent: str, guard: str | None, message: str, why: str,
             state: str = "") -> Rejected:
    flag = flag_name(intent) if intent in INTENTS else intent
    return Rejected(flag=flag, start=start, state=state, guard=guard, message=message[:2000],
                    precondition=why, proposer=llm.name)
