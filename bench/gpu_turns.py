"""When each gate held its GPU's turn: a launcher that records it from the bench side.

    OPTIML_BENCH_TURNS=<folder> python bench/gpu_turns.py celery -A optiml_web worker ...
    OPTIML_BENCH_TURNS=<folder> python bench/gpu_turns.py manage optimize --task relu ...

profiling/evaluators.py takes the host's lock on the GPU (profiling.gputurn.gpu_turn)
around every full gate and every screen, but nothing records when a turn was taken or
given back: the verdict keeps only how long the gate took (Verdict.seconds), and an
Evaluation row its claim and finish, which include the wait for the turn. The
OPTIML_EVALUATOR setting names "gate" or a recording, not a class, so a wrapping
evaluator cannot be configured either. This launcher therefore replaces the name
`gpu_turn` in profiling.evaluators, in this process only, with one that writes a JSON
line per turn (pid, device, the task and candidate it was for, when it was asked for,
taken and given back), then runs celery or manage.py here. A Celery worker's prefork
child inherits the replacement. Everything a gate does on the GPU happens inside the
recorded window, which lies inside the lock's own: two windows on one device that
overlap would be two timings on one GPU at once.

OPTIML_BENCH_RECORDED_TURNS=1 (bench/fanout_gpu.py's --evaluator recorded, a CPU dry run)
also puts the recorded evaluator's answers inside a turn, as the gate's are, so the
lock, this recorder and the overlap check run on a host without a GPU.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TURNS_VARIABLE = "OPTIML_BENCH_TURNS"
RECORDED_VARIABLE = "OPTIML_BENCH_RECORDED_TURNS"
_label = threading.local()  # what the turn being taken is for (set by the evaluator wrappers)


def install(folder: Path, *, recorded_turns: bool = False) -> None:
    """Record every turn profiling.evaluators takes from now on, in `folder`."""
    from profiling import evaluators

    folder.mkdir(parents=True, exist_ok=True)
    take_turn = evaluators.gpu_turn

    @contextmanager
    def recorded_turn(key: str | None = None) -> Iterator[None]:
        asked = time.time()
        with take_turn(key):
            taken = time.time()
            try:
                yield
            finally:
                _write(folder, {"asked": asked, "taken": taken, "released": time.time(),
                                **getattr(_label, "value", {})})

    evaluators.gpu_turn = recorded_turn
    _record_screener_starts(folder, evaluators.GateEvaluator)
    for cls in (evaluators.GateEvaluator, evaluators.RecordedEvaluator):
        inside_turn = recorded_turns and cls is evaluators.RecordedEvaluator
        for kind in ("evaluate", "screen"):
            setattr(cls, kind, _labelled(getattr(cls, kind), kind, inside_turn=inside_turn))


def _record_screener_starts(folder: Path, cls: type) -> None:
    """GateEvaluator.screen starts its screener (a process that makes a CUDA context and
    allocates on the GPU at once, profiling/harness/device.py Gpu) before it takes the
    turn: record when, so the report can say whether that fell in another's timing."""
    init = cls.__init__

    @functools.wraps(init)
    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        factory = self._screener_factory

        def start(options):
            at = time.time()
            screener = factory(options)
            _write(folder, {"at": at, "started": time.time()}, prefix="screener")
            return screener

        self._screener_factory = start

    cls.__init__ = recording_init


def _labelled(method: Callable, kind: str, *, inside_turn: bool) -> Callable:
    from profiling import evaluators

    @functools.wraps(method)
    def wrapper(self, task_name, candidate, options):
        _label.value = {"kind": kind, "task": task_name, "candidate": candidate.content_hash()}
        try:
            if not inside_turn:
                return method(self, task_name, candidate, options)
            with evaluators.gpu_turn():
                return method(self, task_name, candidate, options)
        finally:
            _label.value = {}

    return wrapper


def _write(folder: Path, line: dict, *, prefix: str = "turns") -> None:
    from profiling.gputurn import device_key

    line = {"pid": os.getpid(), "worker": os.environ.get("OPTIML_BENCH_WORKER", ""),
            "device": device_key(), **line}
    # One file per process (the pid is read now: a prefork child has its own), one line
    # per turn, flushed at once so that a killed worker keeps what it had.
    with open(folder / f"{prefix}-{os.getpid()}.jsonl", "a") as handle:
        handle.write(json.dumps(line) + "\n")


def read_turns(folder: Path, prefix: str = "turns") -> list[dict]:
    """Every turn recorded in `folder`, in the order they were taken (prefix
    "screener": the screeners' starts, in the order they began)."""
    lines = [json.loads(line) for path in sorted(folder.glob(f"{prefix}-*.jsonl"))
             for line in path.read_text().splitlines() if line.strip()]
    return sorted(lines, key=lambda line: line["taken" if prefix == "turns" else "at"])


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("celery", "manage"):
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optiml_web.settings")
    folder = os.environ.get(TURNS_VARIABLE)
    if folder:
        install(Path(folder), recorded_turns=os.environ.get(RECORDED_VARIABLE) == "1")
    if argv[0] == "celery":
        from celery.__main__ import main as celery_main

        sys.argv = ["celery", *argv[1:]]
        return celery_main() or 0
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", *argv[1:]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
