"""Export, then import: the imported run is a read-only copy with the same tree, nodes
and event log; a malformed file is refused with the part that is wrong, and leaves
nothing behind."""

from __future__ import annotations

import copy

import pytest

from profiling.models import Evaluation
from search.models import Run, RunEvent, RunNode

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(api, people, relu_run):
    run = relu_run(budget=3, user=people["alice"])
    return api(people["alice"]).get(f"/api/runs/{run.pk}/export/").json()


def test_an_exported_run_imports_as_a_read_only_copy_with_the_same_trajectory(api, people, exported):
    bob = api(people["bob"])
    evaluations = Evaluation.objects.count()

    response = bob.post(f"/api/runs/import/?team={people['team'].pk}", exported, format="json")

    assert response.status_code == 201, response.json()
    copy_ = response.json()
    assert copy_["imported"] is True and copy_["status"] == "finished" and copy_["can_control"] is False
    assert copy_["created_by"] == "bob" and copy_["team"] == people["team"].pk
    original = exported["run"]
    for key in ("task", "evaluated", "root_ms", "best_ms", "best_node", "gpu_seconds", "budget", "judge"):
        assert copy_[key] == original[key], key
    again = bob.get(f"/api/runs/{copy_['id']}/export/").json()
    assert again["nodes"] == exported["nodes"] and again["state"] == exported["state"]
    assert again["events"][:-1] == exported["events"]
    assert again["events"][-1]["kind"] == "run_imported"
    node = bob.get(f"/api/runs/{copy_['id']}/nodes/0/").json()
    assert node["compile"]["kernels"][0]["registers"] == 10  # the verdict came along
    assert Evaluation.objects.count() == evaluations  # and never poses as a measurement
    assert bob.post(f"/api/runs/{copy_['id']}/resume/").status_code == 403


def _broken(exported: dict, how) -> dict:
    data = copy.deepcopy(exported)
    how(data)
    return data


def _set_root_source(data: dict) -> None:
    data["state"]["tree"]["nodes"][0]["proposal"]["candidate"]["source"] += "// changed\n"


@pytest.mark.parametrize(("how", "field", "words"), [
    (lambda d: d.pop("state"), "state", "missing"),
    (lambda d: d["run"].update(task="nope"), "run.task", "unknown task"),
    (lambda d: d["state"].update(version=99), "state", "version"),
    (lambda d: d["state"]["tree"].pop("nodes"), "state", "lacks 'nodes'"),
    (lambda d: d["state"]["tree"]["nodes"][1].update(visits="many"), "state.tree", "visits is not a number"),
    (_set_root_source, "state.tree", "does not match its hash"),
    (lambda d: d["nodes"].pop(), "nodes", "not the state's tree"),
    (lambda d: d["events"].pop(1), "events[1]", "seq 2"),
    (lambda d: d["events"][0].update(kind=""), "events[0].kind", "name of 1 to 40"),
    (lambda d: d["run"].update(gpu_seconds=-1), "run.gpu_seconds", "at least 0"),
    (lambda d: d.update(format="something-else"), "format", "optiml-trajectory"),
])
def test_a_malformed_trajectory_is_refused_saying_where_and_writes_nothing(
    api, people, exported, how, field, words
):
    before = (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count())

    response = api(people["alice"]).post("/api/runs/import/", _broken(exported, how), format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field], response.json()
    assert words in response.json()[field][0]
    assert (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count()) == before


def test_an_import_that_fails_while_writing_leaves_nothing_half_written(api, people, exported, monkeypatch):
    from search import services

    def broken_node(run, node):
        if node.id == 2:
            raise RuntimeError("disk full")
        return original(run, node)

    original = services._upsert_node
    monkeypatch.setattr(services, "_upsert_node", broken_node)
    before = (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count())
    client = api(people["alice"])
    client.raise_request_exception = False

    assert client.post("/api/runs/import/", exported, format="json").status_code == 500
    assert (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count()) == before


def test_a_body_that_is_not_a_trajectory_is_refused(api, people):
    client = api(people["alice"])
    assert client.post("/api/runs/import/", [1, 2], format="json").json() == {
        "file": ["a trajectory is a JSON object with run, nodes and state"]}
    response = client.post("/api/runs/import/", "{not json", content_type="application/json")
    assert response.status_code == 400 and "JSON parse error" in response.json()["detail"]
