"""One timing at a time per GPU (profiling/gputurn.py): a second process that wants the
same device waits for the first, another device does not, and a killed holder frees it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from profiling.gputurn import device_key, gpu_turn, lock_path

HOLD = ("from profiling.gputurn import gpu_turn\nimport sys, time\nwith gpu_turn():\n"
        "    print('held', flush=True)\n    time.sleep(float(sys.argv[1]))\n")


def _holder(seconds: float, device: str) -> subprocess.Popen:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": device}
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(seconds)], env=env, stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline().strip() == "held"
    return process


@pytest.fixture
def device(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the locks of this test only
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return "7"


def test_the_device_is_the_first_visible_one_and_cudas_default_without_any(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1a2b,3")
    assert device_key() == "GPU-1a2b"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert device_key() == "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "../../etc")
    assert "/" not in lock_path().name


def test_a_second_evaluation_on_the_same_gpu_waits_for_the_first(device):
    holder = _holder(1.5, device)
    began = time.monotonic()
    with gpu_turn(device):
        waited = time.monotonic() - began
    holder.wait(timeout=10)
    assert waited >= 1.0


def test_another_gpu_does_not_wait(device):
    holder = _holder(3.0, device)
    began = time.monotonic()
    with gpu_turn("8"):
        waited = time.monotonic() - began
    holder.kill()
    holder.wait(timeout=10)
    assert waited < 1.0


def test_a_killed_holder_leaves_the_gpu_free(device):
    holder = _holder(60.0, device)
    holder.kill()
    holder.wait(timeout=10)
    began = time.monotonic()
    with gpu_turn(device):
        assert time.monotonic() - began < 1.0


def test_starting_the_screeners_gpu_process_is_inside_the_turn(device, monkeypatch):
    """The screener's process makes a CUDA context and allocates when it starts: that is
    GPU work, so it waits for the turn like a timing (a stand-in screener asks whether
    another process could take the lock while it starts)."""
    import fcntl

    from profiling import evaluators

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", device)
    seen = []

    def lock_free() -> bool:
        with open(lock_path(device), "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(handle, fcntl.LOCK_UN)
            return True

    class StandIn:
        def __init__(self, options) -> None:
            # flock locks belong to the open file: another open of the lock, as another
            # process would make, is refused while the turn is held.
            seen.append(("started", lock_free()))

        def screen(self, task, candidate, options):
            seen.append(("screened", lock_free()))
            return "verdict"

        def close(self) -> None:
            pass

    evaluator = evaluators.GateEvaluator(screener_factory=StandIn)
    monkeypatch.setattr(evaluator, "gpu", lambda: "NVIDIA H200")
    assert evaluator.screen("relu", object(), evaluators.GateOptions()) == "verdict"
    assert seen == [("started", False), ("screened", False)]
    evaluator.close()
