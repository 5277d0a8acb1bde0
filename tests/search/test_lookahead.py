"""The search's lookahead (SearchConfig.lookahead, Search._lookahead): a node counts on
what was measured reachable from its very kernel (Proposal.reaches) before a child
repeats the measurement, so a lineage's plain attempt, slower than the kernel it
replaces, still leads the search into the steps its lineage recorded.

SYNTHETIC NUMBERS: the times below are made up for the mechanics (as engine_fakes'
table); the H200 runs that motivated this are in bench/results/2026-12-03-h200-transfer/.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from engine_fakes import ROOT, SYNTHETIC_GPU, FixedJudge

from search.engine.evaluators import ReplayEvaluator
from search.engine.search import Search, SearchConfig, run_search
from search.engine.types import Measurement, NodeContext, Proposal

ENTRY = dataclasses.replace(ROOT, tunables={**ROOT.tunables, "ENTRY": 1})
STEP = dataclasses.replace(ENTRY, tunables={**ENTRY.tunables, "STEP": 1})
WIDTH, DEPTH = 4, 4  # distractors: each a little faster than its parent, each refinable


def distractors(path=()):
    """The tunable-like distractors below the one at `path` (the root: ()): WIDTH
    children a level, DEPTH levels, each with its path."""
    if len(path) == DEPTH:
        return []
    return [(dataclasses.replace(ROOT, tunables={**ROOT.tunables, "D": "-".join(map(str, (*path, i)))}),
             (*path, i)) for i in range(WIDTH)]


def all_times():
    times, todo = [(ROOT, 1.0), (ENTRY, 3.0), (STEP, 0.1)], [((), 1.0)]
    while todo:
        path, ms = todo.pop()
        for child, child_path in distractors(path):
            child_ms = ms * (0.99 - 0.001 * child_path[-1])
            times.append((child, child_ms))
            todo.append((child_path, child_ms))
    return times


class LineageLike:
    """At the root: a plain attempt (3x slower, no measured reach; proposed first, so
    tried first) among refinable tunable-like distractors, each a little faster. At the
    plain attempt: its recorded step, measured 0.9x alone but reaching 30x along its
    lineage."""

    name = "lineage-like"

    def __init__(self, reaches: float | None = 30.0) -> None:
        self.reaches = reaches

    def propose(self, context: NodeContext) -> list[Proposal]:
        here = context.candidate.content_hash()
        if here == ENTRY.content_hash():
            return [Proposal(source="skill:x", title="the recorded step", rationale="", candidate=STEP,
                             families=("unroll",), expected_speedup=0.9, reaches=self.reaches)]
        if here == STEP.content_hash():
            return []
        mark = str(context.candidate.tunables.get("D", ""))
        path = tuple(int(i) for i in mark.split("-") if i)
        entry = ([Proposal(source="lineage:relu", title="plain attempt", rationale="", candidate=ENTRY,
                           families=("unroll",))] if not path else [])
        return [*entry, *(Proposal(source="tunable", title=f"D {c.tunables['D']}", rationale="",
                                   candidate=c, families=("unroll",)) for c, _ in distractors(path))]


@pytest.fixture(name="replay")
def replay_fixture(tmp_path):
    path = tmp_path / "rec.json"
    recorded = {c.content_hash(): Measurement(status="passed", time_ms=t, spread_ms=t * 1e-3,
                                              gpu=SYNTHETIC_GPU).to_dict()
                for c, t in all_times()}
    path.write_text(json.dumps({"gpu": SYNTHETIC_GPU, "task": "relu", "recorded": recorded}))
    return ReplayEvaluator(path)


def searched(replay, *, lookahead: float, reaches: float | None = 30.0, budget: int = 16) -> Search:
    search = Search("relu", ROOT, judge=FixedJudge(wants=("unroll",)), sources=[LineageLike(reaches)],
                    config=SearchConfig(budget=budget, seed=0, lookahead=lookahead))
    return run_search(search, replay)


def titles(search: Search) -> list[str]:
    return [r["title"] for r in search.tree.rows()]


def test_a_slower_plain_attempt_with_a_measured_reach_leads_into_its_step(replay):
    search = searched(replay, lookahead=1.0)
    assert "the recorded step" in titles(search)
    assert search.summary()["best_time_ms"] == pytest.approx(0.1)
    entry = next(n for n in search.tree.nodes.values() if n.proposal.title == "plain attempt")
    # its return counted log(30) beyond its own reward log(1/3) before its step was measured
    assert entry.reward == pytest.approx(math.log(1.0 / 3.0))


def test_without_the_lookahead_the_plain_attempt_is_left_after_one_visit(replay):
    search = searched(replay, lookahead=0.0)
    assert "plain attempt" in titles(search)
    assert "the recorded step" not in titles(search)


def test_an_expectation_not_measured_from_this_kernel_is_not_counted_on(replay):
    """A card's median carried over from other kernels (reaches None) only weighs the
    prior; the plain attempt's return stays its reward."""
    search = searched(replay, lookahead=1.0, reaches=None)
    assert "the recorded step" not in titles(search)


def test_a_state_saved_before_the_lookahead_goes_on_without_it():
    saved = SearchConfig(budget=5).to_dict()
    del saved["lookahead"]
    assert SearchConfig.from_dict(saved).lookahead == 0.0
    assert SearchConfig.from_dict(SearchConfig(budget=5).to_dict()).lookahead == 1.0
