"""POST /api/kernels/write/ queues a job that writes a first kernel from an intent with
the configured LLM, against a real local OpenAI-compatible server that answers from a
script; GET on the job says how it goes. What can be checked at once is a 400 on its
field; every way the kernel cannot be written is the failed job's message."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from profiling.harness import tasks as task_registry
from search.generation.loop import Check
from search.models import GenerationAttempt, WritingJob
from tests.search.scripted_llm import (  # noqa: F401
    WRITTEN_RELU,
    http_error,
    llm_server_fixture,
    malformed,
    reply,
    slow,
    written_relu,
)

pytestmark = pytest.mark.django_db
RELU = {"task": "relu", "intent": "clamp at 0"}

@pytest.fixture
def llm_env(monkeypatch, llm_server):
    monkeypatch.setenv("OPTIML_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPTIML_LLM_MODEL", "scripted-7b")
    monkeypatch.setenv("OPTIML_LLM_API_KEY", "sk-test")
    monkeypatch.setenv("OPTIML_LLM_TIMEOUT_S", "2")
    monkeypatch.setenv("OPTIML_LLM_MAX_RETRIES", "0")
    return llm_server


def test_the_request_answers_202_with_a_queued_job_before_anyone_writes(
    api, people, llm_env, django_capture_on_commit_callbacks, monkeypatch
):
    from search import tasks

    queued = []
    monkeypatch.setattr(tasks.write_kernel, "apply_async", lambda args, **options: queued.append(args))
    llm_env.script(reply(written_relu()))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api(people["alice"]).post("/api/kernels/write/", RELU, format="json")

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["url"] == f"/api/kernels/write/{body['id']}/"
    assert body["attempts"] == [] and body["written"] is None and body["stale_after_s"] == 900
    assert llm_env.requests == [] and queued == []  # nothing written, nothing queued before the commit
    for callback in callbacks:
        callback()
    assert queued == [[body["id"]]]
    assert llm_env.requests == []  # the worker writes, not the request
    assert WritingJob.objects.get().created_by == people["alice"]


def test_the_job_writes_a_kernel_for_the_editor_and_names_its_writer(people, llm_env, write_job):
    llm_env.script(reply(written_relu()))

    response, job = write_job(people["alice"], RELU)

    assert response.status_code == 202 and job["status"] == "done", job
    written = job["written"]
    assert written["writer"] == "llm:scripted-7b" and written["title"] == "grid-stride relu"
    assert written["source"].strip() == WRITTEN_RELU.strip()
    assert written["plan"]["launches"][0]["kernel"] == "relu_grid"
    assert [(a["round"], a["writer"], a["experts"]) for a in job["attempts"]] == [
        (0, "llm:scripted-7b", ["llm:scripted-7b"])]
    assert "clamp at 0" in llm_env.prompts()[0]
    assert GenerationAttempt.objects.get().generation == WritingJob.objects.get().generation


def test_each_attempt_is_readable_while_the_job_still_runs(api, people, llm_env, monkeypatch):
    """The attempts a GET returns are the rows stored so far: the first, refused by nvcc,
    is there (and the job running) while the repair is being checked."""
    from search import tasks, writing_jobs

    monkeypatch.setattr(tasks.write_kernel, "apply_async", lambda args, **options: None)
    llm_env.script(reply(written_relu()), reply(written_relu()))
    client = api(people["alice"])
    job = client.post("/api/kernels/write/", RELU, format="json").json()
    seen = []

    class Peeking:
        def check(self, task, candidate):
            if seen:  # the repair: look at the job as the page does
                seen.append(client.get(job["url"]).json())
                return Check(False, "compiled", "compiled; L0 runs in the run's first gate", conclusive=False)
            seen.append(None)
            return Check(False, "compile", "line 3: expected a \";\"")

    ended = writing_jobs.writing_job_run(job_id=job["id"], checker=Peeking())

    midway = seen[1]
    assert midway["status"] == "running" and midway["written"] is None
    assert [(a["round"], a["stage"], a["message"]) for a in midway["attempts"]] == [
        (0, "compile", "line 3: expected a \";\"")]
    assert ended.status == "done"
    assert [a["stage"] for a in ended.written["attempts"]] == ["compile", "compiled"]


def test_without_an_llm_endpoint_the_intent_field_says_so_and_no_job_is_made(api, people, monkeypatch):
    monkeypatch.delenv("OPTIML_LLM_BASE_URL", raising=False)

    response = api(people["alice"]).post("/api/kernels/write/", RELU, format="json")

    assert response.status_code == 400
    assert "no LLM endpoint is configured" in response.json()["intent"][0]
    assert not WritingJob.objects.exists()


def test_an_llm_that_refuses_fails_the_job_with_a_plain_message(people, llm_env, write_job):
    llm_env.script(http_error(401, "bad key"))

    response, job = write_job(people["alice"], RELU)

    assert response.status_code == 202 and job["status"] == "failed" and job["written"] is None
    assert "could not write a kernel" in job["message"]
    assert [a["stage"] for a in job["attempts"]] == ["endpoint"]


def test_a_reply_that_is_not_a_kernel_fails_the_job_and_says_where_it_stopped(people, llm_env, write_job):
    llm_env.script(malformed("Sure! Here is a kernel, more or less."))

    _, job = write_job(people["alice"], RELU)

    assert job["status"] == "failed" and "could not write a kernel" in job["message"]
    assert [(a["writer"], a["stage"]) for a in job["attempts"]] == [("llm:scripted-7b", "reply")]


@pytest.mark.parametrize(("body", "field"), [({"task": "relu", "intent": "  "}, "intent"),
                                             ({"task": "no-such-task", "intent": "x"}, "task"),
                                             ({"intent": "x"}, "task"),
                                             ({"task": "relu"}, "intent")])
def test_bad_requests_name_their_field_and_neither_queue_nor_call_an_llm(api, people, llm_env, body, field):
    response = api(people["alice"]).post("/api/kernels/write/", body, format="json")

    assert response.status_code == 400 and field in response.json()
    assert llm_env.requests == [] and not WritingJob.objects.exists()


def test_signed_out_visitors_cannot_spend_the_llm(api, llm_env):
    response = api().post("/api/kernels/write/", {"task": "relu", "intent": "x"}, format="json")
    assert response.status_code == 401 and llm_env.requests == [] and not WritingJob.objects.exists()


def test_a_job_is_its_writers_alone(api, people, llm_env, write_job):
    llm_env.script(reply(written_relu()))
    _, job = write_job(people["alice"], RELU)

    assert api(people["bob"]).get(job["url"]).status_code == 404  # her team mate: not his to see
    assert api().get(job["url"]).status_code == 401
    assert api(people["alice"]).get("/api/kernels/write/987654/").status_code == 404


def _stale(job_id: int, seconds: float) -> None:
    WritingJob.objects.filter(pk=job_id).update(updated=timezone.now() - timedelta(seconds=seconds))


def test_a_job_whose_worker_died_is_failed_once_stale_and_a_late_finish_changes_nothing(
    api, people, llm_env, settings, monkeypatch
):
    from search import tasks, writing_jobs

    settings.OPTIML_WRITING_STALE_S = 60
    monkeypatch.setattr(tasks.write_kernel, "apply_async", lambda args, **options: None)
    client = api(people["alice"])
    job = client.post("/api/kernels/write/", RELU, format="json").json()
    WritingJob.objects.filter(pk=job["id"]).update(status="running")  # claimed, then the worker died
    _stale(job["id"], 59)
    assert client.get(job["url"]).json()["status"] == "running"  # not stale yet

    _stale(job["id"], 61)
    read = client.get(job["url"]).json()

    assert read["status"] == "failed" and "its worker stopped" in read["message"]
    assert "OPTIML_WRITING_STALE_S" in read["message"]
    assert writing_jobs.writing_job_run(job_id=job["id"]) is None  # a redelivered message does nothing
    assert WritingJob.objects.get().status == "failed" and llm_env.requests == []


def test_the_beat_fails_jobs_nobody_took_queues_again_those_whose_worker_died_and_leaves_the_others(
    api, people, llm_env, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """A running job that missed six heartbeats lost its worker: the beat queues it again
    with a new message (for another worker, from the start); one claimed MAX_TRIES times
    is failed instead; a queued one nobody took for OPTIML_WRITING_STALE_S is failed."""
    from search import tasks, writing_jobs

    settings.OPTIML_WRITING_STALE_S = 600
    settings.OPTIML_WRITING_HEARTBEAT_S = 10
    sent = []
    monkeypatch.setattr(tasks.write_kernel, "apply_async", lambda args, **options: sent.append(args))
    client = api(people["alice"])
    lost, fresh, orphan, beating, worn = (client.post("/api/kernels/write/", RELU, format="json").json()["id"]
                                          for _ in range(5))
    sent.clear()
    WritingJob.objects.filter(pk__in=[orphan, beating]).update(status="running", tries=1)
    WritingJob.objects.filter(pk=worn).update(status="running", tries=writing_jobs.MAX_TRIES)
    _stale(lost, 601)
    _stale(orphan, 61)
    _stale(worn, 61)
    _stale(beating, 59)

    with django_capture_on_commit_callbacks(execute=True):
        assert sorted(tasks.fail_stale_writing_jobs.apply().get()) == sorted([lost, worn])

    jobs = {job.pk: job for job in WritingJob.objects.all()}
    assert "no worker took it" in jobs[lost].message
    assert jobs[worn].status == "failed"
    assert f"its worker stopped {writing_jobs.MAX_TRIES} times" in jobs[worn].message
    assert jobs[orphan].status == "queued" and sent == [[orphan]]  # a new message, for another worker
    assert jobs[beating].status == "running" and jobs[fresh].status == "queued"
    assert llm_env.requests == []


def test_a_job_queued_again_is_written_by_its_new_claim_and_the_lost_claim_changes_nothing(
    people, llm_env, settings, monkeypatch
):
    """The worker of the first claim was given up for dead; the second claim writes the
    kernel; when the first comes back, its heartbeat and its outcome find the job not
    theirs, and the attempts of both tries are kept."""
    from search import tasks, writing_jobs

    monkeypatch.setattr(tasks.write_kernel, "apply_async", lambda args, **options: None)
    llm_env.script(reply(written_relu()))
    job = writing_jobs.writing_job_create(task_name="relu", intent="clamp at 0", user=people["alice"])
    first = writing_jobs._claim(job.pk)
    GenerationAttempt.objects.create(generation=job.generation, task="relu", intent="clamp at 0", round=0,
                                     writer="llm:scripted-7b", stage="endpoint", message="cut off")
    _stale(job.pk, 61)
    settings.OPTIML_WRITING_HEARTBEAT_S = 10
    assert writing_jobs.writing_jobs_resume(heartbeat_s=10) == ([job.pk], [])

    ended = writing_jobs.writing_job_run(job_id=job.pk)
    assert ended.status == "done" and ended.tries == 2

    assert not writing_jobs.writing_job_renew(job_id=job.pk, tries=first.tries)
    writing_jobs._end(job.pk, first.tries, WritingJob.Status.FAILED, message="the first worker's late word")
    again = WritingJob.objects.get(pk=job.pk)
    assert (again.status, again.message, again.updated) == ("done", "", ended.updated)
    assert [a.stage for a in writing_jobs.writing_job_attempts(job=again)] == ["endpoint", "compiled"]


@pytest.mark.django_db(transaction=True)
def test_the_job_beats_while_a_slow_writer_works_and_stops_when_it_ends(
    people, llm_env, settings, monkeypatch
):
    """One LLM call may take minutes without a word: the heartbeat thread moves the job
    meanwhile, so that only a job whose worker died goes quiet."""
    from search import tasks, writing_jobs

    monkeypatch.setattr(tasks.write_kernel, "apply_async", lambda args, **options: None)
    monkeypatch.setenv("OPTIML_LLM_TIMEOUT_S", "10")
    settings.OPTIML_WRITING_HEARTBEAT_S = 0.2
    llm_env.script(slow(1.5, reply(written_relu())))
    job = writing_jobs.writing_job_create(task_name="relu", intent="clamp at 0", user=people["alice"])
    moved = []

    class Watching:
        def check(self, task, candidate):  # called once the slow reply came: how often did it move?
            moved.append(WritingJob.objects.get(pk=job.pk).updated)
            return Check(False, "compiled", "compiled; L0 runs in the run's first gate", conclusive=False)

    started = WritingJob.objects.get(pk=job.pk).updated
    ended = writing_jobs.writing_job_run(job_id=job.pk, checker=Watching())

    assert ended.status == "done"
    assert (moved[0] - started).total_seconds() >= 1.0  # beaten during the reply's 1.5 s
    settled = WritingJob.objects.get(pk=job.pk).updated
    time.sleep(0.5)
    assert WritingJob.objects.get(pk=job.pk).updated == settled  # the thread stopped with the job


def test_writing_jobs_go_to_a_cpu_worker_and_the_beat_looks_for_stale_ones():
    from optiml_web.celery import app

    assert app.amqp.router.route({}, "search.write_kernel")["queue"].name == "celery"
    assert app.conf.beat_schedule["fail-stale-writing-jobs"]["task"] == "search.fail_stale_writing_jobs"


def test_manage_optimize_starts_from_the_kernel_written_from_the_intent(settings, llm_env, tmp_path):
    """The run's root is the written kernel, named by its writer; its (never recorded)
    measurement is an honest failure to measure, not a number."""
    from io import StringIO

    from django.core.management import call_command

    from search import services
    from search.models import Run
    from tests.web.conftest import RUN_RECORDING

    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    llm_env.script(reply(written_relu()))
    out = StringIO()

    call_command("optimize", "--task", "relu", "--budget", "1", "--intent", "clamp at 0", stdout=out)

    assert "starting kernel written by llm:scripted-7b from the intent: grid-stride relu" in out.getvalue()
    run = Run.objects.get()
    assert run.intent == "clamp at 0" and "relu_grid" in run.root_candidate.source
    root = services._search_for(run).tree.root
    assert root.proposal.source == "llm:scripted-7b" and root.proposal.params["intent"] == "clamp at 0"


def test_manage_optimize_says_when_no_llm_can_write_and_starts_from_the_naive_kernel(settings, monkeypatch):
    from io import StringIO

    from django.core.management import call_command

    from search.models import Run
    from tests.web.conftest import RUN_RECORDING

    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"
    monkeypatch.delenv("OPTIML_LLM_BASE_URL", raising=False)
    out = StringIO()

    call_command("optimize", "--task", "relu", "--budget", "1", "--intent", "clamp at 0", stdout=out)

    assert "no LLM endpoint is configured" in out.getvalue() and "naive kernel" in out.getvalue()
    assert Run.objects.get().root_candidate.source == task_registry.get("relu").naive_source
