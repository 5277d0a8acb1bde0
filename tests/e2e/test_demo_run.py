"""A demo run in a real Chromium (issue 35): on a server whose evaluator is the gate and
that no GPU has measured for, New session picks Demo for a task with a recording, says
why, and refuses it in words for one without; the run's page carries the banner (GPU and
date); the run, driven, measures every node from the recording. The browser half is
tests/e2e/demo_run.mjs; the server and its app are test_explorer.py's fixtures."""
# ruff: noqa: F811

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_explorer import MISSING, SHOTS, _browse, _manage, app_env, server  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
SCRIPT = Path(__file__).with_name("demo_run.mjs")


@pytest.fixture
def gate_server(app_env):
    """The server's own evaluator is the gate (before `server` starts it), as `make start`'s."""
    app_env["OPTIML_EVALUATOR"] = "gate"


def test_new_session_offers_a_demo_run_and_its_page_says_the_times_are_recorded(gate_server, server, app_env):
    result = _browse(SCRIPT, *server)

    assert result["relu_default"] == "demo" and "NVIDIA H200" in result["relu_hint"]
    assert "No GPU worker has measured a kernel here yet" in result["relu_hint"]
    assert result["budget_disabled"] is True
    assert result["softmax_default"] == "gate"
    assert "softmax has no demo recording" in result["softmax_demo_hint"]
    assert "recorded" in result["banner"] and "NVIDIA H200" in result["banner"]
    assert result["page_errors"] == []
    out = _manage(app_env, "shell", "-c", (
        "from search import services\nfrom search.models import RunNode\n"
        f"run = services.run_drive(run_id={result['run_id']})\n"
        "print(run.status, run.evaluated, sorted({n.status for n in RunNode.objects.filter(run=run)}))"))
    assert out.strip().endswith("finished 5 ['passed']"), out
    assert (SHOTS / "demo-run-banner.png").stat().st_size > 10_000
