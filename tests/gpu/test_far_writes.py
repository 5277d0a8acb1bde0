"""Guard regions on a real GPU (issue 33, part 1): every buffer a candidate can reach in an
address range of its own between unmapped guards, so a stray write far past a buffer
faults, at the timed size as at L0, in checked and timed runs alike, and in the screen's
long-lived worker; and an honest kernel still passes on the same timing path.

    pytest -p no:django -m gpu tests/gpu/test_far_writes.py
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.gate import GateOptions, evaluate
from profiling.harness.screen import Screener, ScreenOptions
from profiling.harness.verdict import Verdict

pytestmark = pytest.mark.gpu

EXPLOITS = Path(__file__).with_name("exploits")
TIMED = {"n": 1 << 24}  # the size the far writes switch on at: L1 and the timed runs
SEEDS = GateOptions().seeds  # full-size correctness checks before the timed runs
ONE_THREAD_PER_ELEMENT = {"kernel": "relu", "grid": ["cdiv(n, 256)"], "block": [256]}


def relu(exploit: str | None = None, args: list | None = None) -> Candidate:
    task = tasks.get("relu")
    if exploit is None:
        return Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    plan = {"launches": [{**ONE_THREAD_PER_ELEMENT, "args": args or ["x", "y", "n"]}]}
    return Candidate.from_source_and_plan((EXPLOITS / exploit).read_text(), plan)


def judge(candidate: Candidate, **options) -> Verdict:
    settings = {"profile": False, "l1_sizes": TIMED, "timing_runs": 10, **options}
    return evaluate("relu", candidate, GateOptions(**settings))


def assert_guarded(verdict: Verdict) -> None:
    assert verdict.environment.buffers.startswith("guard regions"), verdict.environment.buffers


def test_a_write_1_mib_past_the_output_only_at_the_timed_size_is_caught_naming_the_guard():
    verdict = judge(relu("far_write.cu"))

    assert verdict.status == "rejected" and verdict.guard == "out_of_bounds_access", verdict.message
    assert_guarded(verdict)
    # Honest at every L0 size: only the guard region saw it, at the first full-size launch
    levels = {(r.level, r.passed) for r in verdict.correctness}
    assert levels == {("L0", True)}, levels


def test_a_far_write_in_the_timed_runs_only_faults_there_too():
    verdict = judge(relu("far_write_when_timed.cu", ["x", "y", "n", f"i32:{SEEDS}"]))

    assert verdict.status == "rejected" and verdict.guard == "out_of_bounds_access", verdict.message
    assert_guarded(verdict)
    assert [r.level for r in verdict.correctness].count("L1") == SEEDS
    assert all(r.passed for r in verdict.correctness)  # every check passed: the timed runs faulted


def test_an_honest_kernel_passes_with_guard_regions_on_the_same_timing_path():
    verdict = judge(relu(), timing_runs=30)

    assert verdict.status == "passed", verdict.message
    assert_guarded(verdict)
    assert verdict.timing.runs == 30 and verdict.timing.spot_checks == GateOptions().spot_checks
    assert all(r.passed and r.max_abs_error == 0.0 for r in verdict.correctness)


def test_without_guard_regions_the_verdict_says_canaries_only():
    verdict = judge(relu(), guard_regions=False)

    assert verdict.status == "passed", verdict.message
    assert verdict.environment.buffers.startswith("canaries only"), verdict.environment.buffers
    assert verdict.settings.get("guard_regions") is False  # not the standard gate


def test_the_screens_worker_names_the_fault_and_the_next_candidate_gets_a_clean_one(tmp_path):
    options = ScreenOptions(l1_sizes=TIMED, seed=11, input_cache=str(tmp_path / "inputs"),
                            workdir=str(tmp_path), time_limit_s=60)
    with Screener(options) as screener:
        first = screener.screen("relu", relu())
        starts = screener.child.starts
        fault = screener.screen("relu", relu("far_write.cu"))
        after = screener.screen("relu", relu())

    assert first.status == "passed", first.message
    assert fault.status == "rejected" and fault.guard == "out_of_bounds_access", fault.message
    assert after.status == "passed", after.message
    assert screener.child.starts == starts + 1  # the faulted context served no one else


# -- the buffers themselves, in this process -----------------------------------------------------

@pytest.fixture(scope="module")
def gpu():
    from profiling.harness import device

    gpu = device.Gpu()
    try:
        yield gpu
    finally:
        gc.collect()
        gpu.close()


def test_a_guarded_buffer_round_trips_and_its_canaries_are_the_rest_of_its_mapping(gpu):
    from profiling.harness import device
    from profiling.harness.checks import check_canaries
    from profiling.harness.guard_layout import USER_ALIGNMENT

    assert gpu.ranges is not None, gpu.buffers_evidence
    values = np.arange(4099, dtype=np.float32)
    buffer = device.Buffer("x", np.float32, values.shape, ranges=gpu.ranges)
    try:
        layout = gpu.ranges.layout(values.nbytes)
        assert buffer.ptr % USER_ALIGNMENT == 0
        assert buffer.ptr == buffer.mapping.reservation + layout.mapped_offset + layout.user_offset
        buffer.upload(values)
        np.testing.assert_array_equal(buffer.download(), values)
        before, after = buffer.guards()
        assert (before.size, after.size) == (layout.canary_before[1], layout.canary_after[1])
        assert check_canaries("x", before, after) is None
        device.cuda.memset_d8(buffer.ptr + values.nbytes + 100, 0, 1)  # a near overrun: a canary
        failure = check_canaries("x", *buffer.guards())
        assert failure is not None and failure.guard == "out_of_bounds_write"
    finally:
        buffer.free()
    assert buffer.mapping.released
