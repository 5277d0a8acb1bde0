"""The screen in front of the full gate: who gets the second look, and what is recorded.

The screener and the gate stand in for the GPU here (this host has none); the real
screener runs under `pytest -m gpu` (tests/gpu/test_screen.py) and in the H200 search
benchmark. What is tested here is the policy: the root and everything until a first
full pass go to the full gate; after that only candidates the screen finds faster than
the best full-gate time (by the margin) do, so the search's best is always a full verdict.
"""

from __future__ import annotations

import dataclasses

from engine_fakes import ROOT, variant

from profiling.harness.gate import GateOptions
from profiling.harness.screen import Screener, ScreenOptions
from profiling.harness.verdict import TimingReport, Verdict
from search.engine.evaluators import ScreeningEvaluator
from search.engine.judges import RuleJudge
from search.engine.types import Diagnosis, Measurement, NodeContext


def timed(candidate, ms: float, *, level: str, seconds: float) -> Verdict:
    timing = TimingReport(runs=10, median_ms=ms, mean_ms=ms, stdev_ms=0.0, min_ms=ms, max_ms=ms,
                          p10_ms=ms, p90_ms=ms, floor_ms=0.1, floor_reason="test", bytes=1.0, flops=0.0)
    return Verdict(task="relu", candidate_hash=candidate.content_hash(), status="passed",
                   stage="done", timing=timing, level=level, seconds=seconds)


class Table:
    """Times per kernel (by its BLOCK tunable) for the screen and the full gate."""

    def __init__(self, screen: dict[int, float | None], full: dict[int, float]) -> None:
        self.screen_times, self.full_times = screen, full
        self.screened, self.gated = [], []

    def screen(self, task, candidate):
        self.screened.append(candidate.tunables["BLOCK"])
        ms = self.screen_times[candidate.tunables["BLOCK"]]
        if ms is None:
            return Verdict(task=task, candidate_hash=candidate.content_hash(), status="rejected",
                           guard="wrong_values", message="L1 seed 0: 12 elements wrong",
                           stage="correctness", level="screen", seconds=0.4)
        return timed(candidate, ms, level="screen", seconds=0.5)

    def evaluate(self, task, candidate, options):
        self.gated.append(candidate.tunables["BLOCK"])
        return timed(candidate, self.full_times[candidate.tunables["BLOCK"]], level="full", seconds=18.0)

    def close(self):
        pass


def measure(table: Table, blocks: list[int]) -> list[Measurement]:
    evaluator = ScreeningEvaluator(GateOptions(), screener=table, evaluate=table.evaluate,
                                   compile=lambda candidate: None)
    results = []
    with evaluator:
        for block in blocks:
            evaluator.submit("relu", variant(ROOT, BLOCK=block))
            [(_, measurement)] = evaluator.collect(timeout_s=30)
            results.append(measurement)
    return results


def test_the_root_goes_to_the_full_gate_and_only_faster_screens_follow_it():
    table = Table(screen={128: 0.90, 512: 0.60, 1024: None, 64: 0.795},
                  full={256: 0.80, 512: 0.61})

    root, slower, faster, wrong, within_margin = measure(table, [256, 128, 512, 1024, 64])

    assert table.gated == [256, 512] and table.screened == [128, 512, 1024, 64]
    assert root.level == "full" and root.screen is None and root.time_ms == 0.80
    assert slower.level == "screen" and slower.passed and slower.time_ms == 0.90
    assert faster.level == "full" and faster.time_ms == 0.61
    assert faster.screen == {"time_ms": 0.60, "seconds": 0.5} and faster.seconds == 18.5
    assert wrong.level == "screen" and wrong.status == "rejected" and wrong.guard == "wrong_values"
    # 0.795 ms is faster than the root's 0.80 but within the 2 % margin of the best (0.61)
    assert within_margin.level == "screen"


def test_until_a_candidate_passes_the_full_gate_every_one_gets_it():
    table = Table(screen={}, full={256: 0.8, 128: 0.7})
    table.evaluate_first = table.evaluate

    def failing_root(task, candidate, options):
        if candidate.tunables["BLOCK"] == 256:
            table.gated.append(256)
            return Verdict(task=task, candidate_hash=candidate.content_hash(), status="rejected",
                           guard="launch", message="illegal address", stage="correctness")
        return table.evaluate_first(task, candidate, options)

    table.evaluate = failing_root
    root, second = measure(table, [256, 128])

    assert table.screened == [] and table.gated == [256, 128]
    assert root.status == "rejected" and second.level == "full"


def test_a_screener_failure_is_a_recorded_state_not_a_crash():
    class Broken(Table):
        def screen(self, task, candidate):
            raise OSError("the worker could not start")

    root, broken = measure(Broken(screen={}, full={256: 0.8}), [256, 128])

    assert root.passed and broken.status == "error" and broken.level == "screen"
    assert "the screen failed: OSError" in broken.message


def test_on_a_host_without_a_gpu_the_screen_compiles_and_says_it_could_not_run(tmp_path):
    with Screener(ScreenOptions(workdir=str(tmp_path))) as screener:
        verdict = screener.screen("relu", ROOT)

    assert verdict.level == "screen" and verdict.status == "incomplete"
    assert verdict.compile is not None and verdict.compile.ok
    assert screener.child.starts == 0  # nothing to run it on: no worker was started


def test_the_screen_rejects_a_bad_plan_before_any_gpu_work(tmp_path):
    broken = dataclasses.replace(ROOT, tunables={"x": 3})  # a tunable named like an input
    with Screener(ScreenOptions(workdir=str(tmp_path))) as screener:
        verdict = screener.screen("relu", broken)

    assert verdict.status == "rejected" and verdict.guard == "plan" and verdict.level == "screen"


def test_a_screened_node_is_diagnosed_from_its_nearest_profiled_ancestor_and_says_so():
    ancestor = Diagnosis("memory", "memory-bound: DRAM bandwidth is left unused",
                         ("DRAM throughput 55% < 80% of peak",), ("vectorize", "coalesce"))
    screened = Measurement(status="passed", time_ms=0.52, level="screen")

    diagnosis = RuleJudge().diagnose(NodeContext("relu", ROOT, screened, None,
                                                 profiled_ancestor=(3, ancestor)))

    assert diagnosis.bottleneck == "memory" and diagnosis.wants == ("vectorize", "coalesce")
    assert diagnosis.summary.startswith("screened, not profiled; the profile of node 3")
    assert "node 3: DRAM throughput 55% < 80% of peak" in diagnosis.evidence
    assert diagnosis.evidence[0] == "time 0.52 ms (CUDA events, median, screened, not profiled)"


def test_a_time_only_the_screen_measured_is_never_the_search_best():
    from engine_fakes import StepSource

    from search.engine.search import Search, SearchConfig

    class OneScreen:
        """The root by the full gate; every later kernel only screened, and faster."""

        def __init__(self):
            self.ready = []

        def submit(self, task, candidate):
            first = not self.ready and not getattr(self, "seen", False)
            self.seen = True
            level, ms = ("full", 0.80) if first else ("screen", 0.50)
            self.ready.append((candidate.content_hash(),
                               Measurement(status="passed", time_ms=ms, level=level)))

        def collect(self, timeout_s):
            ready, self.ready = self.ready, []
            return ready

    from search.engine.search import run_search

    judge = RuleJudge()
    search = run_search(Search("relu", ROOT, judge=judge, sources=[StepSource()],
                               config=SearchConfig(budget=4, seed=0)), OneScreen(), budget=4)

    assert search.tree.best_id == search.tree.root_id
    assert search.summary()["best_time_ms"] == 0.80


def test_the_screen_draws_its_l1_seed_where_the_full_gate_does():
    """The screen's L1 seed is the full gate's first: both draw it on the GPU, or both on
    the host (GateOptions.gpu_inputs), so either's cached reference serves the other."""
    from profiling.evaluators import screen_options_for

    for gpu_inputs in (True, False):
        gate_options = GateOptions(seed=3, input_cache="/tmp/x", gpu_inputs=gpu_inputs)
        assert screen_options_for(gate_options).gpu_inputs is gpu_inputs
    assert ScreenOptions().gpu_inputs is GateOptions().gpu_inputs is True
