"""Comparisons from the GPU that ran, on a real GPU (issue 33, part 2): the first gate of a
task on this GPU measures the vendor's and the naive kernel's times here, the next reads
them from the cache, and the verdict shows this GPU's vendor time and where it came from.

    pytest -p no:django -m gpu tests/gpu/test_comparisons_gpu.py
"""

from __future__ import annotations

import pytest

from profiling.harness import comparisons, tasks
from profiling.harness.candidate import Candidate
from profiling.harness.comparisons_gpu import GpuMeasurer
from profiling.harness.gate import GateOptions, evaluate, gpu_name
from profiling.harness.report import compared_with, render

pytestmark = pytest.mark.gpu

SIZES = {"n": 1 << 24}


def naive_relu() -> Candidate:
    task = tasks.get("relu")
    return Candidate.from_source_and_plan(task.naive_source, task.naive_plan)


def test_the_measurer_times_torch_and_the_naive_kernel_on_this_gpu(tmp_path):
    pytest.importorskip("torch")
    relu = tasks.get("relu")
    measurer = GpuMeasurer(workdir=tmp_path, time_limit_s=300)
    vendor = measurer.vendor(relu, SIZES)
    assert vendor is not None and vendor[0] > 0 and "n=16777216" in vendor[1]
    naive_ms = measurer.naive(relu, SIZES)
    assert naive_ms is not None and naive_ms > 0


def test_a_verdict_shows_this_gpus_own_vendor_time_measured_once(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path / "cache"))
    options = GateOptions(profile=False, sanitize=(), l1_sizes=SIZES, timing_runs=10,
                          workdir=str(tmp_path / "w"))

    first = evaluate("relu", naive_relu(), options)
    assert first.passed, first.message
    assert first.comparison["source"] == comparisons.MEASURED and first.comparison["gpu"] == gpu_name()
    assert first.stage_seconds["comparisons"] > 1.0  # measured: torch and a nested gate

    second = evaluate("relu", naive_relu(), options)
    assert second.comparison["source"] == comparisons.MEASURED
    assert second.stage_seconds["comparisons"] < 1.0  # read from the cache by the worker
    shown = compared_with(second, tasks.get("relu"))
    assert shown.vendor_ms == first.comparison["vendor_ms"]
    assert f"measured on this GPU ({gpu_name()})" in render(second, tasks.get("relu"))
    # and the bound of one execution scaled this GPU's naive time
    assert second.comparison["naive_ms"] > 0
