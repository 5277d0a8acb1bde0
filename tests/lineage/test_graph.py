"""A lineage as the tree view's rows (lineage/engine/graph.py), over the walks recorded
on the H200: one root (the plain attempt), every state under a state a forward step
reached it from, and the highlighted path a chain of recorded steps to the expert."""

import json
import math
from pathlib import Path

import pytest

from lineage.engine import experts
from lineage.engine.graph import lineage_rows, path_to_expert
from lineage.engine.walker import Lineage, Transition

RESULTS = Path(__file__).parents[2] / "bench" / "results"
RECORDED = sorted(RESULTS.glob("*-h200-lineages*/lineage-*.json"))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_path_is_a_chain_of_recorded_steps_from_the_plain_attempt_to_the_expert(path):
    lineage = Lineage.from_dict(json.loads(path.read_text()))
    expert = ",".join(sorted(experts.load(lineage.task).all_on()))
    steps = path_to_expert(lineage, expert)
    assert steps[0].before == "" and steps[-1].after == expert
    assert all(a.after == b.before for a, b in zip(steps, steps[1:], strict=False))
    recorded = {(t.before, t.after) for t in lineage.transitions}
    assert all((t.before, t.after) in recorded for t in steps)
    # Along any path the speed-ups multiply to the plain attempt's time over the expert's.
    times = {k: s.measurement["time_ms"] for k, s in lineage.states.items()}
    assert math.prod(t.speedup for t in steps) == pytest.approx(times[""] / times[expert], rel=1e-6)

    graph = lineage_rows(lineage, expert)
    rows = {r["id"]: r for r in graph["rows"]}
    assert [r["id"] for r in rows.values() if r["parentId"] is None] == [graph["path"][0]]
    assert all(r["parentId"] in rows for r in rows.values() if r["parentId"] is not None)
    # Walking up from the expert gives the path: the tree view highlights exactly it.
    up, node = [], rows[graph["expert_id"]]
    while node is not None:
        up.append(node["id"])
        node = rows.get(node["parentId"])
    assert up[::-1] == graph["path"] and len(graph["path"]) == len(steps) + 1
    assert [rows[i]["title"] for i in graph["path"][1:]] == [t.intent for t in steps]


def step(before: str, after: str, speedup: float) -> Transition:
    return Transition(intent=after.split(",")[-1], flag=after, before=before, after=after, before_ms=1.0,
                      after_ms=1.0 / speedup, speedup=speedup, metric_deltas={}, source_diff="", tunables={},
                      diagnosis_before={})


def test_the_path_takes_the_best_step_that_still_leads_to_the_expert():
    # From the plain attempt, A pays most but is a dead end; B leads on to the expert.
    lineage = Lineage(task="relu", expert="x", transitions=[
        step("", "A", 3.0), step("", "B", 1.5), step("B", "A,B", 2.0)])
    assert [t.after for t in path_to_expert(lineage, "A,B")] == ["B", "A,B"]
    assert path_to_expert(Lineage(task="relu", expert="x", transitions=[step("", "A", 2.0)]), "A,B") == []
