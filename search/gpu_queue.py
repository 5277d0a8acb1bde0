"""A run that waits, queued for a GPU worker (issue 35).

A run measured by the gate needs a GPU worker (profiling.workers): without one, the
`make start` worker on a host with no GPU would take its evaluations, and the run would
end "finished: nothing passed" seconds after the click, every verdict "no GPU". So while
no GPU worker is live, the run's driver hands nothing out: the run stays running, with
`Run.queued_since` set and QUEUED_MESSAGE as its message, and its driver
chain looks again every step's delay (search.services.run_dispatch). The first look
after a worker appears takes it out of the queue and the search starts. Each change is
a `run_status` event, so the run's page hears it over the socket like a pause.

A demo run (its verdicts recorded), a run under an operator's other evaluator
(OPTIML_EVALUATOR=recorded:...), and a run stepped in one process with an evaluator of its
own (the `optimize` command, tests) never wait here.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from profiling.workers import gpu_worker_live
from search import demo_runs
from search.models import Run
from search.services import _append

# The run's message while it waits (its status badge reads "queued for a GPU worker").
QUEUED_MESSAGE = ("queued for a GPU worker: none is connected, so no kernel is measured yet; the search "
                  "starts as soon as one connects")


def run_needs_gpu_worker(run: Run) -> bool:
    """Whether `run`'s evaluations need a GPU worker: the server's evaluator is the gate
    and the run is not a demo."""
    return not demo_runs.is_demo(run) and settings.OPTIML_EVALUATOR == demo_runs.SERVER


def run_waits_for_gpu_worker(run: Run) -> bool:
    """Under the run's row lock (the caller's): move a running `run` into the queue when
    it needs a GPU worker and none is live, or out of it when it no longer waits, saying
    so in a `run_status` event (to the run's socket once this commits). Whether it waits."""
    waits = run.status == Run.Status.RUNNING and run_needs_gpu_worker(run) and not gpu_worker_live()
    if waits != (run.queued_since is not None):
        if waits:
            run.queued_since, run.message = timezone.now(), QUEUED_MESSAGE
        else:
            run.queued_since, run.message = None, ""
        _append(run, "run_status", queue_status_data(run))
        run.save(update_fields=["queued_since", "message", "next_seq", "updated"])
    return waits


def queue_status_data(run: Run) -> dict:
    """The `run_status` event of a run that entered or left the queue."""
    since = run.queued_since.isoformat() if run.queued_since is not None else None
    return {"status": run.status, "message": run.message, "queued_since": since}


def gpu_worker_choice_note() -> str:
    """What New session says under "Measured by" before a run starts, when a run measured
    by the gate would wait now (blank when it would not)."""
    if settings.OPTIML_EVALUATOR != demo_runs.SERVER or gpu_worker_live():
        return ""
    return ("No GPU worker is connected now: a run measured by a GPU worker waits, queued for a GPU "
            "worker, until one connects. A demo run replays a search recorded on a GPU at once.")
