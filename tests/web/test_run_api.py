"""The run API the browser uses: sign-in, who sees which run, creating runs (and refusing
bad input field by field, writing nothing), controls, the node inspector and share links.
Runs are real searches over the H200 recording of the naive relu kernel."""

from __future__ import annotations

import json

import pytest

from profiling.harness import tasks as task_registry
from profiling.models import Evaluation
from search.models import Run, RunEvent, RunNode, ShareLink
from tests.web.conftest import RUN_RECORDING

pytestmark = pytest.mark.django_db


def relu_request(**overrides) -> dict:
    relu = task_registry.get("relu")
    return {"task": "relu", "source": relu.naive_source, "plan": relu.naive_plan, "budget": 3,
            "judge": "rules", "seed": 0, **overrides}


# -- signing in -------------------------------------------------------------------------


def test_the_api_asks_visitors_who_are_not_signed_in_to_sign_in(api):
    for url in ("/api/me/", "/api/tasks/", "/api/runs/"):
        response = api().get(url)
        assert response.status_code == 401, url
        assert response["WWW-Authenticate"].startswith("Session")
        assert "credentials were not provided" in response.json()["detail"]


def test_the_login_page_signs_a_user_in_and_me_names_them_and_their_teams(client, people):
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b'name="password"' in page.content

    response = client.post("/accounts/login/", {"username": "bob", "password": "bob-secret-1"})
    assert response.status_code == 302

    me = client.get("/api/me/").json()
    assert me == {"username": "bob", "teams": [{"id": people["team"].pk, "name": "kernels"}]}


def test_a_wrong_password_is_refused_with_a_message(client, people):
    page = client.post("/accounts/login/", {"username": "bob", "password": "nope"})
    assert page.status_code == 200 and b"Please enter a correct username and password" in page.content


def test_a_session_write_without_its_csrf_token_is_refused(api, people):
    client = api(people["alice"], enforce_csrf_checks=True)
    response = client.post("/api/runs/", relu_request(), format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert Run.objects.count() == 0


def test_tasks_list_the_suite_with_naive_kernels_to_start_from(api, people):
    tasks = {t["name"]: t for t in api(people["carol"]).get("/api/tasks/").json()}
    relu = tasks["relu"]
    assert relu["sizes"] == {"n": 268435456}
    assert relu["vendor_ms"] == pytest.approx(0.5059, abs=1e-3)
    assert "__global__" in relu["naive_source"] and relu["naive_plan"]["launches"]


# -- who sees which run -----------------------------------------------------------------


def test_a_run_is_seen_by_its_creator_and_its_team_and_by_nobody_else(api, people, relu_run):
    run = relu_run(user=people["alice"], team=people["team"])
    private = relu_run(user=people["alice"])

    for name in ("alice", "bob", "dana"):
        assert api(people[name]).get(f"/api/runs/{run.pk}/").status_code == 200
    assert api(people["carol"]).get(f"/api/runs/{run.pk}/").status_code == 404
    assert api(people["bob"]).get(f"/api/runs/{private.pk}/").status_code == 404
    assert api(people["carol"]).get(f"/api/runs/{run.pk}/nodes/").status_code == 404
    assert api(people["carol"]).get(f"/api/runs/{run.pk}/events/").status_code == 404
    assert api(people["carol"]).get(f"/api/runs/{run.pk}/export/").status_code == 404
    assert {r["id"] for r in api(people["bob"]).get("/api/runs/").json()} == {run.pk}
    assert api(people["carol"]).get("/api/runs/").json() == []


def test_the_runs_list_filters_by_task_status_and_mine(api, people, relu_run):
    finished = relu_run(user=people["alice"], team=people["team"])
    running = relu_run(user=people["bob"], team=people["team"], drive=False)
    bob = api(people["bob"])

    assert [r["id"] for r in bob.get("/api/runs/?mine=1").json()] == [running.pk]
    assert [r["id"] for r in bob.get("/api/runs/?status=finished").json()] == [finished.pk]
    assert bob.get("/api/runs/?task=softmax").json() == []
    row = bob.get("/api/runs/?status=finished").json()[0]
    assert {k: row[k] for k in ("task", "status", "judge", "budget", "evaluated", "created_by")} == {
        "task": "relu", "status": "finished", "judge": "rules", "budget": 3, "evaluated": 3,
        "created_by": "alice"}
    assert row["root_ms"] == pytest.approx(0.8061, abs=1e-3) and row["gpu_seconds"] > 0
    assert set(row) >= {"id", "best_ms", "speedup", "created"}


# -- creating runs ----------------------------------------------------------------------


def test_creating_a_run_answers_201_and_queues_its_search_after_commit(
    api, people, django_capture_on_commit_callbacks, monkeypatch
):
    from search import tasks

    queued = []
    monkeypatch.setattr(tasks.drive_run, "apply_async", lambda args, **options: queued.append(args))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api(people["alice"]).post("/api/runs/", relu_request(team=people["team"].pk),
                                             format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "running" and body["team"] == people["team"].pk and body["notice"] is None
    assert body["queue"] == {"pending": 1, "evaluated": 0, "budget": 3,  # the root
                             "per_minute": None, "minutes_left": None, "under_way": 0,  # nothing done yet
                             "queued": 0, "queued_ahead": 0, "measuring": 0}
    assert body["last_seq"] == 1 and body["can_control"] is True
    assert queued == []  # nothing is queued before the run is committed
    for callback in callbacks:
        callback()
    assert queued == [[body["id"], 0]]  # the run and the token its first step must carry


def test_a_run_driven_by_its_celery_task_is_finished_with_the_recorded_times(
    api, people, django_capture_on_commit_callbacks, settings
):
    from optiml_web.celery import app

    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = api(people["alice"]).post("/api/runs/", relu_request(), format="json")
    finally:
        app.conf.task_always_eager = False
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == Run.Status.FINISHED and run.evaluated == 3
    assert not RunNode.objects.filter(run=run, state="pending").exists()


def test_evaluations_go_to_the_gpu_queue_and_a_broken_step_is_recorded_on_the_run(relu_run, monkeypatch):
    from optiml_web.celery import app
    from search import services, tasks

    assert app.amqp.router.route({}, "search.evaluate_node")["queue"].name == "gpu"
    assert app.amqp.router.route({}, "search.drive_run")["queue"].name == "celery"  # a CPU worker's
    run = relu_run(drive=False)

    def broken(**kwargs):
        raise RuntimeError("the GPU fell off the bus")

    monkeypatch.setattr(services, "run_dispatch", broken)
    assert tasks.drive_run.apply(args=[run.pk, run.drive_token]).get() == "failed"
    run.refresh_from_db()
    assert run.status == "failed"  # its kind said; its text, in the log with the traceback
    assert run.message == ("a step of the run failed: an unexpected RuntimeError "
                           "(the server's log has the details)")
    assert RunEvent.objects.filter(run=run).last().data["status"] == "failed"


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"task": "reluu"}, "task", "unknown task"),
    ({"budget": 0}, "budget", "at least one evaluation"),
    ({"budget": "many"}, "budget", "valid integer"),
    ({"judge": "oracle"}, "judge", "not a valid choice"),
    ({"source": "   "}, "source", "kernel source is empty"),
    ({"plan": {"launches": []}}, "plan", "'launches' must be a non-empty list"),
    ({"plan": {"launches": [{"kernel": "relu", "grid": ["cdiv(n,"], "block": [256]}]}}, "plan",
     "cannot parse 'cdiv(n,'"),
    ({"plan": {"launches": [{"kernel": "relu", "grid": [1], "block": [1], "colour": 1}]}}, "plan",
     "launches[0] has unknown fields: colour"),
    ({"plan": [1, 2]}, "plan", "must be a JSON object"),
    ({"plan": None}, "plan", "needs its launch plan"),
    ({"sources": ["telepathy"]}, "sources", "unknown proposal source telepathy"),
    ({"team": 999}, "team", "not a member of team 999"),
])
def test_bad_input_is_refused_field_by_field_and_writes_nothing(api, people, change, field, words):
    response = api(people["alice"]).post("/api/runs/", relu_request(**change), format="json")

    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [field], errors
    assert words in " ".join(errors[field])
    assert (Run.objects.count(), RunEvent.objects.count(), RunNode.objects.count()) == (0, 0, 0)


def test_the_llm_judge_without_its_endpoint_configured_is_a_field_error(api, people, monkeypatch):
    for name in ("OPTIML_LLM_BASE_URL", "OPTIML_LLM_MODEL", "OPTIML_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    response = api(people["alice"]).post("/api/runs/", relu_request(judge="llm"), format="json")

    assert response.status_code == 400 and "is not set" in response.json()["judge"][0]
    assert Run.objects.count() == 0


def test_an_intent_without_a_kernel_starts_from_the_naive_kernel_and_says_so(api, people):
    request = {"task": "relu", "intent": "relu over 2^28 floats, as fast as the copy", "budget": 2}

    response = api(people["alice"]).post("/api/runs/", request, format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert "naive kernel" in body["notice"] and body["intent"].startswith("relu over")
    run = Run.objects.get(pk=body["id"])
    assert run.root_candidate.source == task_registry.get("relu").naive_source


def test_the_proposal_sources_are_the_tunables_the_rewrites_and_the_skill_library(api, people):
    names = [s["name"] for s in api(people["alice"]).get("/api/sources/").json()]
    assert names == ["tunable", "rewrite", "skills"]

    response = api(people["alice"]).post("/api/runs/", relu_request(), format="json")  # none named: all

    assert response.status_code == 201, response.json()
    assert response.json()["sources"] == ["tunable", "rewrite", "skills"]
    assert Run.objects.get(pk=response.json()["id"]).sources == ["tunable", "rewrite", "skills"]


def test_a_run_may_use_only_some_proposal_sources(api, people):
    response = api(people["alice"]).post("/api/runs/", relu_request(sources=["tunable"]), format="json")

    assert response.json()["sources"] == ["tunable"]


def test_a_run_screens_its_candidates_unless_it_is_asked_not_to(api, people):
    alice = api(people["alice"])

    screened = alice.post("/api/runs/", relu_request(), format="json").json()
    not_screened = alice.post("/api/runs/", relu_request(screen=False), format="json").json()

    assert (screened["screen"], not_screened["screen"]) == (True, False)
    assert Run.objects.get(pk=not_screened["id"]).screen is False


# -- pause, resume, stop ----------------------------------------------------------------


def test_pause_resume_and_stop_move_the_run_and_resume_queues_it_again(
    api, people, relu_run, django_capture_on_commit_callbacks, monkeypatch
):
    from search import tasks

    queued = []
    monkeypatch.setattr(tasks.drive_run, "apply_async", lambda args, **options: queued.append(args))
    run = relu_run(user=people["alice"], drive=False)
    alice = api(people["alice"])

    assert alice.post(f"/api/runs/{run.pk}/pause/").json()["status"] == "paused"
    with django_capture_on_commit_callbacks(execute=True):
        assert alice.post(f"/api/runs/{run.pk}/resume/").json()["status"] == "running"
    assert queued == [[run.pk, 2]]  # pause and resume each moved the token on
    assert alice.post(f"/api/runs/{run.pk}/stop/").json()["status"] == "stopped"
    refused = alice.post(f"/api/runs/{run.pk}/resume/")
    assert refused.status_code == 409 and "stopped run cannot become running" in refused.json()["detail"]
    kinds = [e["data"].get("status") for e in alice.get(f"/api/runs/{run.pk}/events/").json()
             if e["kind"] == "run_status"]
    assert kinds == ["paused", "running", "stopped"]


def test_team_members_watch_but_only_the_creator_or_a_team_admin_controls(api, people, relu_run):
    run = relu_run(user=people["alice"], team=people["team"], drive=False)

    assert api(people["bob"]).get(f"/api/runs/{run.pk}/").json()["can_control"] is False
    assert api(people["bob"]).post(f"/api/runs/{run.pk}/pause/").status_code == 403
    assert api(people["carol"]).post(f"/api/runs/{run.pk}/pause/").status_code == 404
    assert api(people["dana"]).post(f"/api/runs/{run.pk}/pause/").json()["status"] == "paused"


# -- a run's summary, nodes and events --------------------------------------------------


def test_the_run_summary_has_progress_the_last_seq_and_why(api, people, relu_run):
    run = relu_run(budget=3, user=people["alice"])

    body = api(people["alice"]).get(f"/api/runs/{run.pk}/").json()

    assert body["queue"] == {"pending": 0, "evaluated": 3, "budget": 3,
                             "per_minute": None, "minutes_left": None, "under_way": 0,  # finished: no pace
                             "queued": 0, "queued_ahead": 0, "measuring": 0}
    assert body["last_seq"] == RunEvent.objects.filter(run=run).count()
    # Only the root passed on this recording, so the root is the best: nothing to explain.
    assert body["why"] == [] and body["best_node"] == 0 and body["speedup"] == pytest.approx(1.0)


def test_the_physics_floor_is_worked_out_once_per_version_of_the_task_not_at_every_poll(
        api, people, relu_run, monkeypatch):
    import dataclasses

    from profiling import services as gate_services

    run = relu_run(budget=1, user=people["alice"])
    looked_up = []
    task_spec = gate_services.task_spec
    monkeypatch.setattr(gate_services, "task_spec",
                        lambda *, name: looked_up.append(name) or task_spec(name=name))
    alice = api(people["alice"])

    floors = [alice.get(f"/api/runs/{run.pk}/").json()["floor_ms"] for _ in range(3)]

    assert floors[0] > 0 and floors == [floors[0]] * 3 and looked_up == ["relu"]
    # The task defined again at twice the size (as tasks_sync or a declared task's creation
    # saves it): the next poll works out the new floor.
    relu = task_registry.get("relu")
    bigger = dataclasses.replace(relu, sizes={name: 2 * n for name, n in relu.sizes.items()})
    monkeypatch.setattr(gate_services, "task_spec", lambda *, name: looked_up.append(name) or bigger)
    gate_services.task_upsert(spec=bigger)

    again = alice.get(f"/api/runs/{run.pk}/").json()["floor_ms"]

    assert again == pytest.approx(2 * floors[0], rel=1e-6) and looked_up == ["relu", "relu"]


def test_nodes_are_flat_rows_the_browser_can_stratify(api, people, relu_run):
    run = relu_run(user=people["alice"])

    rows = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/").json()

    assert rows[0]["parentId"] is None and rows[0]["source"] == "root"
    assert all(row["parentId"] in {r["id"] for r in rows} for row in rows[1:])
    assert set(rows[0]) == {"id", "parentId", "state", "source", "title", "status", "guard", "level",
                            "time_ms", "spread_ms", "reward", "visits", "value", "prior"}
    assert rows[0]["level"] == "full"  # the root always has the full gate


def test_events_after_a_sequence_number_are_exactly_the_missed_ones(api, people, relu_run):
    run = relu_run(user=people["alice"])
    alice = api(people["alice"])

    every = alice.get(f"/api/runs/{run.pk}/events/").json()
    later = alice.get(f"/api/runs/{run.pk}/events/?after=3").json()

    assert [e["seq"] for e in every] == list(range(1, len(every) + 1))
    assert later == every[3:]
    assert alice.get(f"/api/runs/{run.pk}/events/?after=-1").status_code == 400


def test_the_root_node_shows_its_real_h200_evidence(api, people, relu_run):
    run = relu_run(user=people["alice"])

    node = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/").json()

    assert node["proposer"] == "root" and "__global__" in node["source"] and node["plan"]["launches"]
    assert node["diff_vs_root"] == ""
    assert node["time_ms"] == pytest.approx(0.8061, abs=1e-3) and node["spread_ms"] >= 0
    assert node["diagnosis"]["bottleneck"] == "latency" and node["diagnosis"]["evidence"]
    assert node["compile"]["ok"] is True and node["compile"]["kernels"][0]["registers"] == 10
    assert "cubin_path" not in node["compile"]
    assert {"L0", "L1"} == {c["level"] for c in node["correctness"]}
    # The gate's seeds are the operator's: never served (tests/web/test_gate_seeds.py).
    assert {c["seed"] for c in node["correctness"]} == {None}
    roofline = node["roofline"]
    assert roofline["bytes"] == 2147483648.0 and roofline["flops"] == 268435456.0
    assert roofline["achieved_bytes_per_s"] == pytest.approx(2147483648.0 / 0.8061e-3, rel=1e-3)
    assert roofline["intensity"] == pytest.approx(0.125)
    # The datasheet peaks of the GPU that measured it, the table the physics floor reads.
    assert roofline["gpu"].startswith("NVIDIA H200")
    assert roofline["ceilings"] == {"dram_bytes_per_s": 4.8e12, "fp32_flops_per_s": 67e12,
                                    "ridge_intensity": pytest.approx(67 / 4.8),
                                    "source": "NVIDIA H200 SXM datasheet peaks (fp32 on the CUDA cores)"}
    # Profiled on 2026-11-29, before the gate counted L1 and L2 bytes: no hierarchical
    # roofline (profile.hierarchical_roofline; tests/harness/test_profile.py has one).
    assert roofline["measured"] is None
    assert "verdict" not in node["measurement"]
    assert node["timing"]["runs"] == 30 and node["timing"]["median_ms"] == pytest.approx(0.8061, abs=1e-3)
    assert node["references"] is None  # recorded before the gate said where they came from
    assert node["inputs"] is None  # ... and where its checks' inputs were drawn
    # The recording names /tmp/w1/..., outside this host's OPTIML_WORKDIR: never served.
    assert node["ncu_report_url"] is None
    assert api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/ncu-report/").status_code == 404


def test_a_child_node_shows_its_diff_against_its_parent_and_the_root(api, people, relu_run):
    run = relu_run(user=people["alice"])
    child = RunNode.objects.filter(run=run, parent_id=0).first()

    node = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/{child.node_id}/").json()

    assert node["proposer"] == child.source and node["rationale"] and node["diff"] == child.diff
    assert node["diff_vs_root"].startswith("--- node 0 (root)\n+++ node ")
    changed = [line for line in node["diff_vs_root"].splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed  # the child differs from the root somewhere in its source or plan
    assert node["status"] == "error" and node["compile"] is None and node["roofline"]["time_ms"] is None
    assert api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/999/").status_code == 404


def test_the_inspector_says_where_the_verified_runs_references_were_computed(api, people, relu_run):
    run = relu_run(user=people["alice"])
    root = RunNode.objects.get(run=run, node_id=0)
    said = ("gpu (torch 2.11.0+cu130 on NVIDIA H200, in its own process; agreed with the host's "
            "at L1 {'n': 7})")
    # The verdict the node shows: the one kept with its measurement, else its Evaluation's.
    verdict = (root.detail.get("measurement") or {}).get("verdict") or root.evaluation.verdict
    verdict["environment"]["references"] = said
    drawn = ("gpu: 5 L1 seed(s) drawn on the GPU by the harness's generator; their references: "
             "4 from the reference child, 1 from the host; L0 on the host")
    verdict["environment"]["inputs"] = drawn
    root.save()
    root.evaluation.save()

    node = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/").json()

    assert node["references"] == said
    assert node["inputs"] == drawn


def _gate_wrote_report(node: RunNode, path) -> Evaluation:
    """What our gate leaves on a profiled node's Evaluation row: its own verdict, naming
    the .ncu-rep it wrote (the recording these runs replay came from another host)."""
    evaluation = node.evaluation
    evaluation.source = Evaluation.Source.GATE
    evaluation.verdict["profile"]["report_path"] = str(path)
    evaluation.save()
    return evaluation


def test_a_report_the_gate_wrote_in_the_workdir_downloads(api, people, relu_run, settings, tmp_path):
    settings.OPTIML_WORKDIR = tmp_path
    report = tmp_path / "relu" / "537c95419d004b10" / "relu-537c95419d00.ncu-rep"
    report.parent.mkdir(parents=True)
    report.write_bytes(b"NCU-REP fake bytes")
    run = relu_run(user=people["alice"])
    _gate_wrote_report(RunNode.objects.get(run=run, node_id=0), report)

    node = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/").json()
    assert node["ncu_report_url"] == f"/api/runs/{run.pk}/nodes/0/ncu-report/"
    response = api(people["alice"]).get(node["ncu_report_url"])
    assert response.status_code == 200 and b"".join(response.streaming_content) == b"NCU-REP fake bytes"
    assert "relu-537c95419d00.ncu-rep" in response["Content-Disposition"]
    assert api(people["carol"]).get(node["ncu_report_url"]).status_code == 404  # not hers to see


def test_a_report_path_in_the_nodes_own_detail_is_never_served(api, people, relu_run, settings, tmp_path):
    """The node's detail is what an imported file says: naming someone's kernel in the
    work folder as the report must not download it."""
    settings.OPTIML_WORKDIR = tmp_path
    secret = tmp_path / "relu" / "0123456789abcdef" / "relu-0123456789ab.ncu-rep"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(b"someone else's report")
    run = relu_run(user=people["alice"])
    root = RunNode.objects.get(run=run, node_id=0)
    root.detail["measurement"]["verdict"]["profile"]["report_path"] = str(secret)
    root.save()

    node = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/").json()
    assert node["ncu_report_url"] is None
    assert api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/ncu-report/").status_code == 404


@pytest.mark.parametrize("where", ["recorded", "outside", "not-a-report", "missing"])
def test_only_an_existing_ncu_rep_of_our_gate_inside_the_workdir_is_served(
    api, people, relu_run, settings, tmp_path, where
):
    settings.OPTIML_WORKDIR = tmp_path / "work"
    (tmp_path / "work").mkdir()
    inside = tmp_path / "work" / "relu-537c95419d00.ncu-rep"
    paths = {"recorded": inside, "outside": tmp_path / "escape.ncu-rep",
             "not-a-report": tmp_path / "work" / "worker.log", "missing": tmp_path / "work" / "gone.ncu-rep"}
    for path in (inside, paths["outside"], paths["not-a-report"]):
        path.write_bytes(b"bytes")
    run = relu_run(user=people["alice"])
    evaluation = _gate_wrote_report(RunNode.objects.get(run=run, node_id=0), paths[where])
    if where == "recorded":  # measured on another host: its paths are that host's
        evaluation.source = Evaluation.Source.RECORDED
        evaluation.save()

    node = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/").json()
    assert node["ncu_report_url"] is None
    assert api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/ncu-report/").status_code == 404


# -- sharing by link --------------------------------------------------------------------


def test_a_share_link_opens_the_whole_run_signed_out_until_it_is_revoked(api, people, relu_run):
    run = relu_run(user=people["alice"])
    alice = api(people["alice"])

    made = alice.post(f"/api/runs/{run.pk}/shares/")
    assert made.status_code == 201
    token = made.json()["token"]
    assert made.json()["url"] == f"/share/{token}/" and len(token) >= 43
    link = ShareLink.objects.get()
    assert token not in link.token_hash and len(link.token_hash) == 64  # only its hash is stored

    visitor = api()
    shared = visitor.get(f"/api/shared/{token}/").json()
    assert shared["run"]["id"] == run.pk and shared["run"]["can_control"] is False
    assert len(shared["nodes"]) == RunNode.objects.filter(run=run).count()
    assert visitor.get(f"/api/shared/{token}/nodes/0/").json()["proposer"] == "root"
    assert len(visitor.get(f"/api/shared/{token}/events/").json()) == run.next_seq - 1
    listed = alice.get(f"/api/runs/{run.pk}/shares/").json()
    assert listed[0]["open"] is True and "token" not in listed[0]

    assert alice.delete(f"/api/runs/{run.pk}/shares/{link.pk}/").status_code == 204
    assert visitor.get(f"/api/shared/{token}/").status_code == 404
    assert visitor.get(f"/api/shared/{token}/nodes/0/").status_code == 404
    assert alice.delete(f"/api/runs/{run.pk}/shares/{link.pk}/").status_code == 404
    assert alice.get(f"/api/runs/{run.pk}/shares/").json()[0]["open"] is False


def test_a_made_up_token_opens_nothing_and_only_controllers_make_links(api, people, relu_run):
    run = relu_run(user=people["alice"], team=people["team"])

    assert api().get("/api/shared/not-a-token/").status_code == 404
    assert api(people["bob"]).post(f"/api/runs/{run.pk}/shares/").status_code == 403
    assert api(people["carol"]).post(f"/api/runs/{run.pk}/shares/").status_code == 404
    assert api().post(f"/api/runs/{run.pk}/shares/").status_code == 401
    assert ShareLink.objects.count() == 0


def test_the_export_is_the_trajectory_as_a_json_download(api, people, relu_run):
    run = relu_run(user=people["alice"])

    response = api(people["alice"]).get(f"/api/runs/{run.pk}/export/")

    assert "attachment" in response["Content-Disposition"]
    data = json.loads(response.content)
    assert data["format"] == "optiml-trajectory" and data["run"]["id"] == run.pk
    assert [e["seq"] for e in data["events"]] == list(range(1, run.next_seq))
    assert data["state"]["tree"]["nodes"][0]["id"] == 0


def test_the_physics_floor_is_the_ceilings_of_the_gpu_that_measured_the_run(api, people, relu_run):
    """An H100 moves bytes at 3.35 TB/s, an H200 at 4.8: a run measured on an H100 is held
    to the H100's floor, not the H200's."""
    from profiling import services as gate_services
    from profiling.models import Evaluation

    run = relu_run(budget=1, user=people["alice"])
    alice = api(people["alice"])
    measured_on = set(Evaluation.objects.filter(
        pk__in=run.nodes.exclude(evaluation=None).values("evaluation")).values_list("gpu", flat=True))
    assert measured_on and all("H200" in gpu for gpu in measured_on)
    on_h200 = alice.get(f"/api/runs/{run.pk}/").json()["floor_ms"]
    assert on_h200 == pytest.approx(gate_services.task_floor_ms(task=run.task, gpu="NVIDIA H200"))

    Evaluation.objects.filter(pk__in=run.nodes.exclude(evaluation=None).values("evaluation")).update(
        gpu="NVIDIA H100 80GB HBM3")
    on_h100 = alice.get(f"/api/runs/{run.pk}/").json()["floor_ms"]

    assert on_h100 == pytest.approx(on_h200 * 4.8 / 3.35, rel=1e-6)  # relu is bound by its bytes


def test_a_run_measured_nowhere_yet_has_no_physics_floor(api, people, relu_run):
    from profiling.models import Evaluation

    run = relu_run(budget=1, user=people["alice"])
    Evaluation.objects.filter(pk__in=run.nodes.exclude(evaluation=None).values("evaluation")).update(gpu="none")

    assert api(people["alice"]).get(f"/api/runs/{run.pk}/").json()["floor_ms"] is None
