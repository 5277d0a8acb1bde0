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
    # nobody drives an import, but its owner may share it by link
    assert copy_["can_share"] is True
    link = bob.post(f"/api/runs/{copy_['id']}/shares/")
    assert link.status_code == 201 and api().get(f"/api/shared/{link.json()['token']}/").status_code == 200
    assert api(people["carol"]).post(f"/api/runs/{copy_['id']}/shares/").status_code == 404


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
    from search import state

    def broken_node(node):
        if node.id == 2:
            raise RuntimeError("disk full")
        return original(node)

    original = state._columns
    monkeypatch.setattr(state, "_columns", broken_node)
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


# -- whose tasks a file may name ---------------------------------------------------------


def _relabelled(exported: dict, task: str) -> dict:
    data = copy.deepcopy(exported)
    data["run"]["task"] = data["state"]["task"] = task
    return data


@pytest.fixture
def carols_private_task(api, people, task_dir) -> str:
    definition = {"name": "carols-secret", "sizes": {"n": 1024},
                  "inputs": [{"name": "x", "shape": ["n"]}], "outputs": [{"name": "y", "shape": ["n"]}],
                  "reference": {"y": "np.maximum(x, 0)"}}
    response = api(people["carol"]).post("/api/tasks/declared/", definition, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["name"]


def test_an_import_on_another_users_private_task_is_an_unknown_task_that_lists_none_of_theirs(
    api, people, exported, carols_private_task
):
    before = Run.objects.count()

    response = api(people["bob"]).post("/api/runs/import/", _relabelled(exported, carols_private_task),
                                       format="json")

    assert response.status_code == 400
    [message] = response.json()["run.task"]
    assert message.startswith(f"unknown task '{carols_private_task}'; known tasks: ")
    assert message.count("user-") == 1  # the one it was asked about, never listed
    assert "relu" in message  # the suite, which bob may use, is
    assert Run.objects.count() == before


def test_the_owner_of_a_private_task_may_import_a_run_on_it(api, people, exported, carols_private_task):
    response = api(people["carol"]).post("/api/runs/import/", _relabelled(exported, carols_private_task),
                                         format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["task"] == carols_private_task


# -- what an imported file can make the server serve --------------------------------------


def test_an_imported_node_naming_a_file_in_the_workdir_as_its_report_never_serves_it(
    api, people, exported, settings, tmp_path
):
    settings.OPTIML_WORKDIR = tmp_path
    victim = tmp_path / "relu" / "feedfacefeedface" / "relu-feedfacefeed.ncu-rep"
    victim.parent.mkdir(parents=True)
    victim.write_bytes(b"another user's report")
    data = copy.deepcopy(exported)
    named = 0
    for node in data["state"]["tree"]["nodes"]:
        profile = ((node.get("measurement") or {}).get("verdict") or {}).get("profile")
        if profile is not None:
            profile["report_path"] = str(victim)
            named += 1
    assert named  # the root was profiled on the H200
    bob = api(people["bob"])

    copy_ = bob.post("/api/runs/import/", data, format="json").json()

    for node in bob.get(f"/api/runs/{copy_['id']}/nodes/").json():
        url = f"/api/runs/{copy_['id']}/nodes/{node['id']}/"
        assert bob.get(url).json()["ncu_report_url"] is None
        response = bob.get(f"{url}ncu-report/")
        assert response.status_code == 404 and b"another user's" not in response.content


# -- sizes: checked before anything is written ---------------------------------------------


def _with_huge_kernel(data: dict) -> None:
    from profiling.harness.policy import MAX_SOURCE_BYTES

    node = data["state"]["tree"]["nodes"][1]
    node["proposal"]["candidate"]["source"] += "//" + "x" * MAX_SOURCE_BYTES + "\n"


@pytest.mark.parametrize(("how", "field", "words"), [
    (_with_huge_kernel, "state.tree", "the gate takes at most 524288 bytes"),
    (lambda d: d["nodes"].extend([{"id": 10**6 + i} for i in range(5001)]), "nodes", "at most 5000"),
    (lambda d: d["state"]["tree"]["nodes"][1].update(visits=2**40), "state.tree", "visits must be a whole"),
    (lambda d: d["state"]["tree"]["nodes"][1]["proposal"].update(source="s" * 121), "state.tree",
     "proposal source must be text of at most 120"),
    (lambda d: d["state"]["config"].update(budget=10**12), "state.config.budget", "from 1 to 10000"),
    (lambda d: d["run"].update(intent="i" * 4001), "run.intent", "at most 4000"),
])
def test_an_oversized_trajectory_is_refused_before_anything_is_written(
    api, people, exported, how, field, words
):
    before = (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count())

    response = api(people["alice"]).post("/api/runs/import/", _broken(exported, how), format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field], response.json()
    assert words in response.json()[field][0]
    assert (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count()) == before


def test_a_trajectory_larger_than_the_import_limit_is_a_413_and_writes_nothing(
    api, people, exported, settings
):
    import json

    size = len(json.dumps(exported))
    settings.OPTIML_MAX_IMPORT_BYTES = size // 2
    before = (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count())

    response = api(people["alice"]).post("/api/runs/import/", exported, format="json")

    assert response.status_code == 413
    assert f"({size // 2} bytes)" in response.json()["detail"]
    assert (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count()) == before
    settings.OPTIML_MAX_IMPORT_BYTES = size * 2  # the same file, under the limit, imports
    assert api(people["alice"]).post("/api/runs/import/", exported, format="json").status_code == 201


def test_the_import_takes_more_than_other_endpoints_do(api, people, exported, settings):
    """DATA_UPLOAD_MAX_MEMORY_SIZE bounds every other request; a trajectory may be larger."""
    import json

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(json.dumps(exported)) // 2

    assert api(people["alice"]).post("/api/runs/import/", exported, format="json").status_code == 201
    assert api(people["alice"]).post("/api/runs/", exported, format="json").status_code == 413


def test_text_the_database_cannot_store_is_refused_naming_where_it_is(api, people, exported):
    data = copy.deepcopy(exported)
    data["events"][0]["data"]["note"] = "nul \x00 inside"

    response = api(people["alice"]).post("/api/runs/import/", data, format="json")

    assert response.status_code == 400
    assert "NUL" in response.json()["detail"] and "$.events[0].data.note" in response.json()["detail"]


# -- the tree: one root, parents before children, a best node that passed ------------------


def _node(data: dict, node_id: int) -> dict:
    return next(n for n in data["state"]["tree"]["nodes"] if n["id"] == node_id)


def _self_parent(data: dict) -> None:
    _node(data, 2)["parent"] = 2
    data["state"]["tree"]["best_id"] = 2


def _two_node_cycle(data: dict) -> None:
    _node(data, 1)["parent"], _node(data, 2)["parent"] = 2, 1


def _best_without_measurement(data: dict) -> None:
    _node(data, 2)["measurement"] = None
    data["state"]["tree"]["best_id"] = 2


def _root_time(ms: float):
    return lambda data: _node(data, 0)["measurement"].update(time_ms=ms)


def _best_through_an_unmeasured_node(data: dict) -> None:
    """root -> 1 -> 2, with 2 the best (the root's passed measurement) and 1 never measured:
    the run's account of each step on the best path compares it with its parent's."""
    _node(data, 0)["children"].remove(2)
    _node(data, 1).update(children=[2], measurement=None)
    _node(data, 2).update(parent=1, depth=2, measurement=copy.deepcopy(_node(data, 0)["measurement"]))
    data["state"]["tree"]["best_id"] = 2


def _root_verdict(part: str, **values):
    return lambda data: _node(data, 0)["measurement"]["verdict"][part].update(values)


@pytest.mark.timeout(20)  # today's loop would otherwise hang the suite
@pytest.mark.parametrize(("how", "words"), [
    (_self_parent, "node 2's parent 2 is not an earlier node"),
    (_two_node_cycle, "node 1's parent 2 is not an earlier node"),
    (lambda d: _node(d, 2).update(parent=None), "node 2 has no parent, but only the root"),
    (lambda d: d["state"]["tree"]["nodes"].append(copy.deepcopy(_node(d, 1))),
     "node 1 appears more than once"),
    (lambda d: _node(d, 0)["children"].append(0), "node 0's children"),
    (_best_without_measurement, "the best node 2 has no passed, timed measurement"),
    (lambda d: d["state"]["tree"].update(best_id=1), "the best node 1 has no passed, timed measurement"),
    (_root_time(-5), "node 0's time_ms is -5: it must be at least 0.0001 and at most 3.6e+06 ms"),
    (_root_time(0), "node 0's time_ms is 0: it must be at least 0.0001"),
    (_root_time(1e-300), "node 0's time_ms is 1e-300: it must be at least 0.0001"),
    (_root_time(1e308), "node 0's time_ms is 1e+308: it must be at least 0.0001 and at most 3.6e+06 ms"),
    (lambda d: _node(d, 0)["measurement"].update(spread_ms=-0.1), "node 0's spread_ms is -0.1"),
    # What the run's views compute with; each of these was a 500 on every view that reads it.
    (_best_through_an_unmeasured_node,
     "node 1, on the path from the root to the best node 2, has no measurement"),
    (lambda d: _node(d, 1).update(deltas_vs_parent={"time": "fast"}),
     "node 1's deltas_vs_parent must be an object of names to finite numbers"),
    (lambda d: _node(d, 1).update(reward_terms=[1, 2]), "node 1's reward_terms must be an object of names"),
    (lambda d: _node(d, 0)["measurement"].update(verdict="passed"), "node 0's verdict must be an object"),
    (_root_verdict("timing", flops="many"), "node 0's verdict's timing flops is 'many': it must be 0 or"),
    (_root_verdict("timing", bytes=1e300), "node 0's verdict's timing bytes is 1e+300: it must be 0 or"),
    # flops over bytes: an intensity of 1e320, past a float
    (_root_verdict("timing", flops=1e20, bytes=1e-300), "timing bytes is 1e-300: it must be 0 or of a mag"),
    (_root_verdict("profile", metrics=[1]), "node 0's verdict's profile metrics must be an object of names"),
    (lambda d: _node(d, 0)["measurement"]["verdict"]["profile"]["metrics"].update(ffma_thread_inst=None),
     "node 0's verdict's profile metric 'ffma_thread_inst' is None: it must be 0 or of a magnitude"),
    # 2e300 FLOP in 1 ns: achieved FLOP/s past a float
    (lambda d: _node(d, 0)["measurement"]["verdict"]["profile"]["metrics"].update(
        ffma_thread_inst=1e300, duration_ns=1), "profile metric 'ffma_thread_inst' is 1e+300"),
])
def test_a_trajectory_that_is_not_a_sound_tree_is_refused_naming_the_node_and_writes_nothing(
    api, people, exported, how, words
):
    before = (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count())
    client = api(people["alice"])
    client.raise_request_exception = False

    response = client.post("/api/runs/import/", _broken(exported, how), format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["state.tree"], response.json()
    assert words in response.json()["state.tree"][0]
    assert (Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count()) == before


def test_a_zero_spread_is_a_measurement_like_any_other(api, people, exported):
    data = _broken(exported, lambda d: _node(d, 0)["measurement"].update(spread_ms=0.0))

    assert api(people["alice"]).post("/api/runs/import/", data, format="json").status_code == 201


@pytest.mark.timeout(20)  # today's walk of the parent links never ends
def test_a_cycle_already_in_the_database_does_not_hang_the_run_its_api_or_its_share_link(
    api, people, relu_run
):
    from search.state import state_of

    run = relu_run(budget=3, user=people["alice"])
    for node_id, parent in ((1, 2), (2, 1)):  # 1 -> 2 -> 1 -> ...: neither reaches the root
        row = RunNode.objects.get(run=run, node_id=node_id)
        row.parent_id = parent
        row.engine = {**row.engine, "parent": parent,
                      "measurement": _node({"state": state_of(run)}, 0)["measurement"]}
        row.save()
    run.state = {**run.state, "tree": {**run.state["tree"], "best_id": 2}}
    run.best_node = 2
    run.save()
    alice = api(people["alice"])
    token = alice.post(f"/api/runs/{run.pk}/shares/").json()["token"]

    assert alice.get(f"/runs/{run.pk}/").status_code == 200
    detail = alice.get(f"/api/runs/{run.pk}/")
    assert detail.status_code == 200
    assert [(step["from"], step["to"]) for step in detail.json()["why"]] == [(1, 2)]
    assert api().get(f"/api/shared/{token}/").status_code == 200
    assert api().get(f"/share/{token}/").status_code == 200


@pytest.mark.timeout(20)
def test_a_path_or_a_backup_over_a_loop_of_parent_links_stops_where_the_loop_closes(exported):
    from search.engine import mcts
    from search.engine.tree import Tree

    tree = Tree.from_dict(_broken(exported, _two_node_cycle)["state"]["tree"])

    assert [node.id for node in tree.path(2)] == [1, 2]
    assert [node.id for node in tree.path(0)] == [0]
    visits = {node_id: tree[node_id].visits for node_id in (1, 2)}
    mcts.backpropagate(tree, 2, 1.0)
    assert sum(tree[n].visits - visits[n] for n in (1, 2)) <= len(tree)


@pytest.mark.timeout(20)
def test_a_parent_missing_from_the_database_ends_the_walk_instead_of_failing_the_run_views(
    api, people, relu_run
):
    from search.state import state_of

    run = relu_run(budget=3, user=people["alice"])
    root_measurement = _node({"state": state_of(run)}, 0)["measurement"]
    row = RunNode.objects.get(run=run, node_id=2)
    row.parent_id = 77  # no such node: a hand-edited row, or one a bad import left
    row.engine = {**row.engine, "parent": 77, "measurement": root_measurement}
    row.save()
    run.state = {**run.state, "tree": {**run.state["tree"], "best_id": 2}}
    run.best_node = 2
    run.save()
    alice = api(people["alice"])
    token = alice.post(f"/api/runs/{run.pk}/shares/").json()["token"]

    assert alice.get(f"/runs/{run.pk}/").status_code == 200
    detail = alice.get(f"/api/runs/{run.pk}/")
    assert detail.status_code == 200 and detail.json()["why"] == []  # a path of node 2 alone
    assert api().get(f"/api/shared/{token}/").status_code == 200
    assert api().get(f"/share/{token}/").status_code == 200
    assert alice.get(f"/api/runs/{run.pk}/nodes.json").status_code == 200
