"""The whole Django path over a verdict really measured on the H200 (not hand-written):
the naive relu, recorded by the harness's own command line and replayed unchanged."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from profiling.harness import tasks as task_registry
from profiling.models import Evaluation

pytestmark = pytest.mark.django_db

RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "h200-relu-naive.json"


def test_the_evaluate_command_stores_and_prints_a_real_h200_verdict(settings, tmp_path):
    settings.OPTIML_EVALUATOR = f"recorded:{RECORDING}"
    kernel = tmp_path / "relu.cu"
    kernel.write_text(task_registry.get("relu").naive_source)
    recorded = json.loads(RECORDING.read_text())["recorded"][0]["verdict"]

    out = StringIO()
    call_command("evaluate", "--task", "relu", str(kernel), "--no-naive", stdout=out)

    evaluation = Evaluation.objects.get()
    assert evaluation.source == Evaluation.Source.RECORDED
    assert evaluation.status == Evaluation.Status.PASSED
    assert evaluation.gpu == "NVIDIA H200"
    assert evaluation.median_ms == pytest.approx(recorded["timing"]["median_ms"])
    assert len(evaluation.verdict["correctness"]) == 25  # 4 L0 sizes and L1, 5 seeds each
    text = out.getvalue()
    assert "Verdict: PASSED" in text and "NVIDIA H200" in text
    assert f"{recorded['timing']['median_ms']:.4f} ms" in text
    assert "latency-bound" in text  # the bottleneck ncu's counters pointed to
    assert "recorded earlier on a real GPU and replayed" in text
