"""GET /api/runs/compare/?a=&b=: two runs side by side, their best paths from the node
rows, and the diff between their best kernels."""

from __future__ import annotations

import pytest

from search.models import RunNode

pytestmark = pytest.mark.django_db


def test_two_runs_side_by_side_with_their_best_paths_and_the_kernels_diff(api, people, relu_run):
    a = relu_run(3, user=people["alice"])
    b = relu_run(1, user=people["alice"])
    body = api(people["alice"]).get(f"/api/runs/compare/?a={a.pk}&b={b.pk}").json()

    assert body["same_task"] is True and body["a"]["id"] == a.pk and body["b"]["id"] == b.pk
    path = body["a"]["path"]
    assert path[0]["id"] == 0 and path[-1]["id"] == body["a"]["best_node"]
    rows = {n.node_id: n for n in RunNode.objects.filter(run=a)}
    for parent, child in zip(path, path[1:], strict=False):  # each step is the next one's parent
        assert rows[child["id"]].parent_id == parent["id"]
    root = {"id": 0, "source": "root", "title": rows[0].title, "time_ms": rows[0].time_ms}
    assert body["b"]["path"] == [root]
    # Each side's best after each evaluation: never rising, ending at its best node's time.
    curve = body["a"]["best_so_far"]
    evaluated = [n for n in rows.values() if n.state == "done" and not n.detail.get("reused")]
    assert len(curve) == len(evaluated) and curve[0] == rows[0].time_ms
    assert all(later <= earlier for earlier, later in zip(curve, curve[1:], strict=False))
    assert curve[-1] == rows[body["a"]["best_node"]].time_ms
    assert body["b"]["best_so_far"] == [rows[0].time_ms]
    if body["a"]["best_node"] != 0:
        assert body["diff"].startswith("--- a/kernel.cu") or "plan.json" in body["diff"]
    else:
        assert body["diff"] == ""  # both best kernels are the naive one


def test_compare_names_a_missing_run_and_hides_other_peoples(api, people, relu_run):
    mine = relu_run(1, user=people["alice"])
    theirs = relu_run(1, user=people["carol"])
    alice = api(people["alice"])
    missing = alice.get(f"/api/runs/compare/?a={mine.pk}")
    assert missing.status_code == 400 and "b" in missing.json()
    assert alice.get(f"/api/runs/compare/?a={mine.pk}&b=x").status_code == 400
    assert alice.get(f"/api/runs/compare/?a={mine.pk}&b={theirs.pk}").status_code == 404


def _settings(body: dict) -> dict[str, dict]:
    return {(row["group"], row["name"]): row for row in body["settings"]}


def test_compare_sets_the_runs_settings_and_best_tunables_side_by_side_and_marks_the_differences(
    api, people, relu_run
):
    from profiling.harness.gate import GateOptions
    from search.models import Run

    a = relu_run(3, user=people["alice"], gate_options=GateOptions(time_limit_s=120),
                 source_names=["tunable"])
    b = relu_run(1, drive=False, user=people["alice"], evaluator="demo")
    # Run a's best is a kernel of the tunable source: its BLOCK is not the root's 256.
    tuned = next(n for n in RunNode.objects.filter(run=a, source="tunable").select_related("candidate")
                 if n.candidate.plan["tunables"]["BLOCK"] != 256)
    Run.objects.filter(pk=a.pk).update(best_node=tuned.node_id)
    body = api(people["alice"]).get(f"/api/runs/compare/?a={a.pk}&b={b.pk}").json()
    rows = _settings(body)

    assert [name for group, name in rows if group == "settings"] == [
        "budget", "time limit", "sources", "judge", "evaluator", "search seed", "screen", "parallel"]
    assert rows["settings", "budget"] == {"group": "settings", "name": "budget", "unit": "evaluations",
                                              "values": [3, 1], "differs": True}
    limit = rows["settings", "time limit"]
    assert limit["values"] == [120.0, 600.0] and limit["unit"] == "s"
    assert rows["settings", "sources"]["values"][0] == ["tunable"] and rows["settings", "sources"]["differs"]
    assert rows["settings", "judge"] == {"group": "settings", "name": "judge", "unit": "",
                                         "values": ["rules", "rules"], "differs": False}
    gate, demo = rows["settings", "evaluator"]["values"]
    assert gate == "gate" and demo.startswith("demo (recorded on the NVIDIA H200")
    assert rows["settings", "screen"]["values"] == [True, False]  # a demo run is never screened
    block = rows["tunables", "BLOCK"]
    assert block["values"] == [tuned.candidate.plan["tunables"]["BLOCK"], 256] and block["differs"] is True
    assert rows["tunables", "compile options"] == {"group": "tunables", "name": "compile options", "unit": "",
                                                   "values": [[], []], "differs": False}


def test_a_tunable_only_one_best_kernel_has_is_none_for_the_other(db):
    from profiling.harness.candidate import Candidate as HarnessCandidate
    from search.comparison import run_settings_rows
    from search.models import Run

    plan = {"launches": [{"kernel": "k", "grid": [1], "block": ["BLOCK"], "args": []}],
            "tunables": {"BLOCK": 128}}
    one = HarnessCandidate.from_source_and_plan("__global__ void k() {}", plan)
    other = HarnessCandidate.from_source_and_plan("__global__ void k() {}", {**plan, "tunables": {
        "BLOCK": 128, "UNROLL": 4}})
    runs = [Run(budget=5, gate_options={}, sources=["tunable"], judge="rules", seed=0) for _ in range(2)]
    rows = {row["name"]: row for row in run_settings_rows(runs=runs, kernels=[one, other])}
    assert rows["BLOCK"]["values"] == [128, 128] and not rows["BLOCK"]["differs"]
    assert rows["UNROLL"]["values"] == [None, 4] and rows["UNROLL"]["differs"]
    chosen = ("budget", "time limit", "sources", "judge", "evaluator")
    assert not any(rows[name]["differs"] for name in chosen)
