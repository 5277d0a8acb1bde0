"""Comparisons from the GPU that ran (issue 33, part 2): the vendor's and the naive
kernel's times are kept per (GPU, driver, torch, task, sizes), measured on the worker's own
GPU, and never borrowed from another GPU. The measuring is faked here (no GPU needed)."""

from datetime import date

import pytest

from profiling.harness import comparisons, tasks
from profiling.harness.comparisons import (
    MEASURED,
    NOT_MEASURED,
    RECORDED,
    ComparisonCache,
    ComparisonKey,
    comparison_for,
    for_gpu,
    naive_for_bound,
)

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"


class FakeMeasurer:
    """Answers fixed times and counts how often it was asked."""

    def __init__(self, vendor_ms=0.5, naive_ms=0.9):
        self.vendor_ms, self.naive_ms, self.calls = vendor_ms, naive_ms, 0

    def vendor(self, task, sizes):
        self.calls += 1
        return None if self.vendor_ms is None else (self.vendor_ms, f"torch {task.name} at {sizes}")

    def naive(self, task, sizes):
        return self.naive_ms


def key(**changes):
    fields = {"gpu": H100, "driver": "580.159", "torch": "2.11.0", "task": "relu", "sizes": {"n": 1 << 28}}
    return ComparisonKey.of(**{**fields, **changes})


@pytest.fixture
def cache(tmp_path):
    return ComparisonCache(tmp_path / "comparisons.json")


def test_a_miss_is_measured_on_this_gpu_once_and_then_read_from_the_cache(cache):
    relu, measurer = tasks.get("relu"), FakeMeasurer()
    first = comparison_for(relu, key(), cache=cache, measurer=measurer, today=date(2026, 12, 7))
    again = comparison_for(relu, key(), cache=cache, measurer=measurer)
    assert measurer.calls == 1 and again == first
    assert (first.source, first.gpu, first.vendor_ms, first.naive_ms) == (MEASURED, H100, 0.5, 0.9)
    assert first.describe() == f"measured on this GPU ({H100}) on 2026-12-07"


@pytest.mark.parametrize("change", [{"gpu": H200}, {"gpu": "NVIDIA A100-SXM4-80GB"}, {"driver": "575.57"},
                                    {"torch": "2.10.0"}, {"task": "softmax"}, {"sizes": {"n": 1 << 20}}])
def test_a_different_gpu_driver_torch_task_or_sizes_is_a_miss(cache, change):
    relu = tasks.get("relu")
    comparison_for(relu, key(), cache=cache, measurer=FakeMeasurer())
    assert cache.get(key()) is not None
    assert cache.get(key(**change)) is None
    measurer = FakeMeasurer(vendor_ms=0.7)
    assert comparison_for(relu, key(**change), cache=cache, measurer=measurer).vendor_ms == 0.7
    assert measurer.calls == 1


def test_the_cache_survives_a_new_process(cache, tmp_path):
    relu = tasks.get("relu")
    made = comparison_for(relu, key(), cache=cache, measurer=FakeMeasurer())
    assert ComparisonCache(tmp_path / "comparisons.json").get(key()) == made


def test_without_torch_or_a_gpu_a_miss_is_not_measured_and_not_cached(cache):
    found = comparison_for(tasks.get("relu"), key(), cache=cache, measurer=None)
    assert (found.source, found.vendor_ms, found.naive_ms) == (NOT_MEASURED, None, None)
    assert cache.get(key()) is None


def test_a_verdict_on_another_gpu_than_the_recorded_one_shows_no_vendor_time():
    relu = tasks.get("relu")
    assert relu.vendor is not None  # recorded on the H200
    on_h100 = for_gpu(relu, H100)
    assert (on_h100.source, on_h100.vendor_ms, on_h100.naive_ms) == (NOT_MEASURED, None, None)


def test_a_verdict_on_another_gpu_shows_that_gpus_own_measured_vendor_time(cache):
    relu = tasks.get("relu")
    measured = comparison_for(relu, key(gpu=H100), cache=cache, measurer=FakeMeasurer(vendor_ms=0.25))
    shown = for_gpu(relu, H100, measured)
    assert (shown.source, shown.gpu, shown.vendor_ms) == (MEASURED, H100, 0.25)
    # and one GPU's measurement never stands in for another's
    assert for_gpu(relu, "NVIDIA L40S", measured).vendor_ms is None


def test_the_recorded_numbers_count_on_the_gpu_they_were_recorded_on():
    relu = tasks.get("relu")
    shown = for_gpu(relu, H200)
    assert (shown.source, shown.vendor_ms, shown.naive_ms) == (RECORDED, relu.vendor.time_ms, relu.naive_ms)
    assert "recorded on the NVIDIA H200" in shown.describe()


@pytest.mark.parametrize("name, other, same", [("H200", H200, True), (H200, "nvidia h200", True),
                                               (H100, H200, False), ("NVIDIA H200 NVL", H200, False),
                                               ("", "", False)])
def test_gpu_names_match_only_the_same_model(name, other, same):
    assert comparisons.same_gpu(name, other) is same


def test_the_time_bound_scales_this_gpus_naive_time_when_measured(cache):
    relu = tasks.get("relu")
    measured = comparison_for(relu, key(), cache=cache, measurer=FakeMeasurer(naive_ms=2.5))
    scale = naive_for_bound(relu, measured)
    assert (scale.ms, scale.sizes) == (2.5, {"n": 1 << 28}) and f"measured on this GPU ({H100})" in scale.why


def test_without_this_gpus_naive_time_the_bound_falls_back_to_the_recorded_one_and_says_so():
    relu = tasks.get("relu")
    scale = naive_for_bound(relu, comparisons.not_measured(H100))
    assert scale.ms == relu.naive_ms and scale.sizes == relu.sizes
    assert "recorded on the NVIDIA H200, not measured on this GPU" in scale.why


def test_a_comparison_round_trips_through_a_verdicts_json():
    made = comparisons.recorded(tasks.get("softmax"))
    assert comparisons.Comparison.from_dict(made.to_dict()) == made


def timed_verdict(gpu, comparison=None):
    from profiling.harness.verdict import Environment, TimingReport, Verdict

    timing = TimingReport(runs=30, median_ms=0.5, mean_ms=0.5, stdev_ms=0.01, min_ms=0.49, max_ms=0.52,
                          p10_ms=0.49, p90_ms=0.51, floor_ms=0.2, floor_reason="bytes",
                          bytes=2.1e9, flops=0.0)
    return Verdict(task="relu", candidate_hash="ab" * 32, status="passed", timing=timing,
                   environment=Environment(gpu=gpu), comparison=comparison.to_dict() if comparison else {})


def test_a_report_on_another_gpu_than_the_recorded_one_shows_no_vendor_ratio():
    from profiling.harness.report import render, speedups

    relu = tasks.get("relu")
    verdict = timed_verdict(H100)
    assert "vs_vendor" not in speedups(verdict, relu, None)
    text = render(verdict, relu)
    assert "x the vendor reference" not in text and str(relu.vendor.time_ms) not in text
    assert f"no vendor ratio: the vendor reference was not measured on this GPU ({H100})" in text


def test_a_report_on_another_gpu_shows_the_vendor_time_that_gpu_measured(cache):
    from profiling.harness.report import render, speedups

    relu = tasks.get("relu")
    measured = comparison_for(relu, key(gpu=H100), cache=cache, measurer=FakeMeasurer(vendor_ms=0.25),
                              today=date(2026, 12, 7))
    verdict = timed_verdict(H100, measured)
    assert speedups(verdict, relu, None)["vs_vendor"] == pytest.approx(0.25 / 0.5)
    assert (f"0.50x the vendor reference (0.2500 ms, torch relu at {{'n': 268435456}}; measured on this GPU "
            f"({H100}) on 2026-12-07)") in render(verdict, relu)


def test_a_report_on_the_recorded_gpu_shows_the_recorded_vendor_time_and_says_so():
    from profiling.harness.report import render, speedups

    relu = tasks.get("relu")
    verdict = timed_verdict(H200)
    assert speedups(verdict, relu, None)["vs_vendor"] == pytest.approx(relu.vendor.time_ms / 0.5)
    assert "recorded on the NVIDIA H200 (bench/results/2026-11-29-h200-suite.json)" in render(verdict, relu)


def session(task, comparison=None):
    from profiling.harness.worker import Session

    t = tasks.get(task)
    request = {"task": task, "candidate": {"source": t.naive_source, **t.naive_plan},
               "options": {"levels": ["L0", "L1"], "seeds": 1}}
    made = Session(request, channel=None)
    made.comparison = comparison
    return made


def test_a_launch_is_bounded_by_this_gpus_own_naive_time_when_measured(cache):
    from profiling.harness.worker import LAUNCH_NAIVE_FACTOR

    topk = tasks.get("topk")
    measured = comparison_for(topk, key(task="topk", sizes=topk.sizes), cache=cache,
                              measurer=FakeMeasurer(naive_ms=400.0))
    here = session("topk", measured)
    assert here.launch_bound_s(topk.sizes) == pytest.approx(LAUNCH_NAIVE_FACTOR * 400.0 / 1e3)
    half = {k: v // 2 if k == "M" else v for k, v in topk.sizes.items()}
    assert here.launch_bound_s(half) == pytest.approx(LAUNCH_NAIVE_FACTOR * 200.0 / 1e3)
    assert f"the naive kernel's 400 ms, measured on this GPU ({H100})" in here.bound_reason()


def test_a_launch_without_this_gpus_naive_time_is_bounded_by_the_recorded_one_and_says_so():
    from profiling.harness.worker import LAUNCH_NAIVE_FACTOR

    topk = tasks.get("topk")
    here = session("topk", comparisons.not_measured(H100))
    assert here.launch_bound_s(topk.sizes) == pytest.approx(LAUNCH_NAIVE_FACTOR * topk.naive_ms / 1e3)
    assert "ms recorded on the NVIDIA H200, not measured on this GPU" in here.bound_reason()


def test_the_gate_measures_after_the_worker_only_what_its_cache_did_not_hold(cache):
    from profiling.harness.comparisons_gpu import measured_after

    relu = tasks.get("relu")
    missed = {**comparisons.not_measured(H100).to_dict(), "key_fields": key().to_dict()}
    measurer = FakeMeasurer(vendor_ms=0.49)
    made = measured_after(relu, missed, measurer=measurer, cache=cache)
    assert (made["source"], made["gpu"], made["vendor_ms"], made["key_fields"]) == (MEASURED, H100, 0.49,
                                                                                   key().to_dict())
    assert cache.get(key()).vendor_ms == 0.49
    assert measured_after(relu, made, measurer=measurer, cache=cache) == made
    assert measured_after(relu, {}, measurer=measurer, cache=cache) == {}
    assert measurer.calls == 1


def test_a_workers_result_keeps_its_gpus_comparison_in_the_verdict():
    from profiling.harness.gate import verdict_from_result
    from profiling.harness.sandbox import IsolatedResult
    from profiling.harness.verdict import CompileReport

    kept = {**comparisons.not_measured(H100).to_dict(), "key_fields": key().to_dict()}
    result = IsolatedResult(messages=[{"type": "result", "status": "passed", "comparison": kept}])
    verdict = verdict_from_result("relu", "ab" * 32, CompileReport(ok=True), result, 60.0)
    assert verdict.comparison == kept


def test_the_second_gate_looks_at_speed_against_this_gpus_own_vendor_time(cache):
    from profiling.harness.gate import SUSPICIOUS_SPEEDUP, GateOptions, _suspiciously_fast

    relu = tasks.get("relu")
    measured = comparison_for(relu, key(), cache=cache, measurer=FakeMeasurer(vendor_ms=3.0))
    # 0.5 ms: 6x this H100's measured 3 ms, though not 3x the H200's recorded 0.5059 ms
    assert relu.vendor.time_ms < 0.5 * SUSPICIOUS_SPEEDUP
    assert _suspiciously_fast(relu, timed_verdict(H100, measured), GateOptions())
    # with no measurement here, the recorded time is still checked against
    assert not _suspiciously_fast(relu, timed_verdict(H100), GateOptions())


def test_a_measurement_that_fails_leaves_the_verdict_and_says_why_its_comparison_has_none(cache):
    from profiling.harness.comparisons_gpu import measured_after

    class Broken(FakeMeasurer):
        def vendor(self, task, sizes):
            raise RuntimeError("torch child died")

    missed = {**comparisons.not_measured(H100).to_dict(), "key_fields": key().to_dict()}
    kept = measured_after(tasks.get("relu"), missed, measurer=Broken(), cache=cache)
    assert kept["source"] == NOT_MEASURED and kept["vendor_ms"] is None
    assert kept["notes"][-1] == "measuring on this GPU failed: RuntimeError: torch child died"
    assert cache.get(key()) is None  # a later gate tries again
