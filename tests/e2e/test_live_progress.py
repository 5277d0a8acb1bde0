"""Progress that moves (issue 35): in a real Chromium, a run's page shows its rate, time left,
GPU time and speed-up over the vendor changing while the run runs, pushed over the run's
socket, with no reload. The
run is made signed in as ada and driven in another process as a worker would, over the
recorded H200 relu search (test_explorer's server and app, imported here by name, so the
tests' parameters name them again: F811). The browser half is tests/e2e/live_progress.mjs;
screenshots go to build/e2e/ (progress-before.png, progress-live.png)."""
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
    _drive,
    _lines,
    _manage,
    app_env,
    server,
)

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
SCRIPT = Path(__file__).with_name("live_progress.mjs")
BUDGET = 6


def _make_run(env: dict[str, str]) -> int:
    out = _manage(env, "shell", "-c", (
        "from django.contrib.auth.models import User\n"
        "from profiling.harness import tasks\n"
        "from search import services\n"
        "relu = tasks.get('relu')\n"
        "run = services.run_create(task_name='relu', source=relu.naive_source, plan=relu.naive_plan,\n"
        f"                         budget={BUDGET}, user=User.objects.get(username={USER!r}))\n"
        "print(run.pk)"))
    return int(out.split()[-1])


def test_the_progress_line_and_gpu_time_move_while_the_run_runs_without_a_reload(server, app_env, tmp_path):
    base_url, server_log = server
    run_id = _make_run(app_env)
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser = subprocess.Popen(
        ["node", str(SCRIPT)], cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "BASE_URL": base_url, "E2E_USER": USER, "E2E_PASSWORD": PASSWORD,
             "SHOTS_DIR": str(SHOTS), "CHROMIUM": str(CHROMIUM), "RUN_ID": str(run_id)})
    driver_log = (tmp_path / "driver.log").open("w")
    driver, result, transcript = None, None, []
    lines = _lines(browser)
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
            if line == "WATCHING":
                driver = _drive(app_env, run_id, driver_log)
            elif line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
        browser.wait(timeout=30)
    finally:
        if browser.poll() is None:
            browser.kill()
        if driver is not None:
            try:
                driver.wait(timeout=60)
            except subprocess.TimeoutExpired:
                driver.kill()
                driver.wait()
        driver_log.close()
    assert browser.returncode == 0 and result is not None, (
        "\n".join(transcript) + f"\n--- server log ---\n{server_log.read_text()[-4000:]}")
    print("the browser saw:", json.dumps(result, indent=1))

    # Never reloaded: the page's own mark survived, and it navigated nowhere.
    assert result["not_reloaded"] is True and result["navigations"] == 0
    assert result["page_errors"] == []
    # While the run ran, the line moved, and it showed a rate and a time left, which only
    # the pushed progress brings (the page loaded before anything was measured).
    running = result["running_lines"]
    assert running[0].startswith(f"0 / {BUDGET} evaluated"), running
    assert len(running) >= 3, running
    assert any("candidates/min" in line and "left" in line for line in running), running
    # GPU time: 0.0 s when the page opened, more while the run still ran.
    assert result["running_gpu_times"][0] == "0.0 s", result["running_gpu_times"]
    assert any(t not in {"0.0 s", "—"} for t in result["running_gpu_times"]), result["running_gpu_times"]
    # The header's speed-up over the vendor: none before the root was measured (the page
    # opened then), the H200's recorded vendor time once it was, while the run still ran.
    vendor = result["running_vendor"]
    assert vendor[0] == "" and any("× (vendor recorded on the H200)" in v for v in vendor), vendor
    assert result["lines"][-1].startswith(f"{BUDGET} evaluated · complete"), result["lines"]
    assert (SHOTS / "progress-live.png").stat().st_size > 10_000
