"""The search replayed over measurements really taken on the H200 (bench/results/
2026-11-29-h200-search/): same seed, same proposals, so the same tree and the same
answer, labelled as replayed. If a rewrite or the judge changes what it proposes, the
new kernels have no recording and this test says so. Rewrites added after the recording
are left out of the replayed search (RECORDED_REWRITES) until it is recorded again."""

from pathlib import Path

import pytest

from bench.search_summary import SUITE_REWRITES
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.__main__ import fast_math_allowed
from search.engine.evaluators import ReplayEvaluator
from search.engine.judges import RuleJudge
from search.engine.rewrites import RewriteSource, all_rewrites
from search.engine.search import Search, SearchConfig, run_search
from search.engine.sources import TunableSource

RECORDINGS = Path(__file__).parents[1] / "fixtures" / "replay"
# Rewrites written after these measurements were taken: their kernels were never run there.
ADDED_SINCE_RECORDING = frozenset({"grid_stride_accumulate", "block_per_row", "vectorize_rows"})
RECORDED_REWRITES = tuple(r for r in all_rewrites() if r.name not in ADDED_SINCE_RECORDING)


def replayed_search(task_name: str, budget: int) -> Search:
    task = tasks.get(task_name)
    root = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    judge = RuleJudge()
    search = Search(task_name, root, judge=judge, fallback_judge=judge,
                    sources=[TunableSource(), RewriteSource(RECORDED_REWRITES)],
                    config=SearchConfig(budget=budget, seed=0))
    return run_search(search, ReplayEvaluator(RECORDINGS / f"h200-{task_name}-search-seed0.json"),
                      budget=budget)


def test_the_relu_search_replays_to_the_float4_kernel_at_the_copy_ceiling():
    search = replayed_search("relu", budget=5)
    rows = search.tree.rows()
    assert [r["status"] for r in rows] == ["passed"] * 5, "a proposal has no H200 recording"
    assert all(r["replayed"] for r in rows)
    best = search.tree.best
    assert best.proposal.source == "rewrite:vectorize_float4"
    assert best.measurement.time_ms == pytest.approx(0.50738, abs=1e-4)
    moved = tasks.get("relu").bytes(tasks.get("relu").sizes)
    # 2 GiB in 0.507 ms is 4.23 TB/s: 99.6% of the 4.25 TB/s device-copy ceiling.
    assert moved / (best.measurement.time_ms * 1e-3) > 0.85 * 4.25e12
    assert [rows[i]["source"] for i in range(1, 5)] == [
        "rewrite:vectorize_float4", "rewrite:grid_stride", "rewrite:restrict", "tunable"]


def test_the_reduce_sum_search_replays_and_finds_nothing_faster_in_three_steps():
    search = replayed_search("reduce_sum", budget=3)
    times = [r["time_ms"] for r in search.tree.rows()]
    assert all(t is not None for t in times), "a proposal has no H200 recording"
    assert max(times) / min(times) < 1.01  # the per-block atomics, not the tree, set the time


# -- the suite searches with the screen (bench/results/2026-11-29-h200-search.json) --------

SUITE = Path(__file__).parents[2] / "bench" / "results" / "2026-11-29-h200-search"


def replayed_suite_search(task_name: str, recordings: Path = SUITE) -> Search:
    """Every source the benchmark ran, over that run's recording, for as many evaluations
    as it made: the screen's and the full gate's measurements, each labelled by level."""
    task = tasks.get(task_name)
    evaluator = ReplayEvaluator(recordings / f"rec-{task_name}.json")
    budget = len(evaluator._recorded)
    judge = RuleJudge()
    search = Search(task_name, Candidate.from_source_and_plan(task.naive_source, task.naive_plan),
                    judge=judge, fallback_judge=judge,
                    sources=[TunableSource(), RewriteSource(SUITE_REWRITES)],
                    config=SearchConfig(budget=budget, seed=0),
                    tolerance_allows_fast_math=fast_math_allowed(task))  # as the CLI sets it
    return run_search(search, evaluator, budget=budget)


@pytest.mark.parametrize(("task_name", "best_ms", "step"), [
    ("reduce_sum", 0.2593, "rewrite:grid_stride_accumulate"),
    ("softmax", 0.1206, "rewrite:block_per_row"),
    ("layernorm", 0.1254, "rewrite:block_per_row"),
    ("cross_entropy", 0.8522, "rewrite:block_per_row"),
])
def test_the_suite_searches_replay_to_their_best_kernel_through_the_structural_rewrite(
        task_name, best_ms, step):
    search = replayed_suite_search(task_name)
    rows = search.tree.rows()

    assert all(r["status"] != "error" for r in rows), "a proposal has no H200 recording"
    assert search.evaluations == len(rows)
    best = search.tree.best
    assert best.measurement.time_ms == pytest.approx(best_ms, abs=5e-5)
    assert best.measurement.level == "full" and best.measurement.replayed
    assert step in [n.proposal.source for n in search.tree.path(best.id)]
    # Everything the search kept as best went through the full gate; the rest only
    # through the screen, and said so.
    levels = {n.measurement.level for n in search.tree.nodes.values()}
    assert levels == {"full", "screen"}


def test_reduce_sum_reaches_the_copy_ceiling_target_after_replay():
    best = replayed_suite_search("reduce_sum").tree.best
    moved = tasks.get("reduce_sum").bytes(tasks.get("reduce_sum").sizes)
    assert moved / (best.measurement.time_ms * 1e-3) > 0.85 * 4.25e12


@pytest.mark.parametrize("recording", sorted(p.name for p in SUITE.glob("rec-*.json")))
def test_every_suite_recording_replays_without_a_missing_kernel(recording):
    search = replayed_suite_search(recording.removeprefix("rec-").removesuffix(".json"))

    assert all(n.measurement.status != "error" for n in search.tree.nodes.values())
    assert search.tree.best is not None and search.tree.best.measurement.level == "full"


# -- the softmax search again, through the hardened gate (2026-12-01) ---------------------

HARDENED = Path(__file__).parents[2] / "bench" / "results" / "2026-12-01-h200-hardening" / "rec"


@pytest.mark.parametrize(("task_name", "best_ms"), [
    ("softmax", 0.12256), ("relu", 0.50755), ("layernorm", 0.12709)])
def test_the_search_through_the_hardened_gate_replays_and_its_best_passed_every_guard(task_name, best_ms):
    """bench/results/2026-12-01-h200-hardening/search-<task>-after.json: 8 verified timed
    runs and the four compute-sanitizer tools on every full-gate candidate."""
    search = replayed_suite_search(task_name, HARDENED)

    assert all(n.measurement.status != "error" for n in search.tree.nodes.values())
    best = search.tree.best.measurement
    assert best.level == "full" and best.time_ms == pytest.approx(best_ms, abs=5e-5)
    settings = best.verdict["settings"]
    assert settings["spot_checks"] == 8 and len(settings["sanitize"]) == 4
