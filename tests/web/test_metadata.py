"""What a run, a team or an error tells about other people and the server (issue 34,
part 7): a run's queue counts other people's evaluations ahead of it and names nothing
(no run, no GPU worker), for its team and a share link's viewer alike; a member that is
not in a team answers the same whether such a user exists or not; and messages under the
recorded evaluator name a recording by its file name, never its path on the server."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import Team
from profiling.evaluators import RecordedEvaluator
from search import node_services, services, tasks
from search.models import Run, RunEvent, RunNode
from tests.web.conftest import RUN_RECORDING

pytestmark = pytest.mark.django_db

COUNTS = {"pending", "evaluated", "budget", "per_minute", "minutes_left", "under_way", "queued",
          "queued_ahead", "measuring"}


def _issue(run, *, at, worker: str = "") -> None:
    """The run's root as the driver leaves it once handed to the GPU queue (issued), and
    taken by `worker` when one is given."""
    RunNode.objects.filter(run=run, node_id=0).update(
        issued_at=at, started_at=at if worker else None, worker=worker)


def test_a_runs_queue_counts_other_peoples_evaluations_ahead_and_names_no_run_or_worker(
    api, people, relu_run
):
    now = timezone.now()
    carols_waiting = relu_run(budget=3, user=people["carol"], drive=False)
    carols_measured = relu_run(budget=3, user=people["carol"], drive=False)
    alices = relu_run(budget=3, user=people["alice"], team=people["team"], drive=False)
    _issue(carols_waiting, at=now - timedelta(seconds=30))
    _issue(carols_measured, at=now - timedelta(seconds=40), worker="gpu7@carols-lab-host")
    _issue(alices, at=now - timedelta(seconds=10))
    link = api(people["alice"]).post(f"/api/runs/{alices.pk}/shares/").json()

    seen_by = {"its creator": api(people["alice"]).get(f"/api/runs/{alices.pk}/").json(),
               "its team": api(people["bob"]).get(f"/api/runs/{alices.pk}/").json(),
               "a share link": api().get(f"/api/shared/{link['token']}/").json()["run"]}

    for who, run in seen_by.items():
        queue = run["queue"]
        assert set(queue) == COUNTS, who  # no list of runs or workers, nor a count of runs
        assert (queue["queued"], queue["queued_ahead"], queue["measuring"]) == (1, 1, 0), who
        assert "carol" not in json.dumps(run) and "gpu7" not in json.dumps(run), who


def test_the_queue_counts_its_own_evaluations_being_measured_without_naming_the_worker(
    api, people, relu_run
):
    run = relu_run(budget=3, user=people["alice"], drive=False)
    _issue(run, at=timezone.now(), worker="gpu3@rack-12.internal")

    body = api(people["alice"]).get(f"/api/runs/{run.pk}/").json()

    assert (body["queue"]["measuring"], body["queue"]["queued"]) == (1, 0)
    assert "rack-12" not in json.dumps(body)
    assert RunNode.objects.get(run=run, node_id=0).worker == "gpu3@rack-12.internal"  # the operator's


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_a_member_not_in_the_team_answers_alike_whether_the_user_exists_or_not(api, people, method):
    dana, base = api(people["dana"]), f"/api/teams/{people['team'].pk}/members/"
    body = {"role": "admin"} if method == "patch" else None

    answers = {username: getattr(dana, method)(f"{base}{username}/", body, format="json")
               for username in ("carol", "nobody-at-all")}  # carol exists, in no team of dana's

    assert [answers[name].status_code for name in ("carol", "nobody-at-all")] == [404, 404]
    carol, nobody = (answers[name].json()["detail"] for name in ("carol", "nobody-at-all"))
    assert carol.replace("carol", "X") == nobody.replace("nobody-at-all", "X")


def test_adding_a_member_by_name_answers_alike_for_a_stranger_and_for_nobody(api, people):
    dana, base = api(people["dana"]), f"/api/teams/{people['team'].pk}/members/"

    answers = {username: dana.post(base, {"username": username}, format="json")
               for username in ("carol", "nobody-at-all")}  # carol exists, in no team with dana

    assert [answers[name].status_code for name in ("carol", "nobody-at-all")] == [400, 400]
    carol, nobody = (answers[name].json()["username"][0] for name in ("carol", "nobody-at-all"))
    assert carol.replace("carol", "X") == nobody.replace("nobody-at-all", "X")
    assert "invitation link" in carol
    assert not people["team"].memberships.filter(user=people["carol"]).exists()


def test_naming_a_team_like_one_you_are_not_in_answers_as_for_a_name_nobody_has(api, people):
    carol = api(people["carol"])  # in no team; alice, bob and dana are in "kernels"

    answers = [carol.post("/api/teams/", {"name": name}, format="json") for name in ("KERNELS", "fresh")]

    assert [answer.status_code for answer in answers] == [201, 201]
    assert [answer.json()["name"] for answer in answers] == ["KERNELS", "fresh"]
    assert Team.objects.filter(name__iexact="kernels").count() == 2  # dana's, and carol's own
    assert not people["team"].memberships.filter(user=people["carol"]).exists()


# -- declared tasks' names -------------------------------------------------------------------


def _definition(slug: str) -> dict:
    return {"name": slug, "description": "y = x", "sizes": {"n": 64},
            "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}], "reference": {"y": "x"}}


def test_declaring_a_slug_another_user_declared_answers_as_if_nobody_had(api, people, task_dir):
    carol, alice = people["carol"], people["alice"]
    assert api(carol).post("/api/tasks/declared/", _definition("secret-op"), format="json").status_code == 201

    answers = {slug: api(alice).post("/api/tasks/declared/", _definition(slug), format="json")
               for slug in ("secret-op", "fresh-op")}  # carol declared the one, nobody the other

    assert [answers[slug].status_code for slug in ("secret-op", "fresh-op")] == [201, 201]
    assert [answers[slug].json()["name"] for slug in ("secret-op", "fresh-op")] == [
        f"user-secret-op.{alice.pk}", f"user-fresh-op.{alice.pk}"]
    assert answers["secret-op"].json()["starting_plan"]["launches"][0]["kernel"] == "secret_op"
    assert f"user-secret-op.{carol.pk}" not in json.dumps(answers["secret-op"].json())


@pytest.mark.parametrize("name", ["secret-op.{carol}", "user-secret-op.{carol}", "secret-op.{alice}"])
def test_a_declared_name_cannot_claim_an_owners_number(api, people, task_dir, name):
    name = name.format(carol=people["carol"].pk, alice=people["alice"].pk)

    response = api(people["alice"]).post("/api/tasks/declared/", _definition(name), format="json")

    assert response.status_code == 400 and "a slug" in response.json()["name"][0], response.json()


# -- the recorded evaluator's messages -------------------------------------------------------


def _events_data(run) -> list:
    return list(RunEvent.objects.filter(run=run).values_list("data", flat=True))


@pytest.fixture
def recording_in_a_server_folder(tmp_path):
    """The recorded H200 verdicts of the naive relu kernel (none for its children), in a
    folder whose path says it is the server's."""
    folder = tmp_path / "srv" / "optiml-private" / "recordings"
    folder.mkdir(parents=True)
    return shutil.copy(RUN_RECORDING, folder / "relu-h200.json")


def test_messages_under_the_recorded_evaluator_name_the_recording_not_its_path(
    api, people, relu_run, recording_in_a_server_folder
):
    run = relu_run(budget=3, user=people["alice"], drive=False)
    run = services.run_drive(run_id=run.pk, evaluator=RecordedEvaluator(recording_in_a_server_folder))
    link = api(people["alice"]).post(f"/api/runs/{run.pk}/shares/").json()
    node_ids = list(RunNode.objects.filter(run=run).values_list("node_id", flat=True))

    read = [api(people["alice"]).get(f"/api/runs/{run.pk}/").json(),
            api(people["alice"]).get(f"/api/runs/{run.pk}/events/").json(),
            api(people["alice"]).get(f"/api/runs/{run.pk}/export/").json(),
            *(api().get(f"/api/shared/{link['token']}/nodes/{n}/").json() for n in node_ids)]
    text = json.dumps(read) + json.dumps(_events_data(run))

    assert "no recorded verdict" in text and "relu-h200.json" in text  # the children's
    assert "optiml-private" not in text and str(recording_in_a_server_folder.parent) not in text


def test_a_runs_views_and_export_name_no_file_the_gate_wrote_on_its_host(api, people, relu_run):
    """The recording's verdicts name the gate host's cubin and Nsight report (/root/.cache/...,
    /tmp/w1/...), as the gate's own do on this server: the Evaluation row keeps them for the
    operator; the run's pages, its share link and its export do not."""
    run = relu_run(budget=3, user=people["alice"])
    alice = api(people["alice"])
    link = alice.post(f"/api/runs/{run.pk}/shares/").json()

    read = [alice.get(f"/api/runs/{run.pk}/").json(), alice.get(f"/api/runs/{run.pk}/export/").json(),
            alice.get(f"/api/runs/{run.pk}/nodes/0/").json(), alice.get(f"/api/runs/{run.pk}/events/").json(),
            api().get(f"/api/shared/{link['token']}/nodes/0/").json()]
    text = json.dumps(read) + api().get(f"/api/shared/{link['token']}/nodes.json").content.decode()

    assert "/root/.cache/optiml" not in text and "/tmp/w1/" not in text
    stored = RunNode.objects.get(run=run, node_id=0).evaluation.verdict
    assert stored["profile"]["report_path"] == "/tmp/w1/relu-537c95419d00.ncu-rep"  # the operator's


def test_a_run_whose_recording_cannot_be_read_fails_naming_the_file_not_its_path(
    people, relu_run, settings, tmp_path
):
    gone = tmp_path / "srv" / "optiml-private" / "gone.json"
    settings.OPTIML_EVALUATOR = f"recorded:{gone}"
    run = relu_run(budget=3, user=people["alice"], drive=False)

    assert tasks.evaluate_node.apply(args=[run.pk, 0, None]).get() == "failed"

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.message == ("evaluating node 0 failed: cannot read recordings gone.json: "
                           "No such file or directory")
    assert "optiml-private" not in json.dumps(_events_data(run))


def test_any_other_error_of_a_run_says_its_kind_and_leaves_its_text_to_the_log(
    people, relu_run, settings, monkeypatch
):
    def broken(**_):
        raise PermissionError(13, "Permission denied", "/srv/optiml-private/work/inputs/relu")

    monkeypatch.setattr(node_services, "node_evaluate", broken)
    run = relu_run(budget=3, user=people["alice"], drive=False)

    assert tasks.evaluate_node.apply(args=[run.pk, 0, None]).get() == "failed"

    run.refresh_from_db()
    assert run.message == ("evaluating node 0 failed: an unexpected PermissionError "
                           "(the server's log has the details)")
