"""The Content-Security-Policy in a real Chromium: every page (sign-in, runs, a run with
its inspector open, new session, a share link, the API docs, the admin) loads and works
with no violation reported, so the policy refuses nothing the app itself needs. The
browser half is test_csp_browser.mjs (playwright-core from frontend/node_modules, as the
e2e tests use); the server is daphne's runserver over a fresh SQLite, with a run of the
real H200 relu recording."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_suffix(".mjs")
RECORDING = "tests/fixtures/recorded/h200-relu-search.json"


def _missing() -> str | None:
    if not Path("/usr/bin/chromium").exists():
        return "needs Chromium at /usr/bin/chromium (apt-get install chromium; .ci/run installs it)"
    if shutil.which("node") is None or not (REPO / "frontend/node_modules/playwright-core").is_dir():
        return "needs Node.js and the front end's packages (make frontend)"
    if not (REPO / "frontend/dist/assets/main.js").is_file():
        return "needs the built front end: run `make frontend`"
    return None


MISSING = _missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

SETUP = f"""
from django.contrib.auth.models import User
from profiling.evaluators import RecordedEvaluator
from profiling.harness import tasks
from search import services, sharing_services
relu = tasks.get("relu")
user = User.objects.create_user("ada", password="analytical-engine-1843")
run = services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan, budget=5,
                          user=user)
services.run_drive(run_id=run.pk, evaluator=RecordedEvaluator({RECORDING!r}))
link, token = sharing_services.share_create(run=run, user=user)
print(run.pk, token)
"""


@pytest.fixture
def served(tmp_path: Path):
    dropped = {"DATABASE_URL", "DATABASE_URL_FILE", "REDIS_URL", "REDIS_URL_FILE"}
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env.update(OPTIML_VAR_DIR=str(tmp_path / "var"), OPTIML_DEBUG="true", PYTHONUNBUFFERED="1",
               OPTIML_EVALUATOR=f"recorded:{RECORDING}", DJANGO_SETTINGS_MODULE="optiml_web.settings")

    def manage(*args: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        return done.stdout

    manage("migrate", "--noinput")
    run_id, token = manage("shell", "-c", SETUP).split()[-2:]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield {"BASE_URL": f"http://127.0.0.1:{port}", "RUN_ID": run_id, "SHARE_TOKEN": token,
               "E2E_USER": "ada", "E2E_PASSWORD": "analytical-engine-1843"}
    finally:
        process.terminate()
        process.wait(timeout=15)


def test_every_page_works_in_chromium_with_no_policy_violation(served):
    finished = subprocess.run(["node", str(SCRIPT)], cwd=REPO, env={**os.environ, **served},
                              capture_output=True, text=True, timeout=240)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    result = json.loads(finished.stdout.split("RESULT ", 1)[1])

    assert result["violations"] == [] and result["page_errors"] == []
    assert len(result["visited"]) == 7
    assert result["delta_bar_widths"] and any(width > 0 for width in result["delta_bar_widths"])
    assert result["highlighted_tokens"] > 0  # the inspector's highlighted source (innerHTML) drew
    assert result["swagger_operations"] >= 20  # Swagger UI ran: its bundle and settings script
