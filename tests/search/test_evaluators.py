"""Evaluators: the gate in-process (compiles ahead, evaluates one at a time), replays of
recorded measurements (labelled, and never inventing one), and the recorder."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from engine_fakes import ROOT, variant, write_recordings

from profiling.harness.gate import GateOptions
from profiling.harness.verdict import TimingReport, Verdict
from search.engine.evaluators import (
    NO_RECORDING,
    GateEvaluator,
    RecordingEvaluator,
    ReplayEvaluator,
    load_recordings,
    measurement_from_verdict,
)
from search.engine.types import Measurement

REAL = Path(__file__).parents[1] / "fixtures" / "recorded" / "h200-relu-naive.json"


def real_verdict() -> dict:
    """The naive relu kernel's verdict, measured on the H200 (a real recording)."""
    return json.loads(REAL.read_text())["recorded"][0]["verdict"]


def test_a_real_h200_verdict_reduces_to_its_time_spread_profile_and_resources():
    verdict = real_verdict()

    m = measurement_from_verdict(verdict, replayed=True)

    assert m.status == "passed" and m.passed and m.replayed
    assert m.time_ms == verdict["timing"]["median_ms"]
    assert m.spread_ms == pytest.approx((verdict["timing"]["p90_ms"] - verdict["timing"]["p10_ms"]) / 2)
    assert m.bottleneck == "latency" and m.metrics["sol_dram_pct"] == pytest.approx(55.215747)
    assert m.registers == 10 and m.spill_bytes == 0 and m.gpu == "NVIDIA H200"
    assert m.verdict == verdict


def test_a_verdict_object_and_its_dict_give_the_same_measurement():
    verdict = Verdict.from_dict(real_verdict())

    assert measurement_from_verdict(verdict, replayed=False) == \
        measurement_from_verdict(verdict.to_dict(), replayed=False)


@pytest.mark.parametrize(("status", "expected"), [("incomplete", "error"), ("error", "error"),
                                                  ("rejected", "rejected")])
def test_only_a_judgement_of_the_kernel_is_passed_or_rejected(status, expected):
    verdict = {**real_verdict(), "status": status, "guard": "wrong_values" if status == "rejected" else None,
               "timing": None, "profile": None, "message": "why"}

    m = measurement_from_verdict(verdict, replayed=False)

    assert m.status == expected and m.time_ms is None and m.metrics == {} and m.message == "why"


def test_spills_add_up_over_kernels_and_registers_take_the_most():
    verdict = real_verdict()
    kernel = verdict["compile"]["kernels"][0]
    verdict["compile"]["kernels"] = [
        {**kernel, "registers": 40, "spill_store_bytes": 8, "spill_load_bytes": 8},
        {**kernel, "kernel": "second", "registers": 72, "spill_store_bytes": 16, "spill_load_bytes": 0}]

    m = measurement_from_verdict(verdict, replayed=False)

    assert (m.registers, m.spill_bytes) == (72, 32)


def test_replay_serves_recorded_measurements_labelled_as_replayed(tmp_path):
    evaluator = ReplayEvaluator(write_recordings(tmp_path / "r.json"))
    candidate = variant(ROOT, VEC=2)

    evaluator.submit("relu", candidate)
    [(digest, m)] = evaluator.collect(timeout_s=0)

    assert digest == candidate.content_hash()
    assert m.passed and m.replayed and m.time_ms > 0
    assert evaluator.collect(timeout_s=0) == []


def test_replay_answers_an_unknown_kernel_with_an_error_not_a_number(tmp_path):
    evaluator = ReplayEvaluator(write_recordings(tmp_path / "r.json"))
    never_recorded = variant(ROOT, BLOCK=1024, UNROLL=4, VEC=4)

    evaluator.submit("relu", never_recorded)
    [(_, m)] = evaluator.collect(timeout_s=0)

    assert m.status == "error" and m.message == NO_RECORDING
    assert m.time_ms is None and m.metrics == {} and m.replayed


def test_replay_does_not_serve_another_tasks_recordings(tmp_path):
    evaluator = ReplayEvaluator(write_recordings(tmp_path / "r.json"))

    evaluator.submit("softmax", ROOT)
    [(_, m)] = evaluator.collect(timeout_s=0)

    assert m.status == "error" and "records task 'relu'" in m.message


@pytest.mark.parametrize("content", ["not json", "[]", '{"gpu": "x", "task": "relu"}',
                                     '{"gpu": "x", "task": "relu", "recorded": {"h": {"speed": 1}}}'])
def test_malformed_recordings_are_refused_with_a_reason(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)

    with pytest.raises(ValueError, match="recordings|recorded"):
        load_recordings(path)


class ScriptedEvaluator:
    """Returns a fixed measurement per submitted kernel."""

    def __init__(self, measurements: list[Measurement]) -> None:
        self.measurements, self.ready = list(measurements), []

    def submit(self, task, candidate):
        self.ready.append((candidate.content_hash(), self.measurements.pop(0)))

    def collect(self, timeout_s):
        ready, self.ready = self.ready, []
        return ready


def test_recording_writes_what_was_measured_and_replay_serves_it_back(tmp_path):
    path = tmp_path / "rec.json"
    measured = Measurement(status="passed", time_ms=0.5, spread_ms=0.001, gpu="NVIDIA H200",
                           metrics={"dram_bytes": 2e9}, bottleneck="memory", registers=16)
    failed_host = Measurement(status="error", message="CUDA driver went away", gpu="NVIDIA H200")
    recorder = RecordingEvaluator(ScriptedEvaluator([measured, failed_host]), path)

    recorder.submit("relu", ROOT)
    recorder.submit("relu", variant(ROOT, VEC=2))
    results = recorder.collect(timeout_s=0)

    assert [m for _, m in results] == [measured, failed_host]
    data = load_recordings(path)
    assert (data["gpu"], data["task"]) == ("NVIDIA H200", "relu")
    assert list(data["recorded"]) == [ROOT.content_hash()]  # a host error is not a recording
    replay = ReplayEvaluator(path)
    replay.submit("relu", ROOT)
    [(_, replayed)] = replay.collect(0)
    assert replayed.replayed and {**replayed.to_dict(), "replayed": False} == measured.to_dict()


def test_recording_adds_to_an_existing_file_of_the_same_gpu_and_task(tmp_path):
    path = tmp_path / "rec.json"
    first = Measurement(status="passed", time_ms=0.5, gpu="NVIDIA H200")
    second = Measurement(status="rejected", guard="wrong_values", gpu="NVIDIA H200")
    for candidate, m in ((ROOT, first), (variant(ROOT, VEC=2), second)):
        recorder = RecordingEvaluator(ScriptedEvaluator([m]), path)
        recorder.submit("relu", candidate)
        recorder.collect(0)

    assert len(load_recordings(path)["recorded"]) == 2
    with pytest.raises(ValueError, match="records task 'relu'"):
        RecordingEvaluator(ScriptedEvaluator([first]), path).submit("softmax", ROOT)


def test_recording_refuses_to_mix_gpus_in_one_file(tmp_path):
    path = tmp_path / "rec.json"
    recorder = RecordingEvaluator(ScriptedEvaluator([Measurement(status="passed", time_ms=1, gpu="A"),
                                                     Measurement(status="passed", time_ms=1, gpu="B")]),
                                  path)
    recorder.submit("relu", ROOT)
    recorder.collect(0)
    recorder.submit("relu", variant(ROOT, VEC=2))

    with pytest.raises(ValueError, match="records A"):
        recorder.collect(0)


class FakeGate:
    """Stands in for nvcc and the GPU: records when compiles and evaluations happen. The
    first evaluation holds the "GPU" until `release` is set."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.compiled: list[str] = []
        self.evaluated: list[str] = []
        self.running = 0
        self.most_at_once = 0
        self.options: list[GateOptions] = []

    def compile(self, candidate):
        with self.lock:
            self.compiled.append(candidate.content_hash())

    def evaluate(self, task, candidate, options):
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.options.append(options)
        self.release.wait(timeout=10)
        time.sleep(0.005)  # long enough for an overlapping evaluation to show
        with self.lock:
            self.running -= 1
            self.evaluated.append(candidate.content_hash())
        if candidate.tunables.get("VEC") == 4:
            raise RuntimeError("pycuda could not create a context")
        timing = TimingReport(runs=30, median_ms=0.5, mean_ms=0.5, stdev_ms=0.0, min_ms=0.49, max_ms=0.51,
                              p10_ms=0.49, p90_ms=0.51, floor_ms=0.4, floor_reason="", bytes=1.0, flops=1.0)
        return Verdict(task=task, candidate_hash=candidate.content_hash(), status="passed", timing=timing)


def wait_for(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.001)
    return condition()


def collect_all(evaluator, count: int) -> list[tuple[str, Measurement]]:
    results = []
    deadline = time.monotonic() + 10
    while len(results) < count and time.monotonic() < deadline:
        results += evaluator.collect(timeout_s=0.5)
    return results


def test_the_gate_evaluator_compiles_ahead_and_evaluates_one_kernel_at_a_time(tmp_path):
    fake = FakeGate()
    candidates = [variant(ROOT, BLOCK=b) for b in (64, 128, 256, 512, 1024)]

    with GateEvaluator(GateOptions(workdir=str(tmp_path)), evaluate=fake.evaluate,
                       compile=fake.compile) as evaluator:
        for candidate in candidates:
            evaluator.submit("relu", candidate)
        # every kernel compiles while the first one still holds the GPU
        assert wait_for(lambda: len(fake.compiled) == len(candidates))
        assert fake.evaluated == [] and fake.running == 1
        fake.release.set()
        results = collect_all(evaluator, len(candidates))

    assert [digest for digest, _ in results] == [c.content_hash() for c in candidates]
    assert all(m.passed and m.time_ms == 0.5 and not m.replayed for _, m in results)
    assert fake.most_at_once == 1
    assert fake.options[0].workdir == str(tmp_path / "relu" / candidates[0].content_hash()[:16])


def test_a_gate_that_raises_becomes_an_error_measurement(tmp_path):
    fake = FakeGate()
    fake.release.set()

    with GateEvaluator(GateOptions(), evaluate=fake.evaluate, compile=fake.compile) as evaluator:
        evaluator.submit("relu", variant(ROOT, VEC=4))
        [(_, m)] = collect_all(evaluator, 1)

    assert m.status == "error" and "pycuda could not create a context" in m.message


def test_collect_returns_nothing_when_no_result_arrives_in_time():
    fake = FakeGate()

    with GateEvaluator(GateOptions(), evaluate=fake.evaluate, compile=fake.compile) as evaluator:
        assert evaluator.collect(timeout_s=0.01) == []
