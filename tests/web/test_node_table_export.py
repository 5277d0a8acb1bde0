"""A run's node table as CSV and JSON (issue 35): a line per node with who proposed it, its
verdict, median time, speed-ups over the root and the vendor, level and depth; and the
run's own speed-up over the vendor, with the GPU the vendor was timed on."""

from __future__ import annotations

import csv
import io

import pytest

from profiling import selectors as gate_selectors
from profiling.models import Task
from search import node_table
from search.models import RunNode

pytestmark = pytest.mark.django_db

RELU_VENDOR_MS = 0.5059  # profiling/harness/tasks/relu.py, torch on the H200


@pytest.fixture
def run(relu_run, people):
    """alice's relu run: the recorded root, its failed children, and a faster child (99)
    whose title a spreadsheet would take for a formula."""
    run = relu_run(budget=3, user=people["alice"], team=people["team"])
    root = RunNode.objects.get(run=run, node_id=0)

    def engine(node_id: int, parent: int, depth: int) -> dict:  # the run's state reads it
        return {**root.engine, "id": node_id, "parent": parent, "depth": depth, "created": node_id}

    RunNode.objects.create(run=run, node_id=99, parent_id=0, candidate=root.candidate, state="done",
                           source="llm:m", title='=HYPERLINK("http://x")', status="passed", level="screen",
                           time_ms=run.root_ms / 2, spread_ms=0.001, engine=engine(99, 0, 1),
                           detail={"measurement": {"gpu": "NVIDIA H200", "time_ms": run.root_ms / 2}})
    RunNode.objects.create(run=run, node_id=100, parent_id=99, candidate=root.candidate, state="pending",
                           source="tunable", title="block 512", engine=engine(100, 99, 2))
    return run


def _csv_rows(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_csv_has_a_line_per_node_with_its_verdict_time_speedups_level_and_depth(api, people, run):
    response = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes.csv")

    assert response.status_code == 200 and response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="optiml-run-{run.pk}-relu-nodes.csv"'
    assert response.content.decode().splitlines()[0] == ",".join(node_table.COLUMNS)
    rows = {int(row["id"]): row for row in _csv_rows(response)}
    assert sorted(rows) == sorted(RunNode.objects.filter(run=run).values_list("node_id", flat=True))
    root, fast, waiting = rows[0], rows[99], rows[100]
    assert (root["parent"], root["source"], root["status"], root["depth"]) == ("", "root", "passed", "0")
    assert float(root["median_ms"]) == pytest.approx(run.root_ms) and float(root["speedup_vs_root"]) == 1.0
    assert float(root["speedup_vs_vendor"]) == pytest.approx(RELU_VENDOR_MS / run.root_ms)
    assert (fast["parent"], fast["source"], fast["level"], fast["depth"], fast["gpu"]) == (
        "0", "llm:m", "screen", "1", "NVIDIA H200")
    assert float(fast["speedup_vs_root"]) == pytest.approx(2.0)
    assert float(fast["speedup_vs_vendor"]) == pytest.approx(RELU_VENDOR_MS / (run.root_ms / 2))
    assert fast["title"] == '\'=HYPERLINK("http://x")'  # text to a spreadsheet, not a formula
    assert (waiting["state"], waiting["status"], waiting["median_ms"], waiting["depth"]) == (
        "pending", "", "", "2")
    failed = [row for row in rows.values() if row["status"] not in ("passed", "")]
    assert failed and all(row["speedup_vs_root"] == row["speedup_vs_vendor"] == "" for row in failed)


def test_the_json_holds_the_same_rows_and_what_the_speedups_are_over(api, people, run):
    client = api(people["bob"])  # a member of the run's team

    table = client.get(f"/api/runs/{run.pk}/nodes.json").json()
    lines = _csv_rows(client.get(f"/api/runs/{run.pk}/nodes.csv"))

    assert table["run"] == {"id": run.pk, "task": "relu", "root_ms": run.root_ms, "best_ms": run.best_ms,
                            "vendor_ms": RELU_VENDOR_MS, "vendor_gpu": "H200",
                            "vendor_source": "recorded on the H200"}
    assert table["columns"] == list(node_table.COLUMNS)
    assert [row["id"] for row in table["nodes"]] == [int(line["id"]) for line in lines]
    fast = next(row for row in table["nodes"] if row["id"] == 99)
    assert fast["speedup_vs_root"] == pytest.approx(2.0) and fast["title"] == '=HYPERLINK("http://x")'


def test_a_share_links_holder_downloads_the_table_and_a_stranger_does_not(api, people, run):
    link = api(people["alice"]).post(f"/api/runs/{run.pk}/shares/").json()
    visitor = api()

    assert visitor.get(f"/api/shared/{link['token']}/nodes.csv").status_code == 200
    assert len(visitor.get(f"/api/shared/{link['token']}/nodes.json").json()["nodes"]) == \
        RunNode.objects.filter(run=run).count()
    assert api(people["carol"]).get(f"/api/runs/{run.pk}/nodes.csv").status_code == 404
    assert visitor.get(f"/api/runs/{run.pk}/nodes.json").status_code == 401


def test_the_run_says_its_best_over_the_vendor_and_the_gpu_the_vendor_was_timed_on(api, people, run):
    body = api(people["alice"]).get(f"/api/runs/{run.pk}/").json()

    assert body["vendor_gpu"] == "H200"
    assert body["speedup_vs_vendor"] == pytest.approx(RELU_VENDOR_MS / run.best_ms)


def test_a_task_without_a_vendor_time_or_a_gpu_in_its_description_names_no_vendor_gpu():
    def vendor_gpu(vendor_ms, vendor_what):
        task = Task(name="t", vendor_ms=vendor_ms, vendor_what=vendor_what)
        return gate_selectors.task_vendor_gpu(task=task)

    assert vendor_gpu(None, "") is None
    assert vendor_gpu(1.0, "cuBLAS") is None
    assert vendor_gpu(1.0, "torch 2.11 relu, 2**28 fp32, on H100 (GPU.md)") == "H100"


def test_depths_survive_a_missing_parent_and_a_loop_in_an_imported_tree():
    def node(node_id, parent_id):
        return {"node_id": node_id, "parent_id": parent_id, "source": "", "title": "", "state": "done",
                "status": "passed", "guard": "", "level": "full", "time_ms": 1.0, "spread_ms": None,
                "gpu": None}

    rows = node_table.table_rows([node(0, None), node(1, 0), node(2, 7), node(3, 4), node(4, 3)],
                                 root_ms=2.0, vendor_ms_by_gpu={})

    assert [row["depth"] for row in rows][:3] == [0, 1, 0]
    assert all(row["speedup_vs_vendor"] is None and row["speedup_vs_root"] == 2.0 for row in rows)


H100 = "NVIDIA H100 80GB HBM3"


def _measured_on_h100(node, *, vendor_ms=None):
    """Node 99 measured on an H100, and (with vendor_ms) a verdict of that H100 holding the
    vendor time it measured (comparisons.py)."""
    from django.utils import timezone

    from profiling.harness import comparisons
    from profiling.models import Evaluation

    node.detail = {"measurement": {"gpu": H100, "time_ms": node.time_ms}}
    node.save()
    if vendor_ms is not None:
        measured = comparisons.Comparison(gpu=H100, source=comparisons.MEASURED, vendor_ms=vendor_ms,
                                          vendor_what="torch relu", measured_on="2026-12-07")
        Evaluation.objects.create(candidate=node.candidate, task=node.run.task, harness_version="h", gpu=H100,
                                  settings_key="k", status="passed", claimed_at=timezone.now(),
                                  finished_at=timezone.now(), verdict={"comparison": measured.to_dict()})


def test_a_node_measured_on_another_gpu_than_the_recorded_vendors_shows_no_vendor_speedup(api, people, run):
    fast = RunNode.objects.get(run=run, node_id=99)
    _measured_on_h100(fast)
    run.best_node, run.best_ms = 99, fast.time_ms
    run.save()

    table = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes.json").json()
    body = api(people["alice"]).get(f"/api/runs/{run.pk}/").json()

    rows = {row["id"]: row for row in table["nodes"]}
    assert rows[99]["speedup_vs_vendor"] is None and rows[99]["speedup_vs_root"] == pytest.approx(2.0)
    assert rows[0]["speedup_vs_vendor"] == pytest.approx(RELU_VENDOR_MS / run.root_ms)  # the root: an H200's
    assert table["run"]["vendor_ms"] is None and table["run"]["vendor_gpu"] is None
    assert (body["vendor_ms"], body["vendor_gpu"], body["vendor_source"], body["speedup_vs_vendor"]) == (
        None, None, None, None)
    assert body["measured_gpu"] == H100  # the header says "no vendor time on" it


def test_a_node_measured_on_another_gpu_shows_the_vendor_time_measured_on_that_gpu(api, people, run):
    fast = RunNode.objects.get(run=run, node_id=99)
    _measured_on_h100(fast, vendor_ms=0.25)
    run.best_node, run.best_ms = 99, fast.time_ms
    run.save()

    table = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes.json").json()
    body = api(people["alice"]).get(f"/api/runs/{run.pk}/").json()

    assert next(r for r in table["nodes"] if r["id"] == 99)["speedup_vs_vendor"] == pytest.approx(
        0.25 / fast.time_ms)
    assert (body["vendor_ms"], body["vendor_gpu"]) == (0.25, H100)
    assert body["vendor_source"] == f"measured on this GPU ({H100}) on 2026-12-07"
    assert body["speedup_vs_vendor"] == pytest.approx(0.25 / fast.time_ms)


@pytest.mark.parametrize("path, status, says", [
    ("/api/runs/{run}/nodes.xml", 404, "not found"),  # a format nobody serves
    ("/api/runs/{run}/nodes.csv?format=xml", 400, "not a query parameter"),  # it takes no options
    ("/api/runs/abc/nodes.csv", 404, "not found"),
    ("/api/runs/99999999999999999999999/nodes.json", 404, "not found"),  # past any run's id
    ("/api/runs/{missing}/nodes.csv", 404, "no such run"),
    ("/api/shared/not-a-link/nodes.csv", 404, "no such link"),
])
def test_bad_input_is_a_clear_4xx_in_json(api, people, run, path, status, says):
    response = api(people["alice"]).get(path.format(run=run.pk, missing=run.pk + 1000))

    assert response.status_code == status and response["Content-Type"] == "application/json"
    assert says in response.content.decode()
    assert "Content-Disposition" not in response  # no file to save


def test_the_table_has_the_pages_reward_and_visits_columns_too(api, people, run):
    table = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes.json").json()
    lines = _csv_rows(api(people["alice"]).get(f"/api/runs/{run.pk}/nodes.csv"))

    stored = {n.node_id: (n.reward, n.visits) for n in RunNode.objects.filter(run=run)}
    assert {row["id"]: (row["reward"], row["visits"]) for row in table["nodes"]} == stored
    assert stored[0][1] > 0  # the root was visited: the column is not all zeros
    root = next(line for line in lines if line["id"] == "0")
    assert int(root["visits"]) == stored[0][1]


def test_the_run_names_the_gpu_that_measured_it_and_none_before_a_measurement(api, people, run, relu_run):
    measured = api(people["alice"]).get(f"/api/runs/{run.pk}/").json()
    waiting = relu_run(budget=2, user=people["alice"], drive=False)
    unmeasured = api(people["alice"]).get(f"/api/runs/{waiting.pk}/").json()
    listed = {r["id"]: r for r in api(people["alice"]).get("/api/runs/").json()}

    assert "H200" in measured["measured_gpu"] and measured["vendor_gpu"] == "H200"
    assert (unmeasured["measured_gpu"], unmeasured["vendor_ms"], unmeasured["speedup_vs_vendor"]) == (
        None, None, None)
    assert listed[run.pk]["measured_gpu"] == measured["measured_gpu"]
