"""What a verdict says about how it was measured, and when the gate looks twice."""

import dataclasses

from profiling.harness import tasks
from profiling.harness.gate import SUSPICIOUS_SPEEDUP, GateOptions, _suspiciously_fast
from profiling.harness.verdict import TimingReport, Verdict


def passed_in(ms: float) -> Verdict:
    timing = TimingReport(runs=30, median_ms=ms, mean_ms=ms, stdev_ms=0, min_ms=ms, max_ms=ms,
                          p10_ms=ms, p90_ms=ms, floor_ms=0, floor_reason="", bytes=0, flops=0)
    return Verdict(task="sgemm", candidate_hash="h", status="passed", timing=timing)


def test_a_result_three_times_faster_than_the_vendor_is_measured_again():
    sgemm = tasks.get("sgemm")
    vendor = sgemm.vendor.time_ms
    assert _suspiciously_fast(sgemm, passed_in(vendor / SUSPICIOUS_SPEEDUP * 0.99), GateOptions())
    assert not _suspiciously_fast(sgemm, passed_in(vendor / 2), GateOptions())


def test_reduced_sizes_are_not_compared_with_the_vendor_s_full_size_time():
    sgemm = tasks.get("sgemm")
    small = GateOptions(l1_sizes={"M": 256, "N": 256, "K": 256})
    assert not _suspiciously_fast(sgemm, passed_in(0.001), small)


def test_weaker_settings_are_not_the_standard_gate_but_where_files_go_does_not_matter():
    assert GateOptions().is_standard()
    assert GateOptions(workdir="/tmp/x", input_cache="/tmp/y", seed=4, time_limit_s=60).is_standard()
    for weaker in ({"seeds": 1}, {"timing_runs": 1}, {"profile": False}, {"sanitize": ()},
                   {"spot_checks": 3}, {"levels": ("L1",)}, {"l1_sizes": {"n": 1024}}):
        options = dataclasses.replace(GateOptions(), **weaker)
        assert not options.is_standard(), weaker
        assert options.identity() != GateOptions().identity()


def test_the_gpu_worker_s_environment_holds_no_secret_of_the_web_app(monkeypatch):
    from profiling.harness.gate import child_env

    for name in ("DATABASE_URL", "REDIS_URL", "OPTIML_SECRET_KEY", "OPTIML_LLM_API_KEY",
                 "OPTIML_GATE_SECRET", "AWS_SECRET_ACCESS_KEY", "CUDA_API_TOKEN"):
        monkeypatch.setenv(name, "hunter2-secret")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    env = child_env()
    assert "hunter2-secret" not in env.values()
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and "PYTHONPATH" in env


def test_a_timed_out_verdict_keeps_the_checks_that_passed_before_it():
    from profiling.harness.gate import verdict_from_result
    from profiling.harness.sandbox import IsolatedResult
    from profiling.harness.verdict import CompileReport

    passed = {"type": "check", "level": "L0", "sizes": {"n": 1}, "seed": 1, "distribution": "normal",
              "passed": True, "guard": None, "detail": "", "max_abs_error": 0.0, "max_rel_error": 0.0}
    result = IsolatedResult(messages=[passed, {"type": "stage", "stage": "correctness", "level": "L1"},
                                      {"type": "bound", "limit_s": 2.0, "bound": "one execution"}],
                            timed_out=True, stage_limit={"bound": "one execution of the plan"})
    verdict = verdict_from_result("relu", "h", CompileReport(ok=True), result, 600)
    assert verdict.guard == "timeout" and "one execution of the plan" in verdict.message
    assert [(r.level, r.passed) for r in verdict.correctness] == [("L0", True)]
