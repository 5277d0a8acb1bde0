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
