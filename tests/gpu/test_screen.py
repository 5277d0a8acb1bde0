"""The search's screen on a real GPU: one long-lived worker, every guard still on, and a
worker that faults or hangs is replaced without blaming the next candidate."""

from pathlib import Path

import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.screen import Screener, ScreenOptions

pytestmark = pytest.mark.gpu

EXPLOITS = Path(__file__).with_name("exploits")
SMALL = {"n": 1 << 24}
COUNTING_PLAN = {"launches": [
    {"kernel": "relu", "grid": [1024], "block": [256], "args": ["x", "y", "n"]},
    {"kernel": "count_call", "grid": [1], "block": [1], "args": ["n"]},
]}


def relu(exploit: str | None = None, plan: dict | None = None) -> Candidate:
    task = tasks.get("relu")
    source = task.naive_source if exploit is None else (EXPLOITS / exploit).read_text()
    return Candidate.from_source_and_plan(source, plan or task.naive_plan)


@pytest.fixture(scope="module")
def screener(tmp_path_factory):
    work = tmp_path_factory.mktemp("screen")
    with Screener(ScreenOptions(l1_sizes=SMALL, seed=7, input_cache=str(work / "inputs"),
                                workdir=str(work), time_limit_s=20)) as screener:
        yield screener


def test_the_naive_kernel_passes_the_screen_with_its_checks_and_timing(screener):
    verdict = screener.screen("relu", relu())

    assert verdict.status == "passed" and verdict.stage == "screened" and verdict.level == "screen"
    levels = [(r.level, r.passed) for r in verdict.correctness]
    assert levels.count(("L1", True)) == 1 and ("L0", True) in levels and len(levels) > 2
    assert verdict.timing.runs == 10 and verdict.timing.spot_checks == 0
    assert verdict.profile is None


def test_guards_fire_in_the_screen_and_the_worker_serves_on(screener):
    starts = screener.child.starts
    zeros = screener.screen("relu", relu("zeros.cu"))
    partial = screener.screen("relu", relu("partial_write.cu"))
    mutates = screener.screen("relu", relu("mutates_inputs.cu"))
    floor = screener.screen("relu", relu("counts_calls.cu", COUNTING_PLAN))
    honest = screener.screen("relu", relu())

    assert (zeros.guard, partial.guard, mutates.guard, floor.guard) == \
        ("wrong_values", "output_unwritten", "input_mutated", "physics_floor")
    assert honest.status == "passed"
    assert screener.child.starts == starts  # no new worker was needed


def test_a_fault_ends_the_worker_and_the_next_candidate_gets_a_clean_one(screener):
    assert screener.screen("relu", relu()).status == "passed"  # the worker is up, whatever ran before
    starts = screener.child.starts
    fault = screener.screen("relu", relu("wild_write.cu"))
    after = screener.screen("relu", relu())

    assert fault.status == "rejected" and fault.guard == "out_of_bounds_access"
    assert after.status == "passed", after.message
    assert screener.child.starts == starts + 1


def test_a_hang_is_killed_at_the_screen_time_limit_and_the_next_candidate_runs(screener):
    hung = screener.screen("relu", relu("infinite_loop.cu"))
    after = screener.screen("relu", relu())

    assert hung.status == "rejected" and hung.guard == "timeout"
    assert after.status == "passed", after.message


def test_a_screen_is_much_cheaper_than_a_full_evaluation(screener):
    verdicts = [screener.screen("relu", relu()) for _ in range(3)]

    # 2^24 elements: a full gate evaluation of this kernel takes seconds (process, CUDA
    # context, 10 checks, 30 runs); the warm screen's share is the checks and 12 runs.
    assert max(v.seconds for v in verdicts) < 2.0, [v.seconds for v in verdicts]


def test_comparing_on_the_gpu_agrees_with_the_hosts_comparison(tmp_path):
    """Softmax's outputs differ from the float64 reference by rounding: the screen's L1
    errors (compared on the GPU) match the full gate's for the same seed (on the host),
    both with the L1 inputs from the host."""
    from profiling.harness.gate import GateOptions, evaluate

    task = tasks.get("softmax")
    naive = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    sizes = {"M": 512, "N": 8192}
    with Screener(ScreenOptions(l1_sizes=sizes, seed=11, input_cache=str(tmp_path / "inputs"),
                                workdir=str(tmp_path / "screen"), gpu_inputs=False)) as screener:
        screened = screener.screen("softmax", naive)
    full = evaluate("softmax", naive, GateOptions(l1_sizes=sizes, seed=11, seeds=1, timing_runs=5,
                                                   profile=False, input_cache=str(tmp_path / "inputs"),
                                                   workdir=str(tmp_path / "full"), gpu_inputs=False))

    [on_gpu] = [r for r in screened.correctness if r.level == "L1"]
    [on_host] = [r for r in full.correctness if r.level == "L1"]
    assert on_gpu.passed and on_host.passed and on_gpu.seed == on_host.seed
    assert on_gpu.max_abs_error == pytest.approx(on_host.max_abs_error, rel=1e-3)
    assert on_gpu.max_abs_error > 0


def test_a_task_with_its_own_comparison_is_screened_with_its_inputs(tmp_path):
    """reduce_sum's comparison bounds the error by the inputs' magnitudes (3e-7 * sum |x|):
    the screen, which checks unchanged inputs on the GPU, must still hand them to it."""
    task = tasks.get("reduce_sum")
    naive = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    with Screener(ScreenOptions(l1_sizes={"n": 1 << 24}, seed=5, input_cache=str(tmp_path / "in"),
                                workdir=str(tmp_path))) as screener:
        verdict = screener.screen("reduce_sum", naive)

    assert verdict.status == "passed", verdict.message


def test_the_screens_l1_seed_is_drawn_on_the_gpu_once_and_its_reference_serves_the_full_gate(tmp_path):
    """The screen's L1 seed is the full gate's first: drawn on the GPU by the first screen,
    its reference computed on the host once and cached under the draws' checksum; the
    second screen copies the seed kept on the GPU; the full gate's first L1 seed finds
    the reference in the cache. No L1 input is built on the host."""
    from profiling.harness import inputs
    from profiling.harness.gate import GateOptions, evaluate

    cache = tmp_path / "inputs"
    with Screener(ScreenOptions(l1_sizes=SMALL, seed=21, input_cache=str(cache),
                                workdir=str(tmp_path / "screen"))) as screener:
        first = screener.screen("relu", relu())
        second = screener.screen("relu", relu())
    full = evaluate("relu", relu(), GateOptions(l1_sizes=SMALL, seed=21, seeds=2, timing_runs=5,
                                                profile=False, input_cache=str(cache),
                                                workdir=str(tmp_path / "full")))

    assert first.status == second.status == full.status == "passed", (first.message, full.message)
    assert "their references: 1 from the host" in first.environment.inputs
    assert "1 from the seed this screening process keeps on the GPU" in second.environment.inputs
    assert "2 L1 seed(s)" in full.environment.inputs
    assert "1 from the input cache, 1 from the host" in full.environment.inputs
    [screened] = [r for r in first.correctness if r.level == "L1"]
    assert screened.seed in [r.seed for r in full.correctness if r.level == "L1"]
    assert all(r.max_abs_error == 0.0 for r in [*first.correctness, *second.correctness])
    entries = {e.name for e in cache.iterdir() if not e.name.startswith(".")}
    l1 = inputs.check_plan(tasks.get("relu"), ["L1"], SMALL, {"L1": 2}, 21)
    host_keys = {inputs._key(tasks.get("relu"), c.sizes, c.seed, c.distribution) for c in l1}
    assert {f"{k}-gpu" for k in host_keys} <= entries and not host_keys & entries


def test_a_task_with_its_own_comparison_reads_the_seed_kept_on_the_gpu_back(tmp_path):
    """reduce_sum's comparison needs the inputs on the host: for a seed drawn on the GPU
    they are read back from the copy kept there, checked first to be the draw's, for
    every candidate (the second screen has no other host copy)."""
    task = tasks.get("reduce_sum")
    naive = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    with Screener(ScreenOptions(l1_sizes={"n": 1 << 24}, seed=6, input_cache=str(tmp_path / "in"),
                                workdir=str(tmp_path))) as screener:
        verdicts = [screener.screen("reduce_sum", naive) for _ in range(2)]

    assert [v.status for v in verdicts] == ["passed", "passed"], [v.message for v in verdicts]
    assert "keeps on the GPU" in verdicts[1].environment.inputs
