"""Pre-flight in a real Chromium (issue 35): a kernel the gate would not compile is shown by
its line on the New session page, and no run is made; without nvcc on the server the form
says that pre-flight could not compile, and the run still starts. The browser half is
tests/e2e/preflight.mjs; the server and its app are test_explorer.py's fixtures, imported
here by name (so the tests' parameters name them again: F811)."""
# ruff: noqa: F811

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_explorer import MISSING, SHOTS, _browse, _manage, app_env, server  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
SCRIPT = Path(__file__).with_name("preflight.mjs")


def _run_count(env: dict[str, str]) -> int:
    out = _manage(env, "shell", "-c", "from search.models import Run\nprint(Run.objects.count())")
    return int(out.split()[-1])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on the server")
def test_a_compile_error_is_shown_on_its_line_and_no_run_is_made(server, app_env):
    result = _browse(SCRIPT, *server)

    assert result["url_after"] == "/runs/new/" and _run_count(app_env) == 0, result
    assert result["source_error"].startswith(f"line {result['typo_line']}")
    assert "fmaxx" in result["source_error"]
    assert result["marked_lines"] == [result["typo_line"]]
    assert "no run was created" in result["status"]
    assert "fmaxx" in result["selected"]  # the line's link selected that line in the editor
    assert result["marks_after_edit"] == 0 and result["errors_after_fix"] == 0
    assert "compiles and the plan fits" in result["status_fixed"]
    assert result["page_errors"] == []
    assert (SHOTS / "preflight-errors.png").stat().st_size > 10_000


@pytest.fixture
def without_nvcc(app_env):
    """The server's PATH without any folder that holds nvcc (before `server` starts it)."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    app_env["PATH"] = os.pathsep.join(f for f in folders if not (Path(f) / "nvcc").exists())
    # A cubin cache of its own: a kernel compiled before would need no nvcc.
    app_env["OPTIML_CACHE_DIR"] = str(Path(app_env["OPTIML_VAR_DIR"]) / "cache")


def test_without_nvcc_the_form_says_it_could_not_compile_and_the_run_starts(without_nvcc, server, app_env):
    result = _browse(SCRIPT, *server, NO_NVCC="1")

    assert "could not compile" in result["status"] and "nvcc is not installed" in result["status"]
    assert result["run_id"] > 0 and _run_count(app_env) == 1
    assert result["page_errors"] == []
