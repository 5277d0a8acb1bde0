"""The lineage app: lineages walked here (through recordings) or imported are stored whole,
and bad files are one clear error with nothing written. Measurements come from the
scripted stand-in (tests/lineage/scripted_gpu.py: SYNTHETIC NUMBERS) recorded the way
a GPU host records real ones."""

from __future__ import annotations

import datetime
import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from lineage import services
from lineage.engine import experts
from lineage.engine.walker import walk
from lineage.models import Lineage, LineageState, RejectedAttempt, SkillCard, Transition, WalkRequest
from search.engine.evaluators import RecordingEvaluator
from tests.lineage.scripted_gpu import ScriptedGpu

pytestmark = pytest.mark.django_db

BROKEN = frozenset({"OPT_GRID_STRIDE"})


def counts() -> tuple[int, int, int, int]:
    return (Lineage.objects.count(), LineageState.objects.count(), Transition.objects.count(),
            RejectedAttempt.objects.count())


def test_a_walk_replayed_from_recordings_is_stored_with_its_evidence(tmp_path):
    relu = experts.load("relu")
    recordings = tmp_path / "rec.json"
    recorded = walk(relu, RecordingEvaluator(ScriptedGpu(relu, failing=[BROKEN]), recordings))
    out = StringIO()

    call_command("lineage", "walk", "--task", "relu", "--replay", str(recordings), stdout=out)

    row = Lineage.objects.get()
    assert row.replayed and row.origin == "walk" and row.complete
    assert row.states.count() == len(recorded.states)
    assert row.transitions.count() == len(recorded.transitions)
    assert set(row.rejected.values_list("guard", flat=True)) == {"wrong_values"}
    vec4 = row.transitions.filter(flag="OPT_VEC4").first()
    assert "float4" in vec4.source_diff and vec4.speedup == pytest.approx(1.3)
    call_command("lineage", "show", str(row.pk), stdout=out)
    call_command("lineage", "list", stdout=out)
    assert "rejected: OPT_GRID_STRIDE" in out.getvalue() and "complete" in out.getvalue()
    # Why the walk ended, and who made each step, are kept on the rows and shown.
    assert row.stopped.startswith("walked out") and "stopped: walked out" in out.getvalue()
    assert set(row.transitions.values_list("proposer", flat=True)) == {"flags"}
    assert set(row.rejected.values_list("proposer", flat=True)) == {"flags"}
    assert "[flags]" in out.getvalue()


def test_a_lineage_walked_elsewhere_is_imported_whole(tmp_path):
    relu = experts.load("relu")
    path = tmp_path / "lineage.json"
    path.write_text(walk(relu, ScriptedGpu(relu)).dumps())

    call_command("lineage", "import", str(path), stdout=StringIO())

    row = Lineage.objects.get()
    assert row.origin == "import" and not row.replayed and row.data["task"] == "relu"


@pytest.mark.parametrize("content", ["not json", "[]", '{"format": 1}', '{"format": 99, "task": "relu"}',
                                     '{"format": 1, "task": "no_such_task", "expert": "x"}'])
def test_a_bad_lineage_file_is_one_clear_error_and_nothing_is_written(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CommandError):
        call_command("lineage", "import", str(path), stdout=StringIO())
    assert counts() == (0, 0, 0, 0)


def test_a_lineage_that_fails_halfway_leaves_no_rows(tmp_path):
    relu = experts.load("relu")
    data = json.loads(walk(relu, ScriptedGpu(relu)).dumps())
    data["transitions"][-1]["speedup"] = "fast"  # a float column given text
    with pytest.raises(Exception):  # noqa: B017 (whatever the database says, nothing stays)
        services.lineage_store(lineage=services.lineage_parse(data), origin="import")
    assert counts() == (0, 0, 0, 0)


def test_walking_without_a_gpu_or_recordings_says_so():
    with pytest.raises(CommandError, match="no GPU"):
        call_command("lineage", "walk", "--task", "relu", stdout=StringIO())


# -- walks queued for a GPU worker -----------------------------------------------------------


@pytest.fixture
def queued(monkeypatch):
    """What was sent to the broker: (task name, args, queue) per message."""
    from lineage import tasks
    from optiml_web.celery import app

    sent = []
    monkeypatch.setattr(tasks.walk_expert, "apply_async",
                        lambda args: sent.append((tasks.walk_expert.name, args,
                                                  app.conf.task_routes[tasks.walk_expert.name]["queue"])))
    return sent


def test_a_queued_walk_goes_to_the_gpu_queue_after_the_commit(queued, django_capture_on_commit_callbacks):
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("lineage", "walk", "--task", "relu", "--queue", "--max-states", "8", stdout=out)
    request = WalkRequest.objects.get()
    assert (request.status, request.max_states, request.task.name) == ("queued", 8, "relu")
    assert queued == [("lineage.walk_expert", [request.pk], "gpu")]
    assert f"queued walk request {request.pk}" in out.getvalue()


@pytest.mark.parametrize(("argv", "message"), [
    (["--task", "no_such_task"], "no expert"),
    (["--task", "relu", "--max-states", "0"], "between 1 and"),
    (["--task", "relu", "--max-states", "100000"], "between 1 and"),
    (["--task", "relu", "--replay", "rec.json"], "--replay and --record are for walks here"),
])
def test_a_walk_that_cannot_be_queued_is_one_clear_error_and_nothing_is_queued(queued, argv, message):
    with pytest.raises(CommandError, match=message):
        call_command("lineage", "walk", *argv, "--queue", stdout=StringIO())
    assert not WalkRequest.objects.exists() and not queued


def test_the_worker_runs_a_queued_walk_once_and_stores_it_whole(queued):
    relu = experts.load("relu")
    request = services.walk_request_create(task_name="relu", max_states=64)
    factory = lambda _request: ScriptedGpu(relu, failing=[BROKEN])  # noqa: E731

    done = services.walk_request_run(request_id=request.pk, evaluator_factory=factory)

    assert done.status == "done" and done.finished_at and not done.error
    row = done.lineage
    assert row.origin == "walk" and row.complete and row.stopped.startswith("walked out")
    assert row.states.count() == len(relu.states()) and row.rejected.exists()
    # The message delivered again (a redelivery, a duplicate) finds it done: no second lineage.
    assert services.walk_request_run(request_id=request.pk, evaluator_factory=factory) is None
    assert Lineage.objects.count() == 1
    out = StringIO()
    call_command("lineage", "request", str(request.pk), stdout=out)
    assert "(done)" in out.getvalue() and f"lineage {row.pk}: walked out" in out.getvalue()


def test_a_walk_that_fails_on_the_worker_says_why_and_stores_nothing(queued):
    request = services.walk_request_create(task_name="relu", max_states=64)

    def no_gpu(_request):
        raise RuntimeError("no NVIDIA GPU on this worker")

    failed = services.walk_request_run(request_id=request.pk, evaluator_factory=no_gpu)

    assert failed.status == "failed" and "RuntimeError: no NVIDIA GPU on this worker" in failed.error
    assert counts() == (0, 0, 0, 0) and failed.lineage is None
    out = StringIO()
    call_command("lineage", "request", str(request.pk), stdout=out)
    assert "error: RuntimeError" in out.getvalue()
    with pytest.raises(CommandError, match="no walk request 999999"):
        call_command("lineage", "request", "999999", stdout=StringIO())


def test_a_claim_held_by_a_live_worker_is_left_alone_and_a_dead_ones_is_taken_over(queued):
    relu = experts.load("relu")
    request = services.walk_request_create(task_name="relu", max_states=4)
    factory = lambda _request: ScriptedGpu(relu)  # noqa: E731
    WalkRequest.objects.filter(pk=request.pk).update(status="running", claimed_at=timezone.now())

    assert services.walk_request_run(request_id=request.pk, evaluator_factory=factory) is None

    long_ago = timezone.now() - datetime.timedelta(seconds=services.WALK_TIME_LIMIT_S + 1)
    WalkRequest.objects.filter(pk=request.pk).update(claimed_at=long_ago)
    taken = services.walk_request_run(request_id=request.pk, evaluator_factory=factory)
    assert taken.status == "done" and taken.lineage.states.count() == 4


# -- skill cards from the stored lineages ----------------------------------------------------

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def import_recorded(*tasks_named):
    for path in sorted(RESULTS.glob("*-h200-lineages*/lineage-*.json")):
        if path.stem.removeprefix("lineage-") in tasks_named:
            call_command("lineage", "import", str(path), stdout=StringIO())


def test_cards_are_induced_from_the_stored_lineages_and_shown():
    import_recorded("relu", "softmax", "sgemm")
    probes = str(RESULTS / "2026-12-01-h200-probes" / "probes-*.json")
    out = StringIO()
    call_command("lineage", "induce", "--probes", probes, stdout=out)
    assert "skill cards from the stored lineages (70 probes)" in out.getvalue()
    restrict = SkillCard.objects.get(card_id="restrict-v1")
    assert restrict.intent == "RESTRICT" and restrict.status == "induced"
    assert sorted(restrict.lineages.values_list("task__name", flat=True)) == ["relu", "softmax"]
    count = SkillCard.objects.count()
    call_command("lineage", "induce", stdout=StringIO())  # again: replaced, not duplicated
    assert SkillCard.objects.count() == count

    out = StringIO()
    call_command("lineage", "skills", stdout=out)
    call_command("lineage", "skill", "restrict-v1", stdout=out)
    text = out.getvalue()
    assert "restrict-v1 (induced):" in text and "from 2 lineages" in text
    assert "rewrite: const float * ?0  ->  const float * __restrict__ ?0  [relu, softmax]" in text


def test_the_stored_cards_are_a_proposal_source_for_the_app():
    from lineage.sources import StoredSkillSource
    from profiling.harness import tasks
    from profiling.harness.candidate import Candidate
    from search.engine.types import NodeContext

    import_recorded("relu", "softmax")
    call_command("lineage", "induce", stdout=StringIO())
    task = tasks.get("sgemm")
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    context = NodeContext(task="sgemm", candidate=candidate, measurement=None, diagnosis=None)
    assert StoredSkillSource().propose(context) == []  # induced, not verified: not in the library
    SkillCard.objects.filter(card_id="restrict-v1").update(status="verified")
    # Verified by its roundtrip: the default library's card is used before a review (a
    # team's copy waits for the team's approval: tests/web/test_skills_api.py), unless the
    # setting asks for the review.
    assert "skill:restrict-v1" in {p.source for p in StoredSkillSource().propose(context)}
    with override_settings(OPTIML_DEFAULT_LIBRARY_SKILL_STATUSES=["approved"]):
        assert StoredSkillSource().propose(context) == []
    SkillCard.objects.filter(card_id="restrict-v1").update(status="approved")
    (used, *_) = [p for p in StoredSkillSource().propose(context) if p.source == "skill:restrict-v1"]
    # The node will record the card as the run used it: its text version, status, digest.
    version = used.params["card_version"]
    assert version["version"] == 1 and version["status"] == "approved" and len(version["sha256"]) == 64
    from django.contrib.auth import get_user_model

    from lineage import services

    editor = get_user_model().objects.create_user("rita", is_staff=True)
    services.skill_card_edit(card_id="restrict-v1", author=editor, notes="inputs only")
    (again, *_) = [p for p in StoredSkillSource().propose(context) if p.source == "skill:restrict-v1"]
    assert again.params["card_version"]["version"] == 2
    assert again.params["card_version"]["sha256"] != version["sha256"]
    SkillCard.objects.filter(card_id="restrict-v1").update(status="rejected")  # never
    assert StoredSkillSource().propose(context) == []
    SkillCard.objects.update(status="retired")  # a retired card is not used
    assert StoredSkillSource().propose(context) == []


def test_a_roundtrip_admission_sets_the_cards_status_and_keeps_its_trials(tmp_path):
    import_recorded("relu", "softmax")
    call_command("lineage", "induce", stdout=StringIO())
    admission = json.loads((RESULTS / "2026-12-01-h200-admission.json").read_text())
    stored = set(SkillCard.objects.values_list("card_id", flat=True))
    path = tmp_path / "admission.json"
    path.write_text(json.dumps({**admission, "cards": {k: v for k, v in admission["cards"].items()
                                                       if k in stored}}))
    out = StringIO()
    call_command("lineage", "admit", str(path), stdout=out)
    restrict = SkillCard.objects.get(card_id="restrict-v1")
    assert restrict.status == "verified" and restrict.data["roundtrip"]["own"]["reproduced"] >= 1
    assert "verified" in out.getvalue()
    call_command("lineage", "induce", stdout=StringIO())  # induced again: the roundtrip stays
    assert "roundtrip" in SkillCard.objects.get(card_id="restrict-v1").data


def test_a_bad_admission_file_is_one_clear_error_and_changes_nothing(tmp_path):
    import_recorded("relu")
    call_command("lineage", "induce", stdout=StringIO())
    bad = tmp_path / "admission.json"
    for text, message in (("{not json", "cannot read"), ("[]", "not an admission file"),
                          ('{"cards": {"nope-v1": {"status": "verified"}}}', "no stored skill cards"),
                          ('{"cards": {"restrict-v1": {"status": "approved"}}}', "status must be one of")):
        bad.write_text(text)
        with pytest.raises(CommandError, match=message):
            call_command("lineage", "admit", str(bad), stdout=StringIO())
    assert set(SkillCard.objects.values_list("status", flat=True)) == {"induced"}


def test_bad_induce_input_is_one_clear_error_and_no_card_is_stored(tmp_path):
    import_recorded("relu")
    bad = tmp_path / "probes-relu.json"
    bad.write_text("{not json")
    with pytest.raises(CommandError, match="cannot read probes"):
        call_command("lineage", "induce", "--probes", str(bad), stdout=StringIO())
    assert not SkillCard.objects.exists()
    with pytest.raises(CommandError, match="no skill card 'nope'"):
        call_command("lineage", "skill", "nope", stdout=StringIO())


def test_a_cards_effects_are_its_lineages_steps_and_the_lineage_page_shows_the_share_of_the_ceiling(
        people):
    from rest_framework.test import APIClient

    from lineage import selectors

    import_recorded("relu", "softmax")
    call_command("lineage", "induce", stdout=StringIO())
    restrict = SkillCard.objects.get(card_id="restrict-v1")
    client = APIClient()
    client.force_authenticate(people["bob"])
    effects = client.get("/api/skills/restrict-v1/effects/").json()
    lineages = [g for g in effects["groups"] if g["kind"] == "lineage"]
    assert sorted(g["label"] for g in lineages) == ["relu's lineage", "softmax's lineage"]
    steps = Transition.objects.filter(lineage__in=restrict.lineages.all(), intent="RESTRICT")
    assert sum(len(g["points"]) for g in lineages) == steps.count() > 0
    assert sorted(p["speedup"] for g in lineages for p in g["points"]) == sorted(s.speedup for s in steps)
    assert all(p["link"].startswith(g["link"] + "#state=") for g in lineages for p in g["points"])
    # The metric changes are ratios after / before, from the states' own profiles: the
    # recorded walks profiled only the expert's state, so no step has both; give one
    # step's before-state a profile and its ratio appears.
    assert effects["metrics"] == []
    relu = Lineage.objects.get(task__name="relu")
    profiled = next(t for t in steps.filter(lineage=relu)
                    if LineageState.objects.get(lineage=relu, key=t.after).measurement.get("metrics"))
    after = LineageState.objects.get(lineage=relu, key=profiled.after).measurement["metrics"]["duration_ns"]
    before = LineageState.objects.get(lineage=relu, key=profiled.before)
    before.measurement = {**before.measurement, "metrics": {"duration_ns": 2 * after}}
    before.save()
    effects = client.get("/api/skills/restrict-v1/effects/").json()
    assert effects["metrics"] == [{"label": "relu's lineage", "steps": len(steps.filter(lineage=relu)),
                                   "median": {"duration_ns": 0.5}}]
    # The lineage page: each measured state's share of the H200's ceiling (floor / time).
    lineage = Lineage.objects.get(task__name="relu")
    graph = selectors.lineage_graph(lineage=lineage)
    assert graph["floor_ms"] > 0
    measured = [r for r in graph["rows"] if r["time_ms"]]
    assert measured and all(r["share_of_ceiling"] == pytest.approx(graph["floor_ms"] / r["time_ms"])
                            for r in measured)
    assert all(0 < r["share_of_ceiling"] <= 1.0 for r in measured)  # nothing beats physics


def test_a_cards_anchor_is_shown_in_the_code_it_came_from(people):
    from rest_framework.test import APIClient

    import_recorded("relu", "softmax")
    call_command("lineage", "induce", stdout=StringIO())
    client = APIClient()
    client.force_authenticate(people["bob"])
    card = client.get("/api/skills/restrict-v1/").json()
    assert {s["task"] for s in card["anchor_code"]} == {"relu", "softmax"}
    for shown in card["anchor_code"]:
        expert = experts.load(shown["task"])
        flags = (frozenset(f for f in state.split(",") if f) for state in (shown["state"], shown["after"]))
        before, after = (expert.plain_source(f).splitlines() for f in flags)
        removed = set(before) - set(after)
        lines = shown["text"].splitlines()
        marked = [lines[n - shown["first_line"]] for n in shown["marked"]]
        # The marked lines are the state's own lines that the step rewrites: the pointer
        # parameters that gain __restrict__.
        assert marked and set(marked) <= removed, (marked, removed)
        assert all("float" in line for line in marked)
