"""A run started from a kernel written from an intent says how that kernel was written:
GET /api/runs/<id>/ (and a share link) carries `generation`, the intent and every attempt
in order, the last one the run's root. Nobody else's generation and no gate seed is ever
shown; a run from any other kernel has none."""

from __future__ import annotations

import pytest

from profiling.harness import tasks as task_registry
from search.generation.loop import Check
from search.models import GenerationAttempt
from tests.search.scripted_llm import WRITTEN_RELU, llm_server_fixture, reply, written_relu  # noqa: F401
from tests.web.test_kernel_write import RELU, llm_env  # noqa: F401

pytestmark = pytest.mark.django_db
BROKEN_RELU = WRITTEN_RELU.replace("fmaxf(x[i], 0.0f);", "fmaxf(x[i], 0.0f)")  # nvcc wants its ";"


class NvccRefusesTheFirst:
    """The gate as the writing job sees it: nvcc refuses the first kernel, the repair compiles."""

    def __init__(self) -> None:
        self.calls = 0

    def check(self, task, candidate):
        self.calls += 1
        if self.calls == 1:
            return Check(False, "compile", 'line 3: expected a ";" seed 12345')
        return Check(False, "compiled", "compiled; L0 runs in the run's first gate", conclusive=False)


@pytest.fixture
def written_job(api, people, llm_env, monkeypatch):  # noqa: F811
    """alice's writing job, done after one repair."""
    from search import tasks, writing_jobs

    monkeypatch.setattr(tasks.write_kernel, "apply_async", lambda args, **options: None)
    llm_env.script(reply(written_relu(BROKEN_RELU)), reply(written_relu()))
    job = api(people["alice"]).post("/api/kernels/write/", RELU, format="json").json()
    return writing_jobs.writing_job_run(job_id=job["id"], checker=NvccRefusesTheFirst())


@pytest.fixture
def written(written_job):
    """The kernel the page puts in its editor."""
    return written_job.written


def _start(client, source: str, plan: dict, **extra) -> dict:
    body = {"task": "relu", "source": source, "plan": plan, "budget": 3, "judge": "rules", **extra}
    response = client.post("/api/runs/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_run_from_the_written_kernel_shows_every_attempt_the_last_one_its_root(api, people, written):
    run = _start(api(people["alice"]), written["source"], written["plan"], intent="clamp at 0")

    generation = api(people["alice"]).get(f"/api/runs/{run['id']}/").json()["generation"]

    assert generation["intent"] == "clamp at 0" and generation["experts"] == ["llm:scripted-7b"]
    attempts = generation["attempts"]
    assert [(a["round"], a["writer"], a["stage"], a["passed"]) for a in attempts] == [
        (0, "llm:scripted-7b", "compile", False), (1, "llm:scripted-7b", "compiled", False)]
    assert attempts[0]["message"] == 'line 3: expected a ";"'  # the seed is cut
    assert attempts[-1]["source"] == written["source"]
    # Each attempt's kernel is its writer's kept draft; a repair shows what it changed.
    assert attempts[0]["source"] == BROKEN_RELU and attempts[0]["diff"] == ""
    assert "-        y[i] = fmaxf(x[i], 0.0f)\n+        y[i] = fmaxf(x[i], 0.0f);\n" in attempts[1]["diff"]


def test_the_team_and_a_share_link_see_it_and_a_stranger_sees_no_run(api, people, written):
    alice = api(people["alice"])
    run = _start(alice, written["source"], written["plan"], team=people["team"].pk)
    share = alice.post(f"/api/runs/{run['id']}/shares/").json()

    by_bob = api(people["bob"]).get(f"/api/runs/{run['id']}/").json()["generation"]
    shared = api().get(f"/api/shared/{share['token']}/").json()["run"]["generation"]

    assert [a["stage"] for a in by_bob["attempts"]] == ["compile", "compiled"]
    assert shared == by_bob
    assert api(people["carol"]).get(f"/api/runs/{run['id']}/").status_code == 404


def test_somebody_elses_generation_of_the_same_kernel_is_not_shown(api, people, written):
    run = _start(api(people["carol"]), written["source"], written["plan"])

    assert api(people["carol"]).get(f"/api/runs/{run['id']}/").json()["generation"] is None
    assert GenerationAttempt.objects.filter(created_by=people["alice"]).count() == 2


def test_a_run_from_the_naive_kernel_or_an_edited_one_has_no_generation(api, people, written):
    relu = task_registry.get("relu")
    alice = api(people["alice"])
    naive = _start(alice, relu.naive_source, relu.naive_plan)
    edited = _start(alice, written["source"] + "\n// tuned by hand\n", written["plan"])

    for run in (naive, edited):
        assert alice.get(f"/api/runs/{run['id']}/").json()["generation"] is None


# -- a run that names its writing job (the New session page sends `writing_job`) ---------


def _post(client, **body):
    return client.post("/api/runs/", {"task": "relu", "budget": 3, "judge": "rules", **body}, format="json")


def test_a_run_naming_its_writing_job_starts_from_its_kernel_and_its_root_names_the_writer(
    api, people, written_job
):
    from search.models import Run, RunNode

    alice = api(people["alice"])
    response = _post(alice, writing_job=written_job.pk)  # no source: the kernel as written

    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.writing_job == written_job and run.intent == "clamp at 0"
    root = RunNode.objects.get(run=run, parent_id__isnull=True)
    assert root.candidate.source == written_job.written["source"]
    assert root.source == "llm:scripted-7b"  # the writer, not "root"
    assert root.detail["params"]["writing_job"] == written_job.pk
    generation = alice.get(f"/api/runs/{run.pk}/").json()["generation"]
    assert [a["stage"] for a in generation["attempts"]] == ["compile", "compiled"]
    assert generation["edited"] is None


def test_a_kernel_edited_after_writing_keeps_its_attempts_and_says_what_was_changed(api, people, written_job):
    alice = api(people["alice"])
    written = written_job.written
    run = _start(alice, written["source"] + "\n// tuned by hand\n", written["plan"],
                 writing_job=written_job.pk)

    generation = alice.get(f"/api/runs/{run['id']}/").json()["generation"]

    assert [a["stage"] for a in generation["attempts"]] == ["compile", "compiled"]
    assert generation["attempts"][-1]["source"] == written["source"]  # the kernel as it was written
    assert "+// tuned by hand\n" in generation["edited"]["diff"]
    assert "--- as written" in generation["edited"]["diff"]
    from search.models import RunNode

    assert RunNode.objects.get(run_id=run["id"], parent_id__isnull=True).source == "root"  # not the writer's


def test_a_writing_job_that_is_not_yours_not_done_or_of_another_task_is_refused_on_its_field(
    api, people, written_job, monkeypatch
):
    from search import tasks
    from search.models import Run

    monkeypatch.setattr(tasks.write_kernel, "apply_async", lambda args, **options: None)
    queued = api(people["alice"]).post("/api/kernels/write/", RELU, format="json").json()
    relu = task_registry.get("relu")
    cases = [
        (people["carol"], {"writing_job": written_job.pk}, f"no writing job {written_job.pk} of yours"),
        (people["alice"], {"writing_job": queued["id"]}, "has not written a kernel (queued)"),
        (people["alice"], {"writing_job": written_job.pk, "task": "softmax"},
         "wrote a kernel for relu, not softmax"),
        (people["alice"], {"writing_job": 10**9}, "no writing job 1000000000 of yours"),
        (people["alice"], {"writing_job": "five"}, "valid integer"),
    ]
    for user, body, said in cases:
        response = _post(api(user), source=relu.naive_source, plan=relu.naive_plan, **body)
        assert response.status_code == 400, (body, response.content)
        assert said in " ".join(response.json()["writing_job"]), response.json()
    assert not Run.objects.exists()


def test_every_attempt_keeps_its_kernel_a_latent_writers_too(api, people):
    """The latent Mixture-of-Thoughts keeps no drafts: its attempts' kernels are stored with
    them, so the refused first kernel and the repair's diff show as for any writer."""
    import uuid

    from profiling.harness.candidate import Candidate
    from search import generation_services
    from search.generation.loop import Attempt
    from tests.search.scripted_llm import WRITTEN_RELU_PLAN

    generation = uuid.uuid4()
    for round_, source, stage in ((0, BROKEN_RELU, "compile"), (1, WRITTEN_RELU, "compiled")):
        kernel = Candidate.from_source_and_plan(source, WRITTEN_RELU_PLAN)
        generation_services.attempt_record(
            Attempt(round=round_, writer="mot:qwen+hpc", experts=["mot:qwen+hpc"], stage=stage, passed=False,
                    message="", candidate=kernel.to_dict(), candidate_hash=kernel.content_hash()),
            task="relu", intent="clamp at 0", generation_id=generation, user=people["alice"])
    run = _start(api(people["alice"]), WRITTEN_RELU, WRITTEN_RELU_PLAN)

    attempts = api(people["alice"]).get(f"/api/runs/{run['id']}/").json()["generation"]["attempts"]

    assert [(a["writer"], a["stage"]) for a in attempts] == [("mot:qwen+hpc", "compile"),
                                                             ("mot:qwen+hpc", "compiled")]
    assert attempts[0]["source"] == BROKEN_RELU
    assert "+        y[i] = fmaxf(x[i], 0.0f);\n" in attempts[1]["diff"]
