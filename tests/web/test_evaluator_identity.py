"""Issue 35: a verdict is stored under the evaluator that gave it (Evaluator.identity()),
an evaluator's own failure ("no recorded verdict", no nvcc) is never the kernel's verdict
for another evaluator, and a compile error is a compile verdict under every evaluator:
the recorded one compiles a kernel it has no recording of (nvcc, no GPU)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profiling import services
from profiling.evaluators import EvaluatorError, GateEvaluator, RecordedEvaluator, evaluator_identity
from profiling.harness import gate
from profiling.harness.candidate import Candidate as HarnessCandidate
from profiling.harness.compile import CompilerUnavailable
from profiling.models import Evaluation
from tests.web.conftest import migrate

SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "schema-h200.json"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling needs nvcc")


@pytest.fixture
def recording_without(tmp_path):
    """recording_without(kernel) -> a recording of the same GPU that lacks that kernel (the
    "wrong recording" of the issue)."""

    def write(kernel) -> Path:
        data = json.loads(SCHEMA.read_text())
        data["recorded"] = [item for item in data["recorded"]
                            if item["candidate_hash"] != kernel.content_hash]
        path = tmp_path / "wrong-h200.json"
        path.write_text(json.dumps(data))
        return path

    return write


def test_a_recording_is_known_by_its_content_and_the_gate_by_its_name(tmp_path):
    copy = tmp_path / "copy.json"
    copy.write_text(SCHEMA.read_text())
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**json.loads(SCHEMA.read_text()), "recorded": []}))

    same, moved, other = (RecordedEvaluator(p).identity() for p in (SCHEMA, copy, edited))

    assert same == moved and same != other and same.startswith("recorded:")
    assert evaluator_identity(GateEvaluator()) == "gate"


@needs_nvcc
@pytest.mark.django_db
def test_a_kernel_failed_under_one_recording_gets_the_verdict_of_the_right_one(
        relu_task, store, fast, options, recording_without):
    candidate = store(fast)

    wrong = services.evaluation_run(task_name="relu", candidate=candidate, options=options,
                                    evaluator=RecordedEvaluator(recording_without(fast)))
    right = services.evaluation_run(task_name="relu", candidate=candidate, options=options,
                                    evaluator=RecordedEvaluator(SCHEMA))

    assert wrong.status == Evaluation.Status.FAILED and "no recorded verdict" in wrong.message
    assert wrong.verdict is None  # the evaluator's failure, not a verdict of the kernel
    assert right.pk != wrong.pk
    assert right.status == Evaluation.Status.PASSED and right.source == Evaluation.Source.RECORDED
    assert right.median_ms == pytest.approx(0.5121)
    assert right.evaluator == RecordedEvaluator(SCHEMA).identity()


@needs_nvcc
@pytest.mark.django_db
def test_a_kernel_with_a_syntax_error_gets_a_compile_verdict_naming_its_line_under_a_recording(
        relu_task, store, fast, options):
    assert fast.source.splitlines()[4].strip() == "y[i] = fmaxf(x[i], 0.0f);"
    source = fast.source.replace("fmaxf(x[i], 0.0f);", "fmaxf(x[i], 0.0f) +;")  # line 5
    broken = services.candidate_get_or_create(source=source, plan=fast.plan)

    evaluation = services.evaluation_run(task_name="relu", candidate=broken, options=options,
                                         evaluator=RecordedEvaluator(SCHEMA))

    assert evaluation.status == Evaluation.Status.REJECTED, evaluation.message
    assert (evaluation.guard, evaluation.stage) == ("compile", "compile")
    assert evaluation.message.startswith("line 5: ")
    assert evaluation.source == Evaluation.Source.GATE  # compiled here, not replayed
    assert evaluation.verdict["compile"]["errors"][0]["line"] == 5


def test_without_nvcc_an_unrecorded_kernel_is_the_evaluators_failure_and_may_be_tried_again(
        fast, options, monkeypatch):
    def no_nvcc(candidate, cache_dir=None):
        raise CompilerUnavailable("nvcc is not installed on this host, so nothing can be compiled")

    monkeypatch.setattr(gate, "compile_candidate", no_nvcc)
    unrecorded = HarnessCandidate.from_source_and_plan(fast.source + "\n// another\n", fast.plan)

    with pytest.raises(EvaluatorError) as raised:
        RecordedEvaluator(SCHEMA).evaluate("relu", unrecorded, options)

    assert "no recorded verdict" in str(raised.value) and "nvcc is not installed" in str(raised.value)
    assert raised.value.permanent is False


BEFORE = [("profiling", "0004_evaluation_lease")]
AFTER = [("profiling", "0005_evaluation_evaluator")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_keys_the_gates_rows_gate_and_every_other_row_legacy(back_to_latest):
    apps = migrate(BEFORE)
    Task, Kernel, Old = (apps.get_model("profiling", name) for name in ("Task", "Candidate", "Evaluation"))
    task = Task.objects.create(name="relu")
    rows = {}
    for index, (status, source) in enumerate((("passed", "gate"), ("passed", "recorded"), ("failed", ""))):
        kernel = Kernel.objects.create(content_hash=f"{index:064d}", source="//", plan={})
        rows[source] = Old.objects.create(candidate=kernel, task=task, harness_version="v", gpu="NVIDIA H200",
                                          settings_key="k", status=status, source=source,
                                          claimed_at="2026-12-01T00:00:00Z").pk

    New = migrate(AFTER).get_model("profiling", "Evaluation")

    # A failure stored under some recording (no source: its evaluator unknown) serves nobody.
    assert {source: New.objects.get(pk=pk).evaluator for source, pk in rows.items()} == {
        "gate": "gate", "recorded": "legacy", "": "legacy"}
