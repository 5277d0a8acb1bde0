"""Where verdicts come from: the real gate, or verdicts recorded earlier on a real GPU.

The contract (every Evaluator):
- `gpu()` names the GPU whose measurements `evaluate` returns; it is part of the key an
  Evaluation is stored under. "none" means no GPU: verdicts are "incomplete".
- `identity()` names the evaluator itself ("gate", or "recorded:<the recording's content
  hash>"); it is part of that key too, so what one evaluator answered (its own failure
  above all: "no recorded verdict") is never served for another (issue 35). An
  evaluator without it is known by its `source` (evaluator_identity).
- `evaluate(task_name, candidate, options)` returns `(verdict, source)`, where source is
  "gate" or "recorded" and says honestly where the numbers came from. A bad kernel is a
  verdict (REJECTED, naming a guard), never an exception, under every evaluator: the
  recorded one compiles a kernel it has no recording of, so a compile error is a compile
  verdict there too. When no verdict can be had (no recording, no nvcc, no GPU worker),
  that is the evaluator's failure, not the kernel's: it raises EvaluatorError, whose
  `permanent` says whether trying again could help, and it is never stored as a verdict.

An evaluator may also screen (the Screening contract): `screen(task_name, candidate,
options)` returns the screen's cheaper verdict (level "screen", profiling/harness/
screen.py), or None when it cannot screen here, and the caller then uses `evaluate`. A
screened verdict decides only what the full gate looks at again; it is never stored as
an Evaluation (search.services).
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from profiling.gputurn import gpu_turn
from profiling.harness import gate
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import GateOptions
from profiling.harness.screen import Screener, ScreenOptions
from profiling.harness.verdict import REJECTED, Verdict

NO_GPU = "none"


class EvaluatorError(Exception):
    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class Evaluator(Protocol):
    def gpu(self) -> str: ...

    def identity(self) -> str: ...

    def evaluate(self, task_name: str, candidate: Candidate, options: GateOptions) -> tuple[Verdict, str]: ...


class Screening(Protocol):
    """An Evaluator that can also screen (see the module docstring)."""

    def screen(self, task_name: str, candidate: Candidate, options: GateOptions) -> Verdict | None: ...


def evaluator_identity(evaluator: object) -> str:
    """What `evaluator`'s answers are stored under besides the GPU (the module docstring);
    a stand-in without `identity()` is known by its `source` ("gate" if it has none)."""
    identity = getattr(evaluator, "identity", None)
    return identity() if callable(identity) else str(getattr(evaluator, "source", "gate"))


def can_screen(evaluator: object) -> bool:
    return callable(getattr(evaluator, "screen", None))


def screen_options_for(options: GateOptions) -> ScreenOptions:
    """The screen's options for a run's gate options: the same fixed seed, input cache and
    sizes, so the screen and the full gate of one run look at the same inputs."""
    return ScreenOptions(seed=options.seed, input_cache=options.input_cache, l1_sizes=options.l1_sizes,
                         gpu_inputs=options.gpu_inputs)


class GateEvaluator:
    """Compiles here with nvcc; runs, times and profiles on this host's GPU if it has one.

    It screens in one long-lived GPU process (a Screener), started at the first screen
    and kept for as long as this object: get_evaluator() keeps one per process, so the
    Celery worker's screener lives as long as the worker. `screener_factory` makes it
    (tests pass a stand-in).
    """

    source = "gate"

    def __init__(self, workdir: Path | str | None = None, *,
                 screener_factory: Callable[[ScreenOptions], Any] = Screener) -> None:
        self.workdir = str(workdir) if workdir else None
        self._gpu: str | None = None
        self._screener_factory = screener_factory
        self._screener: Any = None
        # One GPU process answers one request at a time; a threaded worker must queue.
        self._screen_lock = threading.Lock()

    def gpu(self) -> str:
        if self._gpu is None:
            # Asked once: finding the GPU may start a CUDA context or a subprocess.
            self._gpu = gate.gpu_name() or NO_GPU
        return self._gpu

    def identity(self) -> str:
        # The GPU's name is the key's `gpu`: one gate per harness version (also in the key).
        return self.source

    def evaluate(self, task_name: str, candidate: Candidate, options: GateOptions) -> tuple[Verdict, str]:
        from profiling.harness.tasks import UnknownTask

        if options.workdir is None and self.workdir:
            # One folder per task and candidate, so that each keeps its own .ncu-rep
            # report and worker log for a person to open later.
            folder = Path(self.workdir) / task_name / candidate.content_hash()[:16]
            options = dataclasses.replace(options, workdir=str(folder))
        try:
            with gpu_turn():  # one timing at a time on this GPU, whoever else runs here
                return gate.evaluate(task_name, candidate, options), self.source
        except UnknownTask as error:
            raise EvaluatorError(error.args[0], permanent=True) from error
        except CandidateError as error:
            raise EvaluatorError(f"malformed candidate: {error}", permanent=True) from error

    def screen(self, task_name: str, candidate: Candidate, options: GateOptions) -> Verdict | None:
        """The screen's verdict; None on a host without a GPU, whose full gate then says
        "incomplete" as it always has."""
        if self.gpu() == NO_GPU:
            return None
        # Starting the screener is GPU work too (its process makes a CUDA context and
        # allocates): inside the turn, so it never runs beside another process's timing.
        with self._screen_lock, gpu_turn():
            if self._screener is None:
                workdir = str(Path(self.workdir) / "screen") if self.workdir else None
                self._screener = self._screener_factory(ScreenOptions(workdir=workdir))
                # Its GPU process also leaves when ours does (it reads our pipe to EOF);
                # this only ends it in order at a normal exit.
                atexit.register(self.close)
            return self._screener.screen(task_name, candidate, screen_options_for(options))

    def close(self) -> None:
        """Stop the screen's GPU process, if one was started."""
        with self._screen_lock:
            screener, self._screener = self._screener, None
        if screener is not None:
            atexit.unregister(self.close)
            screener.close()


class RecordedEvaluator:
    """Serves verdicts measured on a real GPU and saved as JSON, in either of two formats:

        {"gpu": "NVIDIA H200",
         "recorded": [{"task": "softmax", "candidate_hash": "<64 hex>",
                       "verdict": {...Verdict.to_dict()...}}]}

    or the search engine's recordings (search/engine/evaluators.py, RecordingEvaluator):

        {"gpu": "NVIDIA H200", "task": "relu",
         "recorded": {"<candidate hash>": {...Measurement.to_dict(), with its verdict}}}

    A verdict recorded at level "screen" is served by `screen` only, and one recorded by
    the full gate by `evaluate` only. It never invents a verdict: a candidate without a
    full recording is an EvaluatorError, and `screen` returns None for one without a
    screened recording (so the caller asks `evaluate`).

    `sleep_s` makes every `evaluate` take that long first, as the gate does on a GPU
    (`recorded:<file>?sleep=<seconds>`): the crash test kills a worker in the middle of
    one (tests/web/test_crash_safety.py). The verdict is the recorded one all the same.

    Its errors name the recording by its file name, never its path on this server: they
    become messages of a run's nodes and of the run, which its team and a share link's
    viewers read.
    """

    source = "recorded"

    def __init__(self, path: Path | str, *, sleep_s: float = 0.0) -> None:
        self.path = Path(path)
        self.sleep_s = sleep_s
        data, digest = _load_recordings(self.path)
        self._identity = f"{self.source}:{digest[:16]}"
        self._gpu = data["gpu"]
        self._verdicts: dict[tuple[str, str], dict[str, Any]] = {}  # the full gate's
        self._screened: dict[tuple[str, str], dict[str, Any]] = {}
        for index, item in enumerate(_recorded_items(self.path, data)):
            key = (item["task"], item["candidate_hash"])
            verdict = item["verdict"]
            if (verdict.get("task"), verdict.get("candidate_hash")) != key:
                raise EvaluatorError(
                    f"{self.path.name}: recorded[{index}] holds a verdict for another task or "
                    "candidate than its 'task' and 'candidate_hash' say",
                    permanent=True,
                )
            verdicts = self._screened if verdict.get("level") == "screen" else self._verdicts
            verdicts[key] = verdict

    def gpu(self) -> str:
        return self._gpu

    def identity(self) -> str:
        """"recorded:<the first 16 hex of the file's sha256>": another recording (or this one
        edited) is another evaluator, whose answers are stored apart."""
        return self._identity

    def evaluate(self, task_name: str, candidate: Candidate, options: GateOptions) -> tuple[Verdict, str]:
        if self.sleep_s:
            time.sleep(self.sleep_s)  # before the look-up: a rejection takes the gate time too
        recorded = self._verdicts.get((task_name, candidate.content_hash()))
        if recorded is None:
            return self._checked_here(task_name, candidate, options), GateEvaluator.source
        return _verdict(recorded), self.source

    def _checked_here(self, task_name: str, candidate: Candidate, options: GateOptions) -> Verdict:
        """A kernel without a recording still gets the verdicts that need no GPU: the gate's
        CPU stage (plan, policy, nvcc) runs here, so a compile error is a compile verdict as
        under the gate. One that passes it has no verdict here, which is this evaluator's
        failure (EvaluatorError), never the kernel's."""
        from profiling.harness import HARNESS_VERSION
        from profiling.harness.tasks import UnknownTask, get

        content_hash = candidate.content_hash()
        try:
            spec = get(task_name)
        except UnknownTask as error:
            raise EvaluatorError(error.args[0], permanent=True) from error
        l1_sizes = options.l1_sizes if options is not None else None  # as the gate: its sizes, or the task's
        checked = gate.cpu_stage(spec, candidate, l1_sizes or dict(spec.sizes))
        if isinstance(checked, Verdict) and checked.status == REJECTED:
            checked.environment.harness_version = HARNESS_VERSION
            return checked
        screened = (task_name, content_hash) in self._screened
        only = " (only the screen's verdict is recorded)" if screened else ""
        missing = (f"no recorded verdict for candidate {content_hash[:12]} on task {task_name!r} "
                   f"in {self.path.name}{only}; recordings exist only for kernels measured on {self._gpu}")
        if isinstance(checked, Verdict):  # this host cannot compile: another may
            raise EvaluatorError(f"{missing}; nor could it be compiled here to look for a compile "
                                 f"error: {checked.message}", permanent=False)
        raise EvaluatorError(missing, permanent=True)

    def screen(self, task_name: str, candidate: Candidate, options: GateOptions) -> Verdict | None:
        recorded = self._screened.get((task_name, candidate.content_hash()))
        return _verdict(recorded) if recorded is not None else None


def _verdict(recorded: dict[str, Any]) -> Verdict:
    return Verdict.from_dict(json.loads(json.dumps(recorded)))  # a deep copy


def _load_recordings(path: Path) -> tuple[dict[str, Any], str]:
    """The recordings and the sha256 of the file's bytes (read once: the pair agrees)."""
    name = path.name  # not the path: see RecordedEvaluator
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except OSError as error:
        raise EvaluatorError(f"cannot read recordings {name}: {error.strerror}", permanent=True) from None
    except json.JSONDecodeError as error:
        raise EvaluatorError(f"recordings {name} are not JSON: {error}", permanent=True) from None
    if not isinstance(data, dict) or not isinstance(data.get("gpu"), str) or not data["gpu"]:
        raise EvaluatorError(f"recordings {name} must name their 'gpu'", permanent=True)
    if not isinstance(data.get("recorded"), list | dict):
        raise EvaluatorError(f"recordings {name} must hold a 'recorded' list (or the search "
                             "engine's object of hash: measurement)", permanent=True)
    return data, hashlib.sha256(raw).hexdigest()


def _recorded_items(path: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    """The recordings as [{task, candidate_hash, verdict}], from either format."""
    recorded = data["recorded"]
    if isinstance(recorded, dict):  # the search engine's: one task, hash -> measurement
        if not isinstance(data.get("task"), str):
            raise EvaluatorError(f"recordings {path.name} must name their 'task'", permanent=True)
        recorded = [{"task": data["task"], "candidate_hash": digest,
                     "verdict": (item or {}).get("verdict") if isinstance(item, dict) else None}
                    for digest, item in recorded.items()]
    for index, item in enumerate(recorded):
        if not isinstance(item, dict) or not {"task", "candidate_hash", "verdict"} <= set(item) \
                or not isinstance(item["verdict"], dict):
            raise EvaluatorError(
                f"{path.name}: recorded[{index}] needs 'task', 'candidate_hash' and 'verdict'",
                permanent=True,
            )
    return recorded


_gate_evaluators: dict[str, GateEvaluator] = {}
_gate_evaluators_lock = threading.Lock()


def get_evaluator() -> Evaluator:
    """The evaluator that settings.OPTIML_EVALUATOR names. The gate's is one per process
    (and work folder), kept: it holds the screen's GPU process between run steps."""
    choice = settings.OPTIML_EVALUATOR
    if choice == "gate":
        workdir = str(settings.OPTIML_WORKDIR)
        with _gate_evaluators_lock:
            if workdir not in _gate_evaluators:
                _gate_evaluators[workdir] = GateEvaluator(workdir=workdir)
            return _gate_evaluators[workdir]
    if choice.startswith("recorded:"):
        path, sleep_s = _recorded_setting(choice)
        return RecordedEvaluator(path, sleep_s=sleep_s)
    raise ImproperlyConfigured(f"OPTIML_EVALUATOR={choice!r}; use 'gate' or 'recorded:<path>'")


def _recorded_setting(choice: str) -> tuple[str, float]:
    """("<path>", sleep seconds) from "recorded:<path>" or "recorded:<path>?sleep=<s>"."""
    path, _, query = choice.removeprefix("recorded:").partition("?")
    if not query:
        return path, 0.0
    name, _, value = query.partition("=")
    try:
        sleep_s = float(value) if name == "sleep" else -1.0
    except ValueError:
        sleep_s = -1.0
    if not (math.isfinite(sleep_s) and sleep_s >= 0):
        raise ImproperlyConfigured(f"OPTIML_EVALUATOR={choice!r}: after the path only "
                                   "'?sleep=<seconds>' (a finite number, 0 or more) may follow")
    return path, sleep_s


def options_to_dict(options: GateOptions) -> dict[str, Any]:
    """GateOptions as JSON for a Celery message."""
    return dataclasses.asdict(options)


def options_from_dict(data: dict[str, Any]) -> GateOptions:
    known = {f.name for f in dataclasses.fields(GateOptions)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown gate options: {', '.join(sorted(unknown))}")
    data = dict(data)
    if "levels" in data:
        data["levels"] = tuple(data["levels"])
    return GateOptions(**data)
