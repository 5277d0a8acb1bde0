"""Browser tests: real Chromium driving the app served by daphne."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def pytest_configure(config):
    # Registered here, beside the tests that use it, so this folder stays self-contained.
    config.addinivalue_line("markers", "e2e: drives the app in a real Chromium (needs /usr/bin/chromium)")


@pytest.fixture(autouse=True)
def writing_worker(request, tmp_path):
    """The Celery worker `make start` runs beside the web process, for the tests whose app
    has an LLM to write kernels from intents (test_explorer.py's `llm_app_env`): writing
    is a job (search/writing_jobs.py) that only a worker runs. Embedded default, as the
    app there is: no Redis, so the messages pass through files under the app's var/, and
    the SQLite database the server uses. Other tests drive their runs by hand, so they
    get no worker that would drive them too."""
    if "llm_app_env" not in request.fixturenames:
        yield None
        return
    request.getfixturevalue("llm_app_env")  # sets the LLM's address in the app's settings first
    env = request.getfixturevalue("app_env")
    log = tmp_path / "worker.log"  # kept with the test's other files when it fails
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "optiml_web", "worker", "--queues", "celery",
             "--concurrency", "1", "--loglevel", "INFO", "--hostname", "e2e-writer@%h",
             "--without-mingle", "--without-gossip"],  # only to start faster
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield worker
    finally:
        worker.terminate()  # a warm shutdown
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
