"""The roundtrip gate for skill cards: which cards reproduced their effect, from the
searches that used them (issue 10, KLineage part 2).

A **trial** is one node a card made in a search whose parent passed the gate: the card
materialised on fresh state (each search draws its own gate seed), measured against its
parent in the same run. It is

- `own` when the card's step came from the search's own task and the parent and the
  child are, token for token and launch for launch, the step's before- and after-states
  of that lineage (lineage_replay.LineageReplay.state_of): the step replayed where it was
  learned;
- `same_lineage` for a step of the search's own lineage made in another state than its
  own (the lineage's order, tried elsewhere in its lattice);
- `other_lineage` for a step learned in another lineage, or a generalised pattern, on
  a kernel it was not induced from (the leave-one-lineage-out evidence: nothing of the
  kernel it acted on went into the step it used).

The rule for **reproduced**, written down:

- the child passed the gate (correct at every L0 size and at the full size), and
- where the card's evidence claims a speed-up (`expected` > 1 + NOISE, the step's own
  recorded speed-up, else the card's median), the measured speed-up reaches at least
  SHARE_OF_LOG of its logarithm: log(measured) >= 0.5 * log(expected), so a claimed 4x
  needs 2x and a claimed 1.21x needs 1.1x;
- where it claims none (|expected - 1| <= NOISE), the child is not slower than
  1 - NOISE of its parent (the card does no harm where it says it does nothing);
- a step recorded as slowing its kernel (expected < 1 - NOISE) claims nothing to
  reproduce: its trials are kept, with no verdict.

A card's **status**: `verified` when at least one own trial reproduced and at least half
of its own trials did; `failed` when it had own trials and fewer reproduced; `induced`
(untried) when it had none. `generalises` says whether some other_lineage trial
reproduced.
Failed trials are kept as the card's evidence, with the gate's verdict.

Pure: a search's tree in, plain data out.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from profiling.harness import tasks
from search.engine.evaluators import ReplayEvaluator
from search.engine.search import Search, SearchConfig, run_search

from . import experts
from .cards import NOISE
from .lineage_replay import LineageReplay

SHARE_OF_LOG = 0.5
MAX_DEPTH = 12  # as bench/skills_roundtrip.py searched


def reproduced(expected: float | None, measured: float | None, passed: bool) -> bool | None:
    """The rule above; None when the step claims nothing (it was slower where recorded)."""
    if expected is not None and expected < 1 - NOISE:
        return None
    if not passed or measured is None:
        return False
    if expected is not None and expected > 1 + NOISE:
        return math.log(measured) >= SHARE_OF_LOG * math.log(expected)
    return measured >= 1 - NOISE


def trials(search: Search, replay: LineageReplay | None = None) -> list[dict[str, Any]]:
    """Every node a card made under a parent that passed, as a trial (see the module
    docstring). `replay`: the search task's own lineage, to tell own trials apart."""
    found = []
    for node in sorted(search.tree.nodes.values(), key=lambda n: n.id):
        proposal = node.proposal
        if not proposal.source.startswith("skill:") or node.parent is None or not node.done:
            continue
        parent = search.tree[node.parent]
        if not parent.passed or not parent.measurement.time_ms:
            continue
        params = proposal.params
        passed = node.passed and bool(node.measurement.time_ms)
        measured = parent.measurement.time_ms / node.measurement.time_ms if passed else None
        mine = params.get("materialised_by") == "step" and params.get("lineage") == search.task
        own = (mine and replay is not None
               and replay.state_of(parent.proposal.candidate) == params.get("before")
               and replay.state_of(proposal.candidate) == params.get("after"))
        kind = "own" if own else ("same_lineage" if mine else "other_lineage")
        found.append({
            "card": params.get("card", proposal.source.removeprefix("skill:")),
            "task": search.task, "node": node.id, "kind": kind,
            "materialised_by": params.get("materialised_by", ""),
            "from_lineage": params.get("lineage"), "title": proposal.title,
            "expected": proposal.expected_speedup, "measured": measured,
            "levels": [parent.measurement.level, node.measurement.level],
            "status": node.measurement.status, "guard": node.measurement.guard,
            "message": (node.measurement.message or "")[:300],
            "reproduced": reproduced(proposal.expected_speedup, measured, passed),
        })
    return found


def admit(card_ids: list[str], all_trials: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each card's status from its trials (the rule in the module docstring)."""
    result = {}
    for card_id in card_ids:
        mine = [t for t in all_trials if t["card"] == card_id and t["reproduced"] is not None]
        own = [t for t in mine if t["kind"] == "own"]
        same = [t for t in mine if t["kind"] == "same_lineage"]
        elsewhere = [t for t in mine if t["kind"] == "other_lineage"]
        own_ok = sum(t["reproduced"] for t in own)
        if not own:
            status = "induced"
        elif own_ok >= 1 and 2 * own_ok >= len(own):
            status = "verified"
        else:
            status = "failed"
        result[card_id] = {
            "status": status, "own": {"trials": len(own), "reproduced": own_ok},
            "same_lineage": {"trials": len(same), "reproduced": sum(t["reproduced"] for t in same)},
            "other_lineage": {"trials": len(elsewhere),
                              "reproduced": sum(t["reproduced"] for t in elsewhere),
                              "tasks": sorted({t["task"] for t in elsewhere if t["reproduced"]})},
            "generalises": any(t["reproduced"] for t in elsewhere),
            "failed_trials": [t for t in mine if not t["reproduced"]][:12],
        }
    return result


def replay_roundtrip(task_name: str, evaluations: int, recording: Path | str,
                     sources: list | None = None) -> Search:
    """A roundtrip search of bench/skills_roundtrip.py again, over its recording: from the
    expert's all-off state as written, the skill cards alone (or `sources`), the rule
    judge, seed 0, for the `evaluations` the recorded run made, the search and the cards
    as they were when it was recorded (2026-12-01: no lookahead, no measured reach). The same cards give the
    same tree; a kernel the run never measured is an error saying so."""
    from search.engine.__main__ import fast_math_allowed
    from search.engine.judges import RuleJudge

    from .skills import SkillSource

    judge = RuleJudge(read_forms=False)  # unprofiled nodes ranked as the recorded run ranked them
    search = Search(task_name, experts.load(task_name).written_candidate(frozenset()), judge=judge,
                    fallback_judge=judge,
                    sources=sources if sources is not None
                    else [SkillSource(together=False, prune_orders=False, measured_reach=False,
                                  skeletons=False)],
                    config=SearchConfig(budget=evaluations, seed=0, max_depth=MAX_DEPTH, lookahead=0.0),
                    tolerance_allows_fast_math=fast_math_allowed(tasks.get(task_name)))
    return run_search(search, ReplayEvaluator(recording), budget=evaluations)
