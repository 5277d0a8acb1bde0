"""Share tokens never reach the logs: they are keys, stored only as hashes, but they travel
in URLs (/share/<token>/, /api/shared/<token>/..., the websocket's ?share=<token>). The
filter on settings.LOGGING's handler rewrites every line; here, real requests to a real
server (daphne's runserver, as `make start` runs it) and Django's own "Not Found" lines."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.error import HTTPError
from urllib.request import urlopen

import pytest

from optiml_web.log_redaction import REDACTED, redact

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("line", "expected"), [
    ("HTTP GET /share/AbC-12_x/ 200", f"HTTP GET /share/{REDACTED}/ 200"),
    ("HTTP GET /api/shared/AbC-12_x/nodes/3/ 200", f"HTTP GET /api/shared/{REDACTED}/nodes/3/ 200"),
    ("WebSocket CONNECT /ws/runs/4/?after=0&share=AbC-12_x [127.0.0.1]",
     f"WebSocket CONNECT /ws/runs/4/?after=0&share={REDACTED} [127.0.0.1]"),
    ("GET /accounts/login/?next=%2Fshare%2FAbC-12_x%2F",
     f"GET /accounts/login/?next=%2Fshare%2F{REDACTED}%2F"),
    ("GET /api/runs/4/shares/ 201", "GET /api/runs/4/shares/ 201"),  # no token: unchanged
])
def test_redact_replaces_the_token_wherever_a_url_carries_one(line, expected):
    assert redact(line) == expected


@pytest.mark.django_db
def test_djangos_not_found_line_for_a_share_url_is_written_without_the_token(client):
    handler = next(h for h in logging.getLogger("django").handlers if isinstance(h, logging.StreamHandler))
    written = io.StringIO()
    previous = handler.setStream(written)
    try:
        assert client.get("/api/shared/a-guessed-token-123/").status_code == 404
    finally:
        handler.setStream(previous)

    assert "a-guessed-token-123" not in written.getvalue()
    assert f"Not Found: /api/shared/{REDACTED}/" in written.getvalue()


# -- a real server ------------------------------------------------------------------------

SETUP = """
from django.contrib.auth.models import User
from profiling.harness import tasks
from search import services, sharing_services
relu = tasks.get("relu")
user = User.objects.create_user("ada", password="analytical-engine-1843")
run = services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan, budget=1,
                          user=user)
link, token = sharing_services.share_create(run=run, user=user)
print(run.pk, token)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(params=["runserver", "daphne"])
def served(tmp_path: Path, request):
    """(base URL, run id, token, log file, server) of runserver (daphne's, as `make start`
    runs it) or daphne's own command line (as the image runs it: optiml_web/daphne.py)
    over a fresh SQLite."""
    dropped = {"DATABASE_URL", "DATABASE_URL_FILE", "REDIS_URL", "REDIS_URL_FILE"}
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env.update(OPTIML_VAR_DIR=str(tmp_path / "var"), OPTIML_DEBUG="true", PYTHONUNBUFFERED="1",
               DJANGO_SETTINGS_MODULE="optiml_web.settings")

    def manage(*args: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        return done.stdout

    manage("migrate", "--noinput")
    run_id, token = manage("shell", "-c", SETUP).split()[-2:]
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("w") as out:
        command = ["manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"] \
            if request.param == "runserver" else \
            ["-m", "optiml_web.daphne", "--bind", "127.0.0.1", "--port", str(port),
             "optiml_web.asgi:application"]
        process = subprocess.Popen([sys.executable, *command], cwd=REPO, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield f"127.0.0.1:{port}", int(run_id), token, log, request.param
    finally:
        process.terminate()
        process.wait(timeout=15)


def _get(url: str) -> int:
    try:
        with urlopen(url, timeout=10) as response:
            return response.status
    except HTTPError as error:
        return error.code


async def _watch(url: str) -> str:
    import websockets

    async with websockets.connect(url, origin="http://127.0.0.1") as ws:
        return await asyncio.wait_for(ws.recv(), timeout=10)


def test_the_servers_request_log_never_writes_a_share_token(served):
    host, run_id, token, log, server = served

    assert _get(f"http://{host}/share/{token}/") == 200
    assert _get(f"http://{host}/api/shared/{token}/") == 200
    assert _get(f"http://{host}/api/shared/{token}/events/?after=x") == 400
    assert _get(f"http://{host}/api/shared/{token}x/") == 404
    first = asyncio.run(_watch(f"ws://{host}/ws/runs/{run_id}/?after=0&share={token}"))
    assert '"events"' in first or '"synced"' in first  # the link let the socket in
    time.sleep(0.5)  # the disconnect line

    written = log.read_text()
    assert token not in written, written
    if server == "runserver":
        assert f"/share/{REDACTED}/ 200" in written
        assert f"/api/shared/{REDACTED}/ 200" in written
        assert f"/api/shared/{REDACTED}/events/?after=x 400" in written
        assert f"WebSocket CONNECT /ws/runs/{run_id}/" in written
    else:  # daphne's own access log, NCSA-style: "GET <path>" status size
        assert f'"GET /share/{REDACTED}/" 200' in written, written
        assert f'"GET /api/shared/{REDACTED}/" 200' in written
        assert f'"WSCONNECT /ws/runs/{run_id}/"' in written


async def _refused_status(url: str) -> int:
    import websockets
    from websockets.exceptions import InvalidStatus

    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(url, origin="http://127.0.0.1"):
            pass
    return refused.value.response.status_code


def test_a_websocket_to_a_path_no_app_routes_is_refused_by_the_server_without_a_traceback(served):
    """Channels' "No route found" was a 500 and a traceback in the server's log (issue 34, part 6).
    The image's daphne (optiml_web/daphne.py) answers it 400, through ASGI's websocket denial
    response, and so does runserver, whose command uses the same server
    (optiml_web/management/commands/runserver.py); daphne's own answers every refusal 403."""
    host, run_id, token, log, server = served
    unrouted = 400

    assert asyncio.run(_refused_status(f"ws://{host}/ws/nowhere/")) == unrouted  # the handshake refused
    assert asyncio.run(_refused_status(f"ws://{host}/ws/runs/abc/")) == unrouted
    assert asyncio.run(_refused_status(f"ws://{host}/ws/runs/0{run_id}/")) == unrouted  # no leading 0
    # A run that exists but is not the viewer's (signed out, no link) stays a 403 on both.
    assert asyncio.run(_refused_status(f"ws://{host}/ws/runs/{run_id}/")) == 403
    time.sleep(0.5)

    written = log.read_text()
    assert "Traceback" not in written and "No route found" not in written, written
    assert "websocket refused: no route for /ws/nowhere/" in written, written


# -- Celery's worker and beat --------------------------------------------------------------

CELERY_LOGGING = """
import logging
import django
django.setup()
from celery.utils.log import get_task_logger
from optiml_web.celery import app
# What `celery worker` and `celery beat` call at start (WorkController.setup_logging,
# celery.apps.beat.Beat.setup_logging): Celery's handlers replace settings.LOGGING's.
app.log.setup(loglevel="INFO", redirect_stdouts=True, redirect_level="WARNING")
logging.getLogger("search.tasks").warning("GET /share/tok-in-a-module-log/")
get_task_logger("search.tasks").warning("opened /api/shared/tok-in-a-task-log/nodes/")
print("printed ?share=tok-printed-by-a-task")
try:
    raise ValueError("/accounts/invitations/tok-in-a-traceback/")
except ValueError:
    logging.getLogger("celery.worker").exception("a task failed")
"""


def test_celerys_worker_and_beat_logs_never_write_a_token(tmp_path: Path):
    dropped = {"DATABASE_URL", "DATABASE_URL_FILE", "REDIS_URL", "REDIS_URL_FILE"}
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env.update(OPTIML_VAR_DIR=str(tmp_path / "var"), DJANGO_SETTINGS_MODULE="optiml_web.settings")
    done = subprocess.run([sys.executable, "-c", CELERY_LOGGING], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    written = done.stdout + done.stderr

    assert done.returncode == 0, written
    assert "tok-" not in written, written
    assert written.count(REDACTED) == 4, written
