"""One contract, every Evaluator: a GPU name for the key, and an honest (verdict, source)
for the candidate asked about."""

from __future__ import annotations

import shutil

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
