"""The screen on the web path (search.measuring, through services.run_step): the root and
everything until a first full-gate pass get the full gate; after that a candidate is
screened, and only one the screen finds more than 2 % faster than the run's best gets
the full gate (an Evaluation row). A screened verdict is never an Evaluation row.

The full verdicts are real H200 recordings. This host has no GPU, so the screen's GPU
part is stood in for by `StandInScreen`, whose screened verdicts are those same real
verdicts relabelled as the screen's; the last test replays the screened and full
measurements the H200 search itself recorded, through the real RecordedEvaluator."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profiling.evaluators import GateEvaluator, RecordedEvaluator
from profiling.harness import gate
from profiling.harness import tasks as task_registry
from profiling.models import Evaluation
from search import inspector, selectors, services
from search.models import Run, RunEvent, RunNode

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"
# Five relu kernels the H200 measured with the full gate: the naive root (0.8056 ms),
# float4 (0.5074), grid-stride (0.7196), restrict (0.8056), BLOCK 512 (0.8754), asked
# in that order by a rules run with seed 0.
SEARCH_RECORDING = FIXTURES / "h200-relu-search.json"
SUITE = Path(__file__).resolve().parents[2] / "bench" / "results" / "2026-11-29-h200-search"
SCREEN_SECONDS = 0.06  # a screen's median cost on the H200 (docs/search.md, "Measured on the H200")


class StandInScreen:
    """The real recorded full verdicts for `evaluate`; for `screen`, the same verdict as
    the screen would report it (level screen, no profile), since no GPU is here."""

    source = "recorded"

    def __init__(self, *, failing: frozenset[str] = frozenset()) -> None:
        self.full = RecordedEvaluator(SEARCH_RECORDING)
        self.failing = failing
        self.screened: list[str] = []  # candidate hashes, in order
        self.options: list = []
        self.full_options: list = []  # the full gate's, in order

    def gpu(self) -> str:
        return self.full.gpu()

    def evaluate(self, task_name, candidate, options):
        self.full_options.append(options)
        return self.full.evaluate(task_name, candidate, options)

    def screen(self, task_name, candidate, options):
        self.screened.append(candidate.content_hash())
        self.options.append(options)
        if candidate.content_hash() in self.failing:
            raise RuntimeError("the screen's GPU worker died")
        verdict, _ = self.full.evaluate(task_name, candidate, options)
        verdict.level, verdict.stage, verdict.profile = "screen", "screened", None
        verdict.seconds = SCREEN_SECONDS
        return verdict


def new_run(budget: int = 5, **overrides) -> Run:
    relu = task_registry.get("relu")
    return services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan,
                               budget=budget, **overrides)


def nodes_of(run: Run) -> list[RunNode]:
    return list(RunNode.objects.filter(run=run).select_related("candidate", "evaluation").order_by("node_id"))


def has_evaluation_row(node: RunNode) -> bool:
    return Evaluation.objects.filter(candidate=node.candidate).exists()


def test_only_candidates_the_screen_finds_faster_than_the_best_get_the_full_gate():
    evaluator = StandInScreen()
    run = services.run_drive(run_id=new_run(budget=5).pk, evaluator=evaluator)

    root, float4, grid_stride, restrict, block512 = nodes_of(run)
    assert (root.level, root.evaluation.source) == ("full", Evaluation.Source.RECORDED)
    assert root.candidate.content_hash not in evaluator.screened  # nothing to beat yet
    # 0.507 ms < 0.98 x 0.806 ms: promoted, and the full gate's verdict is what counts.
    assert float4.level == "full" and float4.evaluation is not None
    assert float4.detail["measurement"]["screen"] == {"time_ms": pytest.approx(0.50738, abs=1e-4),
                                                      "seconds": SCREEN_SECONDS}
    assert (run.best_node, run.best_ms) == (float4.node_id, pytest.approx(0.50738, abs=1e-4))
    # Slower than 0.98 x 0.507 ms: screened only, no Evaluation row for anyone to reuse.
    for node in (grid_stride, restrict, block512):
        assert (node.level, node.status, node.evaluation) == ("screen", "passed", None)
        assert not has_evaluation_row(node)
    assert evaluator.screened == [n.candidate.content_hash for n in (float4, grid_stride, restrict, block512)]
    full_seconds = sum(n.evaluation.verdict["seconds"] for n in (root, float4))
    assert run.gpu_seconds == pytest.approx(full_seconds + 4 * SCREEN_SECONDS)
    evaluated = [e.data for e in RunEvent.objects.filter(run=run, kind="node_evaluated")]
    assert [e["level"] for e in evaluated] == ["full", "full", "screen", "screen", "screen"]


def test_a_screened_run_fixes_its_secret_gate_seed_and_keeps_its_inputs_in_its_own_folder(settings, tmp_path):
    from search.measuring import run_gate_seed

    settings.OPTIML_WORKDIR = tmp_path
    evaluator = StandInScreen()
    run = services.run_drive(run_id=new_run(budget=3, seed=7).pk, evaluator=evaluator)

    # The run's own gate seed (from the server's secret), not the user's search seed 7,
    # and one input folder for the screen and every full gate, the root's first.
    assert {(o.seed, o.input_cache) for o in evaluator.options + evaluator.full_options} == \
        {(run_gate_seed(run=run), str(tmp_path / "inputs" / "relu" / f"run-{run.pk}"))}
    assert evaluator.full_options and evaluator.full_options[0].input_cache


def test_the_inspector_shows_a_screened_node_as_screened_with_its_checks_and_time():
    run = services.run_drive(run_id=new_run(budget=3).pk, evaluator=StandInScreen())
    node = nodes_of(run)[2]

    detail = inspector.node_detail(run=run, node=node, url="/api/runs/1/nodes/2/")

    assert (detail["level"], detail["level_label"]) == ("screen", "screened (not profiled)")
    assert detail["correctness"] and all(check["passed"] for check in detail["correctness"])
    assert detail["timing"]["median_ms"] == pytest.approx(node.time_ms)
    assert detail["profile"] is None and detail["ncu_report_url"] is None
    assert [row["level"] for row in map(inspector.node_row, selectors.run_nodes(run=run))] == \
        ["full", "full", "screen"]


def test_a_screen_that_fails_is_a_state_of_the_node_and_the_run_goes_on():
    grid_stride = "403fd7c80840"
    failing = frozenset(h for h in _recorded_hashes() if h.startswith(grid_stride))
    run = services.run_drive(run_id=new_run(budget=5).pk, evaluator=StandInScreen(failing=failing))

    node = next(n for n in nodes_of(run) if n.candidate.content_hash in failing)
    assert (node.level, node.status, node.evaluation) == ("screen", "error", None)
    message = node.detail["measurement"]["message"]
    assert "the screen failed: RuntimeError: the screen's GPU worker died" in message
    assert not has_evaluation_row(node)
    assert run.status == Run.Status.FINISHED and run.evaluated == 5


@pytest.mark.parametrize("turned_off", ["setting", "run"])
def test_screening_turned_off_gives_every_candidate_the_full_gate(settings, turned_off):
    settings.OPTIML_SCREEN = turned_off != "setting"
    evaluator = StandInScreen()
    run = services.run_drive(run_id=new_run(budget=5, screen=turned_off != "run").pk, evaluator=evaluator)

    assert evaluator.screened == []
    assert all(n.level == "full" and n.evaluation is not None for n in nodes_of(run))


def test_a_kernel_with_a_stored_full_verdict_is_not_screened_again():
    services.run_drive(run_id=new_run(budget=5, screen=False).pk, evaluator=StandInScreen())
    evaluator = StandInScreen()

    run = services.run_drive(run_id=new_run(budget=5).pk, evaluator=evaluator)

    assert evaluator.screened == []  # each kernel's full verdict was there, free
    assert all(n.level == "full" for n in nodes_of(run)) and Evaluation.objects.count() == 5


@pytest.mark.skipif(shutil.which("nvcc") is None or gate.gpu_name() is not None,
                    reason="needs nvcc and a host without a GPU")
def test_a_host_without_a_gpu_skips_the_screen_and_its_full_gate_says_incomplete(tmp_path):
    def no_screener(options):
        raise AssertionError("a host without a GPU must not start a screen")

    run = new_run(budget=2)
    services.run_step(run_id=run.pk, evaluator=StandInScreen())  # the root, from the H200: a best
    no_gpu_here = GateEvaluator(workdir=tmp_path, screener_factory=no_screener)
    run = services.run_step(run_id=run.pk, evaluator=no_gpu_here)

    child = nodes_of(run)[1]
    assert child.level == "full" and child.status == "error"
    assert child.evaluation.status == Evaluation.Status.INCOMPLETE and child.evaluation.gpu == "none"


def test_the_h200_searchs_own_screened_and_full_measurements_replay_through_the_web_path():
    """rec-reduce_sum.json, written by the CLI's search on the H200 with the screen on:
    the web path makes the same promotions (a screened kernel it promoted would have no
    full recording, and be an error), keeps the same best, and stores full rows only."""
    recording = SUITE / "rec-reduce_sum.json"
    recorded = json.loads(recording.read_text())["recorded"]
    reduce_sum = task_registry.get("reduce_sum")
    run = services.run_create(task_name="reduce_sum", source=reduce_sum.naive_source,
                              plan=reduce_sum.naive_plan, budget=len(recorded))

    run = services.run_drive(run_id=run.pk, evaluator=RecordedEvaluator(recording))

    nodes = nodes_of(run)
    assert run.status == Run.Status.FINISHED and run.evaluated == len(recorded) == len(nodes)
    assert all(n.status != "error" for n in nodes)
    assert all(n.level == recorded[n.candidate.content_hash]["level"] for n in nodes)
    assert {n.candidate.content_hash for n in nodes if n.evaluation is not None} == \
        {h for h, m in recorded.items() if m["level"] == "full"} == \
        set(Evaluation.objects.values_list("candidate__content_hash", flat=True))
    assert any(n.level == "screen" and n.status == "rejected" for n in nodes)  # a screened rejection
    assert run.best_ms == pytest.approx(0.2593, abs=5e-5)  # docs/search.md, "Measured on the H200"
    assert next(n for n in nodes if n.node_id == run.best_node).level == "full"
    # Promoted kernels carry no screen look here: the recording kept only their full verdict.
    assert run.gpu_seconds == pytest.approx(sum(m["verdict"]["seconds"] for m in recorded.values()))


def _recorded_hashes() -> list[str]:
    return [item["candidate_hash"] for item in json.loads(SEARCH_RECORDING.read_text())["recorded"]]
