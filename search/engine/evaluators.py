"""Evaluators for the search: the real gate in this process, and replays of recorded runs.

Each implements types.Evaluator: `submit(task, candidate)` may return at once, and
`collect(timeout_s)` returns the (candidate hash, Measurement) pairs finished since. A
kernel that fails, or a host that cannot measure it, is a Measurement that says so.

Recordings, written by RecordingEvaluator on a GPU host and served by ReplayEvaluator:

    {"gpu": "NVIDIA H200", "task": "relu",
     "recorded": {"<candidate hash>": {...Measurement.to_dict()...}}}

A replayed measurement is labelled `replayed=True`; a kernel that was never recorded is
an "error" measurement, never a made-up number (kernel_tuner's simulation runner replays
recorded results the same way).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from profiling.harness import gate
from profiling.harness.candidate import Candidate
from profiling.harness.compile import compile_candidate
from profiling.harness.gate import GateOptions
from profiling.harness.jsonfile import write_json_atomically
from profiling.harness.screen import Screener, ScreenOptions
from profiling.harness.verdict import Verdict

from .types import Evaluator, Measurement

NO_RECORDING = "no recording for this candidate"
# A screened time must beat the best full-gate time by this fraction to earn the full
# gate: the margin the H200 suite searches ran with (bench/results/
# 2026-11-29-h200-search.json, "method"). Used by the CLI and the web path alike.
PROMOTE_MARGIN = 0.02
_MEASUREMENT_FIELDS = {f.name for f in dataclasses.fields(Measurement)}


def promoted(screened: Measurement, best_full_ms: float, *, margin: float = PROMOTE_MARGIN) -> bool:
    """Whether what the screen saw earns the full gate: passed, timed, and more than
    `margin` faster than the best time the full gate has passed for the task."""
    return screened.passed and screened.time_ms is not None and \
        screened.time_ms < best_full_ms * (1.0 - margin)


def screened_faster_note(screened_ms: float | None, best_full_ms: float | None, *,
                         margin: float = PROMOTE_MARGIN) -> str | None:
    """Why a node only the screen measured shows a time below the run's best (always a
    full-gate time), in words; None when it does not. It was not promoted: its screened
    time was not more than `margin` faster than the best full-gate time when it was
    screened, and the best only falls, so it is within that margin of today's best too."""
    if screened_ms is None or not best_full_ms or screened_ms >= best_full_ms:
        return None
    faster = (best_full_ms - screened_ms) / best_full_ms
    return (f"Screened only: {_percent(faster)} faster than the best full-gate time "
            f"({best_full_ms:.4g} ms), not the more than {_percent(margin)} it takes to be given the "
            "full gate, so it was not. The screen times fewer seeds and runs than the full gate, and "
            "a gap this small is within what that may miss; the run's best is always a full-gate time.")


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.2g}%" if fraction < 0.1 else f"{fraction * 100:.0f}%"


def measurement_from_verdict(verdict: Verdict | dict[str, Any], *, replayed: bool) -> Measurement:
    """Reduce the gate's Verdict to what the search needs, keeping the full verdict.

    "incomplete" (no GPU here) and "error" (the harness failed) both become "error": neither
    says anything about the kernel. Registers are the most any kernel of the plan uses;
    spill bytes add up the stores and loads of every kernel (ptxas -v).
    """
    data = verdict.to_dict() if isinstance(verdict, Verdict) else copy.deepcopy(verdict)
    status = data["status"] if data["status"] in ("passed", "rejected") else "error"
    timing = data.get("timing") or {}
    profile = data.get("profile") or {}
    kernels = (data.get("compile") or {}).get("kernels") or []
    spread = None
    if timing.get("p90_ms") is not None and timing.get("p10_ms") is not None:
        spread = (timing["p90_ms"] - timing["p10_ms"]) / 2  # as TimingReport.spread_ms
    return Measurement(
        status=status, guard=data.get("guard"), message=data.get("message", ""),
        time_ms=timing.get("median_ms"), spread_ms=spread,
        metrics=dict(profile.get("metrics") or {}), bottleneck=profile.get("bottleneck"),
        registers=max((k["registers"] for k in kernels), default=None),
        spill_bytes=sum(k["spill_store_bytes"] + k["spill_load_bytes"] for k in kernels),
        replayed=replayed, gpu=(data.get("environment") or {}).get("gpu", ""), verdict=data,
        level=data.get("level", "full"),
    )


class GateEvaluator:
    """The gate, in this process, on this host's GPU.

    Compiles run ahead in a thread pool (nvcc is CPU work, and the gate's own compile
    then hits the content-hash cache); evaluations run one at a time on one thread,
    because candidates share the GPU and their timings must not overlap. `evaluate` and
    `compile` default to profiling.harness.gate.evaluate and compile.compile_candidate.
    """

    def __init__(self, options: GateOptions | None = None, *, compile_workers: int = 4,
                 evaluate: Callable[[str, Candidate, GateOptions], Verdict] | None = None,
                 compile: Callable[[Candidate], Any] | None = None) -> None:
        self.options = options or GateOptions()
        self._evaluate = evaluate or gate.evaluate
        self._compile = compile or compile_candidate
        self._compiles = ThreadPoolExecutor(compile_workers, thread_name_prefix="optiml-compile")
        self._queue: queue.Queue[tuple[str, Candidate, Future] | None] = queue.Queue()
        self._results: queue.Queue[tuple[str, Measurement]] = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="optiml-gate", daemon=True)
        self._worker.start()

    def submit(self, task: str, candidate: Candidate) -> None:
        self._queue.put((task, candidate, self._compiles.submit(self._compile, candidate)))

    def collect(self, timeout_s: float) -> list[tuple[str, Measurement]]:
        """Wait up to timeout_s for one result, then take every other one that is ready."""
        try:
            results = [self._results.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        while True:
            try:
                results.append(self._results.get_nowait())
            except queue.Empty:
                return results

    def close(self) -> None:
        self._queue.put(None)
        self._worker.join()
        self._compiles.shutdown(wait=True)

    def __enter__(self) -> GateEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            task, candidate, compiled = item
            # Only warms the cache: the gate compiles again and turns any failure
            # (policy, nvcc error, no compiler) into the verdict, so nothing is lost here.
            _ = compiled.exception()
            self._results.put(self._measure(task, candidate))

    def _measure(self, task: str, candidate: Candidate) -> tuple[str, Measurement]:
        digest = candidate.content_hash()
        options = self.options
        if options.workdir:  # one folder per candidate keeps its .ncu-rep and logs apart
            options = dataclasses.replace(options, workdir=str(Path(options.workdir) / task / digest[:16]))
        try:
            verdict = self._evaluate(task, candidate, options)
        except Exception as error:  # our bug or the host's, recorded as a state, not a crash
            return digest, Measurement(status="error", message=f"the gate failed: "
                                       f"{type(error).__name__}: {error}")
        return digest, measurement_from_verdict(verdict, replayed=False)


class ScreeningEvaluator(GateEvaluator):
    """Screen every candidate; give the full gate those that beat the best it has passed.

    The first candidate (the root) goes straight to the full gate, as does every one
    until some candidate passes it. After that each candidate is screened in one
    long-lived GPU process (profiling/harness/screen.py); one that the screen rejects, or
    that is not at least `promote_margin` faster than the best full-gate time, is
    reported as the screen saw it (level "screen"); one that is gets the full gate in a
    fresh process, whose verdict is what the search records (level "full", with the
    screen's look in `screen`). So the search's best is always a full-gate verdict.
    """

    def __init__(self, options: GateOptions | None = None, screen_options: ScreenOptions | None = None,
                 *, promote_margin: float = PROMOTE_MARGIN, screener: Any = None, **kwargs: Any) -> None:
        gate_options = options or GateOptions()
        self.screener = screener or Screener(screen_options or ScreenOptions(
            seed=gate_options.seed, input_cache=gate_options.input_cache,
            l1_sizes=gate_options.l1_sizes, workdir=gate_options.workdir,
            gpu_inputs=gate_options.gpu_inputs))
        self.promote_margin = promote_margin
        self.best_full_ms: dict[str, float] = {}  # task -> best time the full gate passed
        super().__init__(options, **kwargs)

    def close(self) -> None:
        super().close()
        self.screener.close()

    def _measure(self, task: str, candidate: Candidate) -> tuple[str, Measurement]:
        digest = candidate.content_hash()
        best = self.best_full_ms.get(task)
        if best is None:
            return self._full(task, candidate, None)
        try:
            screened = measurement_from_verdict(self.screener.screen(task, candidate), replayed=False)
        except Exception as error:  # as in GateEvaluator._measure: a state, not a crash
            return digest, Measurement(status="error", level="screen",
                                       message=f"the screen failed: {type(error).__name__}: {error}")
        if not promoted(screened, best, margin=self.promote_margin):
            return digest, screened
        return self._full(task, candidate, screened)

    def _full(self, task: str, candidate: Candidate,
              screened: Measurement | None) -> tuple[str, Measurement]:
        digest, measurement = super()._measure(task, candidate)
        if screened is not None:
            measurement = measurement.after_screen(screened)
        if measurement.passed and measurement.time_ms is not None:
            self.best_full_ms[task] = min(self.best_full_ms.get(task, float("inf")), measurement.time_ms)
        return digest, measurement


def load_recordings(path: Path | str) -> dict[str, Any]:
    """Read and check a recordings file; raises ValueError naming what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read recordings {path}: {error}") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("gpu", "task")):
        raise ValueError(f"recordings {path} must name their 'gpu' and 'task'")
    if not isinstance(data.get("recorded"), dict):
        raise ValueError(f"recordings {path} must hold a 'recorded' object of hash: measurement")
    for digest, item in data["recorded"].items():
        if not isinstance(item, dict) or not set(item) <= _MEASUREMENT_FIELDS or "status" not in item:
            raise ValueError(f"{path}: recorded[{digest[:12]}] is not a measurement")
    return data


class ReplayEvaluator:
    """Serves measurements recorded earlier on a real GPU, labelled replayed=True."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        data = load_recordings(self.path)
        self.gpu: str = data["gpu"]
        self.task: str = data["task"]
        self._recorded: dict[str, dict[str, Any]] = data["recorded"]
        self._ready: list[tuple[str, Measurement]] = []

    def __contains__(self, candidate_hash: str) -> bool:
        return candidate_hash in self._recorded

    def lookup(self, task: str, candidate_hash: str) -> Measurement:
        if task != self.task:
            return Measurement(status="error", replayed=True, gpu=self.gpu,
                               message=f"{NO_RECORDING}: {self.path} records task "
                               f"{self.task!r}, not {task!r}")
        recorded = self._recorded.get(candidate_hash)
        if recorded is None:
            return Measurement(status="error", message=NO_RECORDING, replayed=True, gpu=self.gpu)
        return Measurement.from_dict({**copy.deepcopy(recorded), "replayed": True})

    def submit(self, task: str, candidate: Candidate) -> None:
        digest = candidate.content_hash()
        self._ready.append((digest, self.lookup(task, digest)))

    def collect(self, timeout_s: float) -> list[tuple[str, Measurement]]:
        ready, self._ready = self._ready, []
        return ready


class RecordingEvaluator:
    """Wraps an evaluator and writes what it measures to a recordings file, after every
    collect (so a crash loses at most the batch in hand). Errors and replays are not
    recorded: they are not measurements of the kernel on this GPU."""

    def __init__(self, inner: Evaluator, path: Path | str, *, note: str = "") -> None:
        self.inner = inner
        self.path = Path(path)
        if self.path.exists():
            self._data = load_recordings(self.path)
        else:
            self._data = {"gpu": "", "task": "", "note": note, "recorded": {}}

    def submit(self, task: str, candidate: Candidate) -> None:
        if self._data["task"] not in ("", task):
            raise ValueError(f"{self.path} records task {self._data['task']!r}; "
                             f"use another file for {task!r}")
        self._data["task"] = task
        self.inner.submit(task, candidate)

    def collect(self, timeout_s: float) -> list[tuple[str, Measurement]]:
        results = self.inner.collect(timeout_s)
        fresh = [(h, m) for h, m in results if m.status != "error" and not m.replayed]
        for digest, measurement in fresh:
            if measurement.gpu and self._data["gpu"] not in ("", measurement.gpu):
                raise ValueError(f"{self.path} records {self._data['gpu']}, but this "
                                 f"measurement is from {measurement.gpu}")
            self._data["gpu"] = self._data["gpu"] or measurement.gpu
            self._data["recorded"][digest] = measurement.to_dict()
        if fresh:
            self._write()
        return results

    def _write(self) -> None:
        write_json_atomically(self.path, self._data, indent=1)
