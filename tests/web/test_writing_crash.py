"""kill -9 of the worker while it writes a kernel from an intent loses nothing.

Everything is real but the LLM: PostgreSQL, Redis as the Celery broker, `celery -A
optiml_web worker` processes as in production (acks_late, concurrency 1), nvcc, and a
local OpenAI-compatible server that answers from a script. The first worker is killed as
a whole (SIGKILL to its process group) while it waits for the model's reply; the job's
heartbeat stops, the beat (played here) queues the job again, a second worker writes it
from the start, and the killed claim's message, given back by Redis after the visibility
timeout, finds the job ended and does nothing.

Runs only against PostgreSQL and Redis (.ci/run sets DATABASE_URL and REDIS_URL), on
Redis database WRITING_REDIS_DB of that server, emptied before and after.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tests.search.scripted_llm import WRITTEN_RELU, llm_server_fixture, reply, slow, written_relu  # noqa: F401
from tests.web.test_crash_safety import Worker, _database_url, broker_on, needs_postgres_and_redis

HEARTBEAT_S = 0.3  # a job that misses six (1.8 s) lost its worker
VISIBILITY_S = 10  # Redis gives the killed worker's message back after this
DEADLINE_S = 120
WRITING_REDIS_DB = 14  # not the crash test's: either may run while the other does

pytestmark = [
    needs_postgres_and_redis,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(DEADLINE_S + 60),
]


@pytest.fixture
def broker():
    with broker_on(WRITING_REDIS_DB) as url:
        yield url


def _env(tmp_path: Path, redis_url: str, llm_url: str) -> dict[str, str]:
    from django.db import connection

    env = {key: value for key, value in os.environ.items() if not key.startswith("OPTIML_")}
    env.update({
        "DATABASE_URL": _database_url(connection.settings_dict["NAME"]),
        "REDIS_URL": redis_url,
        "OPTIML_VAR_DIR": str(tmp_path / "var"),
        "OPTIML_LLM_BASE_URL": llm_url, "OPTIML_LLM_MODEL": "scripted-7b", "OPTIML_LLM_API_KEY": "sk-test",
        "OPTIML_LLM_TIMEOUT_S": "60", "OPTIML_LLM_MAX_RETRIES": "0",
        "OPTIML_WRITING_HEARTBEAT_S": str(HEARTBEAT_S),
        "OPTIML_BROKER_VISIBILITY_S": str(VISIBILITY_S),
        "OPTIML_LOG_LEVEL": "INFO",
    })
    return env


def _until(what: str, condition, *, deadline: float, worker: Worker, every_s: float = 0.05, tick=None):
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        worker.assert_alive()
        if tick is not None:
            tick()
        time.sleep(every_s)


def test_kill_9_while_the_llm_writes_then_another_worker_writes_the_job_and_the_old_message_changes_nothing(
    tmp_path, broker, llm_server, people, settings, monkeypatch  # noqa: F811
):
    from django.utils import timezone

    from search import writing_jobs
    from search.models import GenerationAttempt, WritingJob
    from search.tasks import fail_stale_writing_jobs

    settings.OPTIML_WRITING_HEARTBEAT_S = HEARTBEAT_S  # the beat, played in this process
    # The first claim waits for a reply that never comes in time (its worker dies first);
    # the second claim's request gets the kernel.
    llm_server.script(slow(60, reply(written_relu())), reply(written_relu()))
    env = _env(tmp_path, broker, llm_server.base_url)
    for name in ("OPTIML_LLM_BASE_URL", "OPTIML_LLM_MODEL", "OPTIML_LLM_API_KEY"):  # the request's check
        monkeypatch.setenv(name, env[name])
    deadline = time.monotonic() + DEADLINE_S
    first = Worker(env, tmp_path / "1.log").start()
    second = None
    try:
        job = writing_jobs.writing_job_create(task_name="relu", intent="clamp at 0", user=people["alice"])
        row = lambda: WritingJob.objects.get(pk=job.pk)  # noqa: E731
        _until("the first worker asks the model", lambda: len(llm_server.requests) == 1 and
               row().status == "running", deadline=deadline, worker=first)
        claimed = row().updated
        time.sleep(4 * HEARTBEAT_S)
        assert row().updated > claimed, "the job did not beat while its writer waited"

        first.kill()
        last_beat = row().updated  # read after the kill: no beat can follow it
        second = Worker(env, tmp_path / "2.log").start()

        def beat() -> None:
            fail_stale_writing_jobs.apply().get()

        _until("the job is queued again", lambda: row().tries == 2 or row().status == "queued",
               deadline=deadline, worker=second, every_s=0.2, tick=beat)
        # Not before it missed its heartbeats: six beats' time since its last one (the job's
        # last beat, not the kill, which may come up to one beat later).
        assert timezone.now() - last_beat >= timedelta(seconds=6 * HEARTBEAT_S)
        _until("the second worker writes it", lambda: row().status in ("done", "failed"),
               deadline=deadline, worker=second, every_s=0.2)
        ended = row()
        assert ended.status == "done", ended.message
        assert ended.tries == 2 and ended.written["source"].strip() == WRITTEN_RELU.strip()
        assert [a.stage for a in writing_jobs.writing_job_attempts(job=ended)] == ["compiled"]

        # The killed claim's message comes back from Redis and finds the job ended.
        log = tmp_path / "2.log"
        _until("the killed worker's message comes back",
               lambda: log.read_text().count("search.write_kernel[") >= 3,  # received, succeeded, received
               deadline=deadline, worker=second, every_s=0.5)
        _until("the second worker is done with it", lambda: log.read_text().count("succeeded") >= 2,
               deadline=deadline, worker=second, every_s=0.2)
        assert row().updated == ended.updated and row().status == "done"
        assert len(llm_server.requests) == 2 and GenerationAttempt.objects.count() == 1
    finally:
        for worker in (first, second):
            if worker is not None:
                worker.stop()
