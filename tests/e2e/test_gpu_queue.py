"""Queued for a GPU worker, in a real Chromium (issue 35): on a server whose evaluator is
the gate, with no GPU worker connected, New session warns before a run starts; the run's
first step hands nothing out and the page shows "queued for a GPU worker" (pushed, no
reload); once a GPU worker beats, the next step takes the run out of the queue. The steps
run in another process as the CPU worker's would (search.services.run_dispatch); the
worker's beat is profiling.workers.gpu_worker_beat. The browser half is
tests/e2e/gpu_queue.mjs; screenshots go to build/e2e/ (gpu-queue-new-session.png,
gpu-queue-run.png). test_explorer's server and app, imported here by name (F811)."""
# ruff: noqa: F811

from __future__ import annotations

import json
import os
import queue
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.test_explorer import (  # noqa: F401
    CHROMIUM,
    MISSING,
    PASSWORD,
    REPO,
    SCRIPT_TIMEOUT_S,
    SHOTS,
    USER,
    _lines,
    _manage,
    app_env,
    server,
)

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
SCRIPT = Path(__file__).with_name("gpu_queue.mjs")


@pytest.fixture
def gate_server(app_env):
    """The server's own evaluator is the gate (before `server` starts it), as `make start`'s."""
    app_env["OPTIML_EVALUATOR"] = "gate"


def _step(env: dict[str, str], run_id: int, *, worker_beats: bool = False) -> str:
    beat = ("from profiling.workers import gpu_worker_beat\n"
            "gpu_worker_beat(hostname='gpu0@e2e', gpu='NVIDIA H100 80GB HBM3')\n") if worker_beats else ""
    return _manage(env, "shell", "-c", (
        f"{beat}from search import services\nfrom search.models import Run\n"
        f"services.run_dispatch(run_id={run_id})\n"
        f"run = Run.objects.get(pk={run_id})\nprint(run.status, run.queued_since is not None)"))


def test_a_run_without_a_gpu_worker_waits_queued_and_leaves_the_queue_when_one_beats(
    gate_server, server, app_env
):
    base_url, server_log = server
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser = subprocess.Popen(
        ["node", str(SCRIPT)], cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "BASE_URL": base_url, "E2E_USER": USER, "E2E_PASSWORD": PASSWORD,
             "SHOTS_DIR": str(SHOTS), "CHROMIUM": str(CHROMIUM)})
    lines, result, transcript, steps = _lines(browser), None, [], []
    deadline = time.monotonic() + SCRIPT_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            transcript.append(line)
            if line.startswith("WATCHING "):
                run_id = int(line.split()[1])
                steps.append(_step(app_env, run_id).split()[-2:])
            elif line == "QUEUED":
                steps.append(_step(app_env, run_id, worker_beats=True).split()[-2:])
            elif line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
        browser.wait(timeout=30)
    finally:
        if browser.poll() is None:
            browser.kill()
    assert browser.returncode == 0 and result is not None, (
        "\n".join(transcript) + f"\n--- server log ---\n{server_log.read_text()[-4000:]}")

    assert "No GPU worker is connected now" in result["gate_hint"]
    assert "queued for a GPU worker" in result["gate_hint"] and result["gate_hint_warns"] is True
    assert steps == [["running", "True"], ["running", "False"]]
    assert result["before"] == "running"
    assert result["queued"] == "queued for a GPU worker"
    assert result["queued_message"].startswith("queued for a GPU worker: none is connected")
    assert result["after"] == "running" and result["after_message"] == 0
    assert result["navigations"] == 0 and result["page_errors"] == []
    for name in ("gpu-queue-new-session", "gpu-queue-run"):
        assert (SHOTS / f"{name}.png").stat().st_size > 10_000, name
