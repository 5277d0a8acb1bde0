"""One contract, every Evaluator: a GPU name for the key, and an honest (verdict, source)
for the candidate asked about."""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
from pathlib import Path

import pytest

from profiling.evaluators import (
    NO_GPU,
    EvaluatorError,
    GateEvaluator,
    RecordedEvaluator,
    get_evaluator,
    options_from_dict,
    options_to_dict,
)
from profiling.harness import gate
from profiling.harness.candidate import Candidate
from profiling.harness.verdict import GUARDS, INCOMPLETE, PASSED, REJECTED


def recorded_evaluator(tmp_path, recordings):
    return RecordedEvaluator(recordings)


def gate_evaluator(tmp_path, recordings):
    if shutil.which("nvcc") is None:
        pytest.skip("the gate needs the CUDA compiler")
    return GateEvaluator(workdir=tmp_path / "work")


@pytest.fixture(params=[recorded_evaluator, pytest.param(gate_evaluator, marks=pytest.mark.nvcc)])
def evaluator(request, tmp_path, recorded):
    return request.param(tmp_path, recorded.inner.path)


def test_an_evaluator_names_the_gpu_it_measures_on(evaluator):
    gpu = evaluator.gpu()

    assert isinstance(gpu, str) and gpu
    assert gpu == evaluator.gpu()


def test_an_evaluator_answers_for_the_candidate_it_was_asked_about(evaluator, fast, options):
    verdict, source = evaluator.evaluate("relu", fast.harness(), options)

    assert source in ("gate", "recorded")
    assert verdict.task == "relu"
    assert verdict.candidate_hash == fast.content_hash
    assert verdict.status in (PASSED, REJECTED, INCOMPLETE)
    if verdict.status == REJECTED:
        assert verdict.guard in GUARDS
    if verdict.status == INCOMPLETE:
        assert evaluator.gpu() == NO_GPU


def test_an_evaluator_turns_a_bad_kernel_into_a_verdict_naming_a_guard(evaluator, leaky, options):
    verdict, _ = evaluator.evaluate("relu", leaky.harness(), options)

    if evaluator.gpu() != NO_GPU:
        assert verdict.status == REJECTED
        assert verdict.guard == "wrong_values"


def test_the_gate_evaluator_says_no_gpu_here_as_none():
    expected = gate.gpu_name() or NO_GPU

    assert GateEvaluator().gpu() == expected


def test_the_gate_evaluator_keeps_each_candidates_files_in_its_own_folder(tmp_path, fast, options):
    if shutil.which("nvcc") is None:
        pytest.skip("the gate needs the CUDA compiler")

    GateEvaluator(workdir=tmp_path).evaluate("relu", fast.harness(), options)

    # The gate writes into the folder only when it runs the kernel on a GPU.
    if gate.gpu_name() is not None:
        assert (tmp_path / "relu" / fast.content_hash[:16]).is_dir()


def test_the_gate_evaluator_reports_an_unknown_task_as_permanent(fast, options):
    with pytest.raises(EvaluatorError, match="unknown task 'nope'") as caught:
        GateEvaluator().evaluate("nope", fast.harness(), options)
    assert caught.value.permanent


def test_a_missing_recordings_file_is_a_permanent_evaluator_error(tmp_path):
    with pytest.raises(EvaluatorError, match="cannot read recordings") as caught:
        RecordedEvaluator(tmp_path / "nothing.json")
    assert caught.value.permanent


def test_get_evaluator_follows_the_setting(settings, use_recordings):
    assert isinstance(get_evaluator(), RecordedEvaluator)
    settings.OPTIML_EVALUATOR = "gate"
    assert isinstance(get_evaluator(), GateEvaluator)


def test_gate_options_survive_a_celery_message(options):
    assert options_from_dict(options_to_dict(options)) == options


def test_unknown_gate_options_are_refused():
    with pytest.raises(ValueError, match="unknown gate options: speed"):
        options_from_dict({"speed": 11})


# -- screening (profiling.evaluators.Screening) ------------------------------------------


class StandInScreener:
    """Stands in for profiling.harness.screen.Screener, the only part that needs a GPU:
    it notes what it was asked and answers with a screen-level verdict of no kernel."""

    made: list = []

    def __init__(self, options) -> None:
        self.options, self.calls, self.closed = options, [], False
        StandInScreener.made.append(self)

    def screen(self, task_name, candidate, options):
        self.calls.append((task_name, candidate.content_hash(), options))
        return "screened"

    def close(self) -> None:
        self.closed = True


def test_the_gate_evaluator_screens_nothing_on_a_host_without_a_gpu(fast, options):
    if gate.gpu_name() is not None:
        pytest.skip("this host has a GPU")
    StandInScreener.made = []

    assert GateEvaluator(screener_factory=StandInScreener).screen("relu", fast.harness(), options) is None
    assert StandInScreener.made == []  # no GPU process was started for nothing


def test_the_gate_evaluator_keeps_one_screener_and_gives_it_each_runs_seed_and_inputs(
        monkeypatch, tmp_path, fast, baseline, options):
    monkeypatch.setattr(gate, "gpu_name", lambda: "NVIDIA H200")
    StandInScreener.made = []
    evaluator = GateEvaluator(workdir=tmp_path, screener_factory=StandInScreener)
    first = dataclasses.replace(options, seed=3, input_cache=str(tmp_path / "inputs" / "relu"))
    second = dataclasses.replace(options, seed=4)

    assert evaluator.screen("relu", fast.harness(), first) == "screened"
    assert evaluator.screen("relu", baseline.harness(), second) == "screened"

    [screener] = StandInScreener.made
    assert screener.options.workdir == str(tmp_path / "screen")
    (_, digest, seen_first), (_, _, seen_second) = screener.calls
    assert digest == fast.content_hash
    assert (seen_first.seed, seen_first.input_cache) == (3, str(tmp_path / "inputs" / "relu"))
    assert (seen_second.seed, seen_second.input_cache) == (4, None)
    evaluator.close()
    assert screener.closed


def test_get_evaluator_keeps_one_gate_evaluator_per_process(settings, tmp_path):
    settings.OPTIML_EVALUATOR, settings.OPTIML_WORKDIR = "gate", tmp_path

    assert get_evaluator() is get_evaluator()  # and so its screener lives as long as the worker


SUITE = Path(__file__).resolve().parents[2] / "bench" / "results" / "2026-11-29-h200-search"


def test_recordings_of_the_search_engine_serve_screened_verdicts_only_to_the_screen(options):
    """rec-relu.json: the H200 search's own recordings, full and screened."""
    recorded = json.loads((SUITE / "rec-relu.json").read_text())["recorded"]
    evaluator = RecordedEvaluator(SUITE / "rec-relu.json")
    kernels = _relu_search_kernels()
    screened = next(k for k in kernels.values() if recorded[k.content_hash()]["level"] == "screen")
    full = next(k for k in kernels.values() if recorded[k.content_hash()]["level"] == "full")

    verdict = evaluator.screen("relu", screened, options)
    assert verdict.level == "screen" and verdict.candidate_hash == screened.content_hash()
    assert verdict.timing.median_ms == recorded[screened.content_hash()]["time_ms"]
    assert evaluator.screen("relu", full, options) is None
    assert evaluator.evaluate("relu", full, options)[0].level == "full"
    with pytest.raises(EvaluatorError, match="only the screen's verdict is recorded") as caught:
        evaluator.evaluate("relu", screened, options)
    assert caught.value.permanent


def test_recordings_of_full_verdicts_screen_nothing(recorded, fast, options):
    assert recorded.inner.screen("relu", fast.harness(), options) is None


@functools.cache
def _relu_search_kernels() -> dict[str, Candidate]:
    """The kernels rec-relu.json names by hash, found again by replaying the CLI's search."""
    from bench.search_summary import replay

    nodes = replay(SUITE / "rec-relu.json").tree.nodes.values()
    return {n.candidate_hash: n.proposal.candidate for n in nodes}
