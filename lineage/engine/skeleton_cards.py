"""Skeleton cards: a family's schedule, carried to any kernel of that family.

A token-level card (cards.py) generalises what the experts spell alike; a skeleton card
holds a schedule of a family (search/engine/forms/skeletons.py) whose holes take any
math. Its evidence is induced from the recorded lineages: every lineage is placed in a
family by lifting its plain state (all flags off) to a form, or, where its code does
not lift, by its task's tensor shapes; the card then gathers, over the lineages of its
family, the measured steps of the intents its skeleton embodies. What differs between
those tasks (softmax's, layernorm's and cross-entropy's math) is exactly what the
skeleton leaves as holes.

A card is admitted by transfer (`admit`): with a source task's lineage left out, its
skeleton instantiated on that task's plain kernel must pass the gate and reach a stated
share of the log-speed-up the remaining lineages expect (bench/skeleton_admission.py
measures the trials on a GPU host). A card with one source task has nothing to leave
out within the suite; it says so and stays unadmitted unless a trial on a transfer task of
its family (bench/transfer_tasks/, no lineage) reproduces it. Only admitted cards serve
searches (`in_library`); the others keep their trials and risks for people to read.
"""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from typing import Any

from profiling.harness import tasks
from profiling.harness.spec import Task
from search.engine import forms
from search.engine.forms import skeletons

from . import experts
from .cards import speedup_stats
from .walker import Lineage

FORMAT = "optiml-skeleton-cards/2"
# The share of the expected log-speed-up a transfer trial must reach to count as
# reproduced: the roundtrip's own bar (bench/skills_roundtrip.SHARE is 0.9 of the
# expert's time; on a log scale a half keeps the sign and most of the size of the effect).
ADMISSION_SHARE = 0.5


def lineage_family(lineage: Lineage) -> tuple[str | None, str]:
    """(family, how it was found) for a recorded lineage (a suite expert's, or a family
    expert's: lineage/family_experts/)."""
    try:
        expert = experts.load_any(lineage.task)
        form = forms.lift(expert.plain_source(frozenset()), expert.written_plan(frozenset()))
        if isinstance(form, forms.Form):
            return form.family, "its plain state lifts"
        why = form.reason
    except experts.ExpertError as error:
        why = str(error)
    try:
        task = tasks.get(lineage.task)
    except tasks.UnknownTask:
        return None, f"its plain state does not lift ({why}) and its task is not known here"
    # the same computation as the task's naive kernel, written apart from the expert
    naive = forms.lift(task.naive_source, task.naive_plan) if task.naive_source else None
    if isinstance(naive, forms.Form):
        return naive.family, f"its task's naive kernel lifts (its plain state does not: {why})"
    family = family_from_shapes(task)
    return family, f"by its task's tensor shapes (its plain state does not lift: {why})"


def family_from_shapes(task: Task) -> str | None:
    """The family a task's tensor specs alone imply, for the plain shapes only."""
    ins = [spec.shape for spec in task.inputs]
    outs = [spec.shape for spec in task.outputs]
    if all(shape in (("1",), (1,)) for shape in outs) and all(len(s) == 1 for s in ins):
        return forms.FULL_REDUCE
    if all(shape == ins[0] for shape in [*ins, *outs]) and len(ins[0]) == 1:
        return forms.MAP
    return None


def induce(lineages: list[Lineage]) -> list[dict[str, Any]]:
    """One card per skeleton whose family has lineages with steps of its intents."""
    placed = [(lineage, *lineage_family(lineage)) for lineage in lineages]
    cards = []
    for skeleton in skeletons.SKELETONS:
        steps = [
            {"task": lineage.task, "intent": t.intent, "before": t.before, "after": t.after,
             "speedup": t.speedup, "family_found": how}
            for lineage, family, how in placed if family == skeleton.family
            for t in lineage.transitions if t.intent in skeleton.intents and t.speedup]
        if not any(e["intent"] == skeleton.intents[0] for e in steps):
            continue
        cards.append(_card(skeleton, steps))
    return cards


def _card(skeleton, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The card in the library's shape (lineage/engine/library.py: a sentence, effects,
    evidence counts, scope, anchor), so that a library stores, lists, reviews and exports
    it as it does a token card; `evidence["steps"]` are the lineages' measured steps it
    expects from, `anchor["skeleton"]` the schedule it emits."""
    source_tasks = sorted({e["task"] for e in steps})
    speedups = [e["speedup"] for e in steps if e["intent"] == skeleton.intents[0]]
    return {
        "id": f"skeleton:{skeleton.name}", "kind": "skeleton", "intent": skeleton.intents[0],
        "intents": list(skeleton.intents), "family": skeleton.family, "skeleton": skeleton.name,
        "summary": skeleton.summary, "tasks": source_tasks,
        "sentence": f"For any kernel that lifts to the {skeleton.family} family: {skeleton.summary}.",
        "effects": {"speedup": speedup_stats(speedups)},
        "evidence": {"lineages": len(source_tasks), "transitions": len(steps), "steps": steps},
        "scope": {"language": "CUDA", "family": skeleton.family, "tasks": source_tasks},
        "anchor": {"skeleton": skeleton.name, "status": "a skeleton", "rewrites": [], "steps": []},
        "expected_speedup": expected_speedup(steps),
        "expected_by_task": {task: expected_speedup([e for e in steps if e["task"] == task])
                             for task in source_tasks},
        "preconditions": {"skeleton": [f"the kernel lifts to a {skeleton.family} form",
                                       "the skeleton's plan is valid at every L0 and L1 size"]},
        "admission": {"status": "untried"},
    }


def steps_of(card: dict[str, Any]) -> list[dict[str, Any]]:
    """The lineages' measured steps a skeleton card expects from."""
    return card["evidence"]["steps"]


def expected_speedup(evidence: list[dict[str, Any]], leave_out: str | None = None) -> float | None:
    """The product over the skeleton's intents of the geometric mean, across tasks, of
    each task's median step (None when nothing is left to expect from)."""
    kept = [e for e in evidence if e["task"] != leave_out]
    if not kept:
        return None
    total = 0.0
    for intent in sorted({e["intent"] for e in kept}):
        per_task = []
        for task in sorted({e["task"] for e in kept if e["intent"] == intent}):
            steps = sorted(e["speedup"] for e in kept if e["task"] == task and e["intent"] == intent)
            per_task.append(math.log(steps[len(steps) // 2]))
        total += sum(per_task) / len(per_task)
    return math.exp(total)


def admit(card: dict[str, Any], trials: list[dict[str, Any]]) -> dict[str, Any]:
    """The card's admission from transfer trials ({"task", "passed", "speedup"} each, the
    skeleton on that task's plain kernel): reproduced when correct and at least
    ADMISSION_SHARE of the log-speed-up expected on that kernel (`expected_here`)."""
    results = []
    for trial in trials:
        expected = expected_speedup(steps_of(card), leave_out=trial["task"])
        here = expected_here(expected, trial)
        measured = trial.get("speedup")
        ok = bool(trial.get("passed")) and here is not None and measured is not None and (
            math.log(measured) >= ADMISSION_SHARE * math.log(here) if here > 1 else measured >= 0.95)
        results.append({**trial, "expected_without_it": expected, "expected_here": here, "reproduced": ok})
    if len(card["tasks"]) < 2 and not any(r["task"] not in card["tasks"] for r in results):
        status = "unproven"
        why = "one source task: no other lineage of its family to transfer to"
    elif any(r["reproduced"] for r in results):
        status, why = "admitted", "reproduced with its own lineage left out"
    else:
        status, why = "rejected", "no transfer trial reproduced its effect"
    return {"status": status, "why": why, "trials": results, "rule": ADMISSION_RULE,
            "risks": [f"{r['task']}: {shortfall(r)}" for r in results if not r["reproduced"]]}


ADMISSION_RULE = (f"correct, and at least {ADMISSION_SHARE} of the log of the speed-up expected on the "
                  "trial's kernel: the other lineages' expectation, capped by that kernel's headroom "
                  "(its time over the physics floor at the datasheet's peaks)")


def expected_here(expected: float | None, trial: dict[str, Any]) -> float | None:
    """What a trial's kernel can show of the lineages' expectation: no schedule takes a
    kernel below its physics floor, so a kernel already near it (an elementwise map at 60 %
    of DRAM peak) cannot reproduce a step measured from a plain state twenty times above
    its own. Without a floor (`floor_ms`), the expectation as it is."""
    floor, start = trial.get("floor_ms"), trial.get("start_ms")
    if expected is None or not floor or not start:
        return expected
    return min(expected, max(start / floor, 1.0))


def shortfall(trial: dict[str, Any]) -> str:
    if trial.get("why"):  # the skeleton did not apply to that kernel: no measurement
        return f"not applied ({trial['why']})"
    return "failed the gate" if not trial.get("passed") else "too slow"


def in_library(card: dict[str, Any]) -> bool:
    """Whether a card serves searches: admitted by transfer, or any card at all when
    OPTIML_SKILL_ADMISSION=any (to try cards that were rejected or never tried)."""
    return os.environ.get("OPTIML_SKILL_ADMISSION") == "any" or \
        card.get("admission", {}).get("status") == "admitted"


@lru_cache(maxsize=1)
def recorded() -> tuple[dict[str, Any], ...]:
    """The skeleton cards induced from the lineages recorded under bench/results (once a
    process; lifting ten plain kernels takes milliseconds, unlike token induction), each
    with its admission from the newest trials recorded there, if any."""
    from .recorded import RESULTS, recorded_family_lineages, recorded_lineages

    files = [json.loads(path.read_text()) for path in RESULTS.glob("*-skeleton-admission.json")]
    newest = max(files, key=lambda f: f.get("date", ""), default={})  # a readmission is newer
    admissions = newest.get("admission", {})
    return tuple({**card, "admission": admissions.get(card["id"], card["admission"])}
                 for card in induce([*recorded_lineages(), *recorded_family_lineages()]))


def for_library(card: dict[str, Any]) -> dict[str, Any]:
    """The card as a library stores it: as induced, its admission's failed trials as its
    risks (each says what happened), and an example for reviewers: the skeleton
    instantiated on the first of its source tasks' naive kernels it applies to, as a diff."""
    admission = card.get("admission", {})
    risks = [{"kind": "transfer trial", "task": trial["task"], "message": shortfall(trial)}
             for trial in admission.get("trials", []) if not trial.get("reproduced")]
    return {**card, "risks": risks, "example": example(card)}


def example(card: dict[str, Any]) -> dict[str, Any] | None:
    """{task, kernel, title, diff}: what the card's skeleton makes of one of its source
    tasks' kernels (a task's naive kernel, else its expert's plain state), through the
    skills source's own path; None where it applies to none of them here."""
    from profiling.harness.candidate import Candidate
    from search.engine.types import NodeContext

    from . import skeleton_source
    from .steps import kernel_key

    for name, kernel, source, plan in _plain_kernels(card["tasks"]):
        parent = Candidate.from_source_and_plan(source, plan)
        context = NodeContext(task=name, candidate=parent, measurement=None, diagnosis=None)
        try:
            made = skeleton_source.proposals([card], context, set(), kernel_key)
        except tasks.UnknownTask:  # a family expert's task, unknown to this process
            continue
        if made:
            return {"task": name, "kernel": kernel, "title": made[0].title, "diff": made[0].diff}
    return None


def _plain_kernels(names: list[str]):
    """(task, which kernel, source, plan): each task's naive kernel, then its expert's
    plain state (all flags off)."""
    for name in names:
        try:
            task = tasks.get(name)
            if task.naive_source:
                yield name, "its naive kernel", task.naive_source, task.naive_plan
        except tasks.UnknownTask:
            pass
    for name in names:
        try:
            expert = experts.load_any(name)
            yield name, "its expert's plain state", expert.plain_source(frozenset()), \
                expert.written_plan(frozenset())
        except experts.ExpertError:
            pass
