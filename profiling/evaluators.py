"""Where verdicts come from: the real gate, or verdicts recorded earlier on a real GPU.

The contract (every Evaluator):
- `gpu()` names the GPU whose measurements `evaluate` returns; it is part of the key an
  Evaluation is stored under. "none" means no GPU: verdicts are "incomplete".
- `evaluate(task_name, candidate, options)` returns `(verdict, source)`, where source is
  "gate" or "recorded" and says honestly where the numbers came from. A bad kernel is a
  verdict (REJECTED, naming a guard), never an exception. When no verdict can be had,
  it raises EvaluatorError, whose `permanent` says whether trying again could help.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from profiling.harness import gate
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import GateOptions
from profiling.harness.verdict import Verdict

NO_GPU = "none"


class EvaluatorError(Exception):
    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class Evaluator(Protocol):
    def gpu(self) -> str: ...

    def evaluate(self, task_name: str, candidate: Candidate, options: GateOptions) -> tuple[Verdict, str]: ...


class GateEvaluator:
    """Compiles here with nvcc; runs, times and profiles on this host's GPU if it has one."""

    source = "gate"

    def __init__(self, workdir: Path | str | None = None) -> None:
        self.workdir = str(workdir) if workdir else None
        self._gpu: str | None = None

    def gpu(self) -> str:
        if self._gpu is None:
            # Asked once: finding the GPU may start a CUDA context or a subprocess.
            self._gpu = gate.gpu_name() or NO_GPU
        return self._gpu

    def evaluate(self, task_name: str, candidate: Candidate, options: GateOptions) -> tuple[Verdict, str]:
        from profiling.harness.tasks import UnknownTask

        if options.workdir is None and self.workdir:
            # One folder per task and candidate, so that each keeps its own .ncu-rep
            # report and worker log for a person to open later.
            folder = Path(self.workdir) / task_name / candidate.content_hash()[:16]
            options = dataclasses.replace(options, workdir=str(folder))
        try:
            return gate.evaluate(task_name, candidate, options), self.source
        except UnknownTask as error:
            raise EvaluatorError(error.args[0], permanent=True) from error
        except CandidateError as error:
            raise EvaluatorError(f"malformed candidate: {error}", permanent=True) from error


class RecordedEvaluator:
    """Serves verdicts measured on a real GPU and saved as JSON:

        {"gpu": "NVIDIA H200",
         "recorded": [{"task": "softmax", "candidate_hash": "<64 hex>",
                       "verdict": {...Verdict.to_dict()...}}]}

    It never invents a verdict: a candidate without a recording is an EvaluatorError.
    """

    source = "recorded"

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        data = _load_recordings(self.path)
        self._gpu = data["gpu"]
        self._verdicts: dict[tuple[str, str], dict[str, Any]] = {}
        for index, item in enumerate(data["recorded"]):
            key = (item["task"], item["candidate_hash"])
            verdict = item["verdict"]
            if (verdict.get("task"), verdict.get("candidate_hash")) != key:
                raise EvaluatorError(
                    f"{self.path}: recorded[{index}] holds a verdict for another task or "
                    "candidate than its 'task' and 'candidate_hash' say",
                    permanent=True,
                )
            self._verdicts[key] = verdict

    def gpu(self) -> str:
        return self._gpu

    def evaluate(self, task_name: str, candidate: Candidate, options: GateOptions) -> tuple[Verdict, str]:
        content_hash = candidate.content_hash()
        recorded = self._verdicts.get((task_name, content_hash))
        if recorded is None:
            raise EvaluatorError(
                f"no recorded verdict for candidate {content_hash[:12]} on task {task_name!r} "
                f"in {self.path}; recordings exist only for kernels measured on {self._gpu}",
                permanent=True,
            )
        return Verdict.from_dict(json.loads(json.dumps(recorded))), self.source


def _load_recordings(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise EvaluatorError(f"cannot read recordings {path}: {error.strerror}", permanent=True) from None
    except json.JSONDecodeError as error:
        raise EvaluatorError(f"recordings {path} are not JSON: {error}", permanent=True) from None
    if not isinstance(data, dict) or not isinstance(data.get("gpu"), str) or not data["gpu"]:
        raise EvaluatorError(f"recordings {path} must name their 'gpu'", permanent=True)
    recorded = data.get("recorded")
    if not isinstance(recorded, list):
        raise EvaluatorError(f"recordings {path} must hold a 'recorded' list", permanent=True)
    for index, item in enumerate(recorded):
        if not isinstance(item, dict) or not {"task", "candidate_hash", "verdict"} <= set(item):
            raise EvaluatorError(
                f"{path}: recorded[{index}] needs 'task', 'candidate_hash' and 'verdict'",
                permanent=True,
            )
    return data


def get_evaluator() -> Evaluator:
    """The evaluator that settings.OPTIML_EVALUATOR names."""
    choice = settings.OPTIML_EVALUATOR
    if choice == "gate":
        return GateEvaluator(workdir=settings.OPTIML_WORKDIR)
    if choice.startswith("recorded:"):
        return RecordedEvaluator(choice.removeprefix("recorded:"))
    raise ImproperlyConfigured(f"OPTIML_EVALUATOR={choice!r}; use 'gate' or 'recorded:<path>'")


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
