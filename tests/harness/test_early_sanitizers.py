"""The gate starts compute-sanitizer while the worker verifies its timed runs, never before.

compute-sanitizer needs a GPU, so here its tools are replaced by a recorder (the real
tools run in tests/gpu/test_hardening.py, whose honest kernels check that the overlap
happened). What is tested is the order: nothing starts before the worker says its timing
is over, the tools run on the worker's base seed, and what they find still decides the
verdict.
"""

import threading
from pathlib import Path

import pytest

from profiling.harness import gate, tasks
from profiling.harness.gate import VERIFY_STAGE, GateOptions, _EarlySanitizers
from profiling.harness.sanitize import ToolResult
from profiling.harness.verdict import Verdict


@pytest.fixture
def tools(monkeypatch):
    """Records each start of the tools (its seed) and returns what `found` says."""
    calls: list[int | None] = []
    found: dict = {"guard": None}
    release = threading.Event()
    release.set()

    def run_sanitizers(task, report, candidate, options, workdir, digest, seed):
        calls.append(seed)
        release.wait(10)
        message = "an invalid read" if found["guard"] else ""
        return [ToolResult("memcheck", True, found["guard"], message, 0.01),
                ToolResult("racecheck", True, None, "", 0.02)]

    monkeypatch.setattr(gate, "_run_sanitizers", run_sanitizers)
    return calls, found, release


def early(tmp_path: Path) -> _EarlySanitizers:
    return _EarlySanitizers(tasks.get("relu"), None, None, GateOptions(), tmp_path, "d" * 64)


def passed(seed: int = 7) -> Verdict:
    return Verdict(task="relu", candidate_hash="d" * 64, status="passed", seeds={"base_seed": seed})


def test_the_tools_start_at_the_verify_stage_on_the_worker_s_seed(tools, tmp_path):
    calls, _, release = tools
    release.clear()
    sanitizers = early(tmp_path)
    for stage in ("init", "compile", "timing"):  # the GPU is still measuring
        sanitizers.on_message({"type": "stage", "stage": stage, "base_seed": 7})
    assert calls == []
    sanitizers.on_message({"type": "stage", "stage": VERIFY_STAGE, "base_seed": 7})
    sanitizers.on_message({"type": "stage", "stage": VERIFY_STAGE, "base_seed": 7})  # once only
    release.set()
    verdict, ran = sanitizers.apply(passed())
    assert calls == [7] and ran == ["memcheck", "racecheck"]
    assert verdict.status == "passed"
    assert verdict.stage_seconds["sanitize_overlapped"] == 1.0
    assert verdict.stage_seconds["sanitize_memcheck"] == 0.01


def test_without_the_stage_message_the_tools_run_after_the_worker(tools, tmp_path):
    calls, _, _ = tools
    sanitizers = early(tmp_path)
    sanitizers.on_message({"type": "stage", "stage": VERIFY_STAGE})  # no seed: not trusted to start
    sanitizers.on_message({"type": "check", "stage": VERIFY_STAGE, "base_seed": 3})  # not a stage
    assert calls == []
    verdict, _ = sanitizers.apply(passed(seed=11))
    assert calls == [11] and verdict.stage_seconds["sanitize_overlapped"] == 0.0


def test_what_a_tool_finds_rejects_the_verdict_naming_its_guard(tools, tmp_path):
    calls, found, _ = tools
    found["guard"] = "out_of_bounds"
    sanitizers = early(tmp_path)
    sanitizers.on_message({"type": "stage", "stage": VERIFY_STAGE, "base_seed": 5})
    verdict, _ = sanitizers.apply(passed(seed=5))
    assert verdict.status == "rejected" and verdict.guard == "out_of_bounds"
    assert verdict.stage == "sanitize memcheck" and "an invalid read" in verdict.message


def test_a_gate_without_sanitizers_never_starts_them(tools, tmp_path):
    calls, _, _ = tools
    sanitizers = _EarlySanitizers(tasks.get("relu"), None, None, GateOptions(sanitize=()), tmp_path, "d" * 64)
    sanitizers.on_message({"type": "stage", "stage": VERIFY_STAGE, "base_seed": 5})
    sanitizers.discard()
    assert calls == []


def test_a_failure_of_the_tools_themselves_reaches_the_gate(monkeypatch, tmp_path):
    def broken(*args):
        raise OSError("compute-sanitizer vanished")

    monkeypatch.setattr(gate, "_run_sanitizers", broken)
    sanitizers = early(tmp_path)
    sanitizers.on_message({"type": "stage", "stage": VERIFY_STAGE, "base_seed": 5})
    with pytest.raises(OSError, match="vanished"):
        sanitizers.apply(passed())
