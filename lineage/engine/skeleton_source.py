"""Skeleton cards as proposals: lift the node's kernel once, instantiate each card of its
family with the node's own math.

Called by the skills source (skills.SkillSource) for every node. A kernel is lifted once
per (source, plan) (`forms.cached`); a kernel that does not lift gets no skeleton proposal, and
the refusal is kept for the explorer to show. A proposal says `skill:<card id>`, names
the tasks whose lineages the card was induced from, and cites their measured steps.
"""

from __future__ import annotations

import json
from typing import Any

from profiling.harness import tasks
from profiling.harness.candidate import Candidate, CandidateError
from search.engine import forms
from search.engine.diffs import candidate_diff
from search.engine.forms import cached, skeletons, splice
from search.engine.types import NodeContext, Proposal

from .skeleton_cards import expected_speedup, steps_of


def lifted_launches(candidate: Candidate) -> tuple[tuple[int | None, forms.Form | forms.Refusal], ...]:
    """The candidate's forms, lifted once per (source, plan) in this process: the whole
    plan's (index None), or, for a plan of several launches, each launch's."""
    return cached.lifted_launches(candidate.source, json.dumps(candidate.plan_dict(), sort_keys=True))



def usable(card: dict[str, Any], task: str, leave_out_own: bool) -> bool:
    """A card may serve this task: with the task's own lineage left out, it needs another."""
    return not leave_out_own or any(t != task for t in card.get("tasks", []))


def proposals(cards: list[dict[str, Any]], context: NodeContext, seen: set, key,
              leave_out_own: bool = False) -> list[Proposal]:
    parent = context.candidate
    task = tasks.get(context.task)
    found = []
    for index, form in lifted_launches(parent):
        if isinstance(form, forms.Form):
            found += _for_form(cards, context, task, index, form, seen, key, leave_out_own)
    return found


def _for_form(cards, context: NodeContext, task, index: int | None, form: forms.Form, seen: set, key,
              leave_out_own: bool) -> list[Proposal]:
    parent, plan = context.candidate, context.candidate.plan_dict()
    found = []
    for card in cards:
        if card.get("kind") != "skeleton" or card.get("family") != form.family \
                or not usable(card, context.task, leave_out_own):
            continue
        skeleton = skeletons.by_name(card["skeleton"])
        emitted = skeleton.emit(form, plan if index is None else splice.sub_plan(plan, index, parent.source),
                                task)
        if isinstance(emitted, str):
            continue
        whole = (emitted.source, emitted.plan) if index is None else \
            splice.splice(parent.source, plan, index, form, emitted)
        if isinstance(whole, str):
            continue
        try:
            child = Candidate.from_dict({**whole[1], "source": whole[0],
                                         "compile_options": list(parent.compile_options)})
        except CandidateError:
            continue
        if key(child) in seen:
            continue
        seen.add(key(child))
        sources = [t for t in card["tasks"] if not (leave_out_own and t == context.task)]
        where = "" if index is None else f" on launch {index} ({form.kernel})"
        found.append(Proposal(
            source=f"skill:{card['id']}", title=f"{card['intent']}: {card['skeleton']}{where} "
                                                f"(from {', '.join(sources)})",
            rationale=_rationale(card, form, sources), candidate=child,
            families=skeleton.families, diff=candidate_diff(parent, child),
            params={"card": card["id"], "materialised_by": "skeleton", "skeleton": card["skeleton"],
                    "family": form.family, "lineages": sources, "holes": form.holes(),
                    "admission": card.get("admission", {}).get("status", "untried")},
            expected_speedup=_expected(card, context.task if leave_out_own else None)))
    return found


def _expected(card: dict[str, Any], leave_out: str | None) -> float | None:
    return expected_speedup(steps_of(card), leave_out=leave_out)


def _rationale(card: dict[str, Any], form: forms.Form, sources: list[str]) -> str:
    steps = [e for e in steps_of(card) if e["task"] in sources and e["intent"] == card["intent"]]
    cited = ", ".join(f"{e['task']} {e['before'] or 'plain'} -> +{e['intent']} {e['speedup']:.2f}x"
                      for e in steps[:4])
    return (f"The kernel lifts to a {form.family} form; skeleton {card['skeleton']}: {card['summary']}. "
            f"Induced from the lineages of {', '.join(sources)} ({cited}). "
            f"Admission: {card.get('admission', {}).get('status', 'untried')}.")
