"""Demo runs (issue 35): a run served by a recording shipped with the app, chosen per run.

A run's `evaluator` is "" (the server's, settings.OPTIML_EVALUATOR) or "demo:<key>", the key
naming a file of search/demo_recordings (search.demo). A demo run replays the search that
recording was made by: its seed, judge, proposal sources (by dotted path, the engine's,
as `python -m search.engine optimize` ran them: the recorded skill cards, not a team's
library) and at most its budget, one evaluation at a time, no screen; every verdict comes
from the recording through profiling.evaluators.RecordedEvaluator, whose identity (the
file's hash) keys its Evaluation rows apart from the gate's and from other recordings'.
A kernel the recording lacks is that evaluator's failure, shown as "not measured", never
as the kernel's verdict; a compile error is still a compile verdict (the CPU stage runs here).
"""

from __future__ import annotations

import importlib
import threading

from django.conf import settings

from profiling.evaluators import NO_GPU, Evaluator, RecordedEvaluator, get_evaluator
from profiling.harness.candidate import Candidate as HarnessCandidate
from profiling.models import Evaluation
from profiling.workers import gpu_worker_live
from search.demo import DemoRecording, DemoRecordingError, demo_by_key, demo_for, demo_recordings
from search.models import Run

DEMO_PREFIX = "demo:"
DEMO = "demo"
SERVER = "gate"  # the server's own evaluator (OPTIML_EVALUATOR): the gate, unless configured otherwise

_evaluators: dict[str, RecordedEvaluator] = {}
_evaluators_lock = threading.Lock()


def is_demo(run: Run) -> bool:
    return run.evaluator.startswith(DEMO_PREFIX)


def demo_of(run: Run) -> DemoRecording | None:
    """The recording a demo run replays; None for any other run."""
    return demo_by_key(run.evaluator.removeprefix(DEMO_PREFIX)) if is_demo(run) else None


def demo_to_start(*, task_name: str) -> DemoRecording:
    """The recording a new demo run of `task_name` replays; DemoRecordingError says which
    tasks have one when this one has none."""
    recording = demo_for(task_name)
    if recording is None:
        tasks = sorted({r.task for r in demo_recordings()})
        have = ", ".join(tasks) if tasks else "none yet"
        raise DemoRecordingError(f"the task {task_name} has no demo recording, so it cannot run as a demo "
                                 f"(tasks with one: {have}); it needs a GPU worker")
    return recording


def demo_for_new_run(*, spec, evaluator: str, source: str, plan: dict) -> DemoRecording | None:
    """The recording a new run replays: None for the server's evaluator, else the task's
    demo recording, which starts from the task's naive kernel (as it was recorded).
    DemoRecordingError names the input that stands in the way."""
    if evaluator == SERVER:
        return None
    if evaluator != DEMO:
        raise DemoRecordingError(f"unknown evaluator {evaluator!r}: use 'gate' or 'demo'")
    recording = demo_to_start(task_name=spec.name)
    naive = HarnessCandidate.from_source_and_plan(spec.naive_source, spec.naive_plan)
    if HarnessCandidate.from_source_and_plan(source, plan).content_hash() != naive.content_hash():
        raise DemoRecordingError("a demo run replays the search recorded from the task's naive kernel: "
                                 "start from it as the form fills it in, or measure this kernel on a GPU "
                                 "worker", field="source")
    return recording


def evaluator_for_run(run: Run) -> Evaluator:
    """The evaluator that serves `run`: its demo recording's, else the server's."""
    if not is_demo(run):
        return get_evaluator()
    key = run.evaluator.removeprefix(DEMO_PREFIX)
    with _evaluators_lock:  # one per recording and process: it reads the file once
        if key not in _evaluators:
            _evaluators[key] = RecordedEvaluator(demo_by_key(key).path)
        return _evaluators[key]


def evaluator_for_run_id(run_id: int) -> Evaluator:
    evaluator = Run.objects.filter(pk=run_id).values_list("evaluator", flat=True).first() or ""
    return evaluator_for_run(Run(evaluator=evaluator))


def demo_sources(recording: DemoRecording) -> list:
    """The proposal sources the recording's search used, by dotted path (the engine's)."""
    sources = []
    for path in recording.sources:
        module_name, _, class_name = path.rpartition(".")
        source = getattr(importlib.import_module(module_name), class_name)()
        if hasattr(source, "llm_cards_per_node"):  # the skill source: as recorded, without an LLM
            source.llm_cards_per_node = 0
        sources.append(source)
    return sources


def gpu_worker_seen() -> bool:
    """Whether a GPU has ever measured a kernel for this app: the gate's own verdict on a
    GPU. Workers do not register, so a verdict is the sign one was here."""
    return Evaluation.objects.filter(evaluator=SERVER, source=Evaluation.Source.GATE) \
        .exclude(gpu=NO_GPU).exists()


def demo_choices() -> dict:
    """What the New session form needs to offer demo runs (GET /api/demo/): demo is the
    default while no GPU has measured a kernel here and the server's evaluator is the gate;
    `gate_note` says before a run starts that one measured by the gate would wait, queued
    for a GPU worker, while none is connected (search.gpu_queue)."""
    from search import gpu_queue  # it imports this module

    seen = gpu_worker_seen()
    # An operator who configured another evaluator (a recording, say) chose it for every run.
    demo_first = not seen and settings.OPTIML_EVALUATOR == SERVER
    tasks = {}
    for recording in demo_recordings():
        tasks.setdefault(recording.task, {"gpu": recording.gpu, "recorded_at": recording.recorded_at,
                                          "budget": recording.budget})
    note = ("No GPU worker has measured a kernel here yet, so a run would only compile and check its "
            "kernels: a demo run, which replays a search recorded on a GPU, is the default."
            if demo_first else "")
    gate_note = gpu_queue.gpu_worker_choice_note()
    return {"default": DEMO if demo_first else SERVER, "gpu_worker_seen": seen, "tasks": tasks, "note": note,
            "gpu_worker_live": gpu_worker_live(), "gate_note": gate_note}


def demo_view(run: Run) -> dict | None:
    """What a demo run's pages say about it (the run API's `demo`); None for any other run."""
    try:
        recording = demo_of(run)
    except DemoRecordingError:  # the file went away with an upgrade: the run still says it was a demo
        return {"gpu": None, "recorded_at": None,
                "banner": "Demo: the times were recorded on a GPU and replayed; the recording is gone."}
    if recording is None:
        return None
    return {"gpu": recording.gpu, "recorded_at": recording.recorded_at, "banner": recording.banner()}
