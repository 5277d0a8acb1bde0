"""Celery tasks of the search. Thin: a run id in, a service call, the outcome in the rows."""

from __future__ import annotations

import logging
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.db import transaction

from profiling.evaluators import EvaluatorError
from search import control_services, demo_runs, input_caches, leases, node_services, services, writing_jobs
from search.models import Run

logger = logging.getLogger(__name__)


@shared_task(name="search.drive_run")
def drive_run(run_id: int, token: int) -> str | None:
    """One step of a run, which queues the next while the run runs and has budget left
    (services.run_advance). On a CPU worker: the step hands its evaluations to the `gpu`
    queue (evaluate_node). A message whose token the run no longer holds (a duplicate, a
    redelivery, one queued before a pause) does nothing and returns None."""
    if not Run.objects.filter(pk=run_id).exists():
        logger.warning("run %s no longer exists; nothing to drive", run_id)
        return None
    try:
        run = services.run_advance(run_id=run_id, token=token)
    except Exception as error:
        # A failure is a state people see on the run, not only a traceback in a log.
        logger.exception("driving run %s failed", run_id)
        control_services.run_fail(run_id=run_id, message=failure_for_users("a step of the run", error))
        return Run.Status.FAILED
    return run.status if run is not None else None


def failure_for_users(doing: str, error: Exception) -> str:
    """A run's message when `doing` broke with `error`. The run's team and a share link's
    viewers read it. An evaluator's error is written for them (profiling.evaluators: it
    names a recording by its file name, never a path on this server); any other error's
    text is the operator's, as Python or a library wrote it (a path, a setting, the code),
    so the run says only its kind, and the log, which has the traceback, the rest."""
    if isinstance(error, EvaluatorError):
        return f"{doing} failed: {error}"
    return f"{doing} failed: an unexpected {type(error).__name__} (the server's log has the details)"


# How long an evaluation whose kernel another worker is measuring (for another run, say)
# waits before it looks again: by then that one has usually finished and this costs nothing.
HELD_RETRY_S = 10
HELD_RETRIES = 200


@shared_task(name="search.evaluate_node", bind=True, max_retries=HELD_RETRIES)
def evaluate_node(self, run_id: int, node_id: int, best_full_ms: float | None) -> str:
    """Measure one asked node of a run on this GPU worker (node_services.node_evaluate), keep
    the result on the node's row and wake the run. A repeated or late message does nothing."""
    try:
        outcome = node_services.node_evaluate(run_id=run_id, node_id=node_id, best_full_ms=best_full_ms,
                                              worker=self.request.hostname or "")
    except Exception as error:
        logger.exception("evaluating node %s of run %s failed", node_id, run_id)
        control_services.run_fail(run_id=run_id,
                                  message=failure_for_users(f"evaluating node {node_id}", error))
        return "failed"
    if outcome == "held":
        raise self.retry(countdown=HELD_RETRY_S)
    return outcome


@shared_task(name="search.compile_node")
def compile_node(run_id: int, node_id: int, best_full_ms: float | None) -> str:
    """Compile one asked node on this CPU worker ahead of its evaluation, and queue that
    evaluation unless the node turns out to run another node's binary (node_services.node_compile)."""
    try:
        return node_services.node_compile(run_id=run_id, node_id=node_id, best_full_ms=best_full_ms)
    except Exception as error:
        logger.exception("compiling node %s of run %s failed", node_id, run_id)
        control_services.run_fail(run_id=run_id,
                                  message=failure_for_users(f"compiling node {node_id}", error))
        return "failed"


def compile_node_enqueue(*, run, node_id: int, best_full_ms: float | None) -> None:
    """Queue a node's compile (default queue: a CPU worker) once the current transaction commits."""
    transaction.on_commit(lambda: compile_node.apply_async(args=[run.pk, node_id, best_full_ms]))


def evaluate_node_enqueue(*, run, node_id: int, best_full_ms: float | None) -> None:
    """Queue a node's evaluation on the `gpu` queue once the current transaction commits;
    a demo run's on the default queue, since its recording needs no GPU (a CPU worker
    compiles, for a compile error's verdict, and looks the rest up).
    The worker's hard limit: the gate's own, the screen's and a claim's grace."""
    limit = services.evaluation_time_limit_s(run)
    queue = {"queue": evaluate_node.app.conf.task_default_queue} if demo_runs.is_demo(run) else {}
    transaction.on_commit(lambda: evaluate_node.apply_async(
        args=[run.pk, node_id, best_full_ms], time_limit=limit, **queue))


@shared_task(name="search.restart_stalled_runs")
def restart_stalled_runs() -> list[int]:
    """Every minute (the beat, optiml_web/celery.py): new driver chains for running runs
    whose chain was lost (control_services.run_restart_stalled)."""
    restarted = control_services.run_restart_stalled(older_than_s=settings.OPTIML_RUN_STALL_S)
    if restarted:
        logger.warning("restarted the driver chains of stalled runs %s", restarted)
    return restarted


@shared_task(name="search.wake_runs_with_expired_leases")
def wake_runs_with_expired_leases() -> list[int]:
    """Every EXPIRED_LEASE_SWEEP_S (the beat, optiml_web/celery.py): a step for each running
    run a GPU worker's lease on one of its nodes ran out on (that worker died), which hands
    the node out again (search/leases.py)."""
    woken = leases.runs_with_expired_leases_wake()
    if woken:
        logger.warning("a worker's lease ran out on nodes of runs %s: handed out again", woken)
    return woken


@shared_task(name="search.sweep_input_caches")
def sweep_input_caches() -> int:
    """Every ten minutes, on the GPU queue where the files are (optiml_web/celery.py):
    the input caches of runs that ended are deleted (input_caches.run_input_caches_sweep)."""
    deleted = input_caches.run_input_caches_sweep(root=Path(settings.OPTIML_WORKDIR) / "inputs")
    if deleted:
        logger.info("deleted the input caches of ended runs: %s", [str(f) for f in deleted])
    return len(deleted)


def drive_run_enqueue(*, run_id: int, token: int, countdown_s: float = 0.0) -> None:
    """Queue a step of the run once the current transaction commits, so the worker never
    looks for a run (or a status, or a token) it cannot see yet."""
    transaction.on_commit(
        lambda: drive_run.apply_async(args=[run_id, token], countdown=countdown_s or None)
    )


@shared_task(name="search.write_kernel")
def write_kernel(job_id: int) -> str | None:
    """Run a queued writing job on this CPU worker (writing_jobs.writing_job_run): the
    experts write, nvcc checks, the outcome is the job's row. A repeated message, or one
    for a job that ended or went stale, does nothing and returns None."""
    job = writing_jobs.writing_job_run(job_id=job_id)
    return job.status if job is not None else None


def write_kernel_enqueue(*, job_id: int) -> None:
    """Queue a writing job (default queue: a CPU worker) once the current transaction commits."""
    transaction.on_commit(lambda: write_kernel.apply_async(args=[job_id]))


@shared_task(name="search.fail_stale_writing_jobs")
def fail_stale_writing_jobs() -> list[int]:
    """Every minute (the beat): writing jobs whose worker died are queued again for another
    (writing_jobs_resume), or failed, never left running; those nobody took are failed."""
    resumed, given_up = writing_jobs.writing_jobs_resume(heartbeat_s=settings.OPTIML_WRITING_HEARTBEAT_S)
    if resumed:
        logger.warning("queued again the writing jobs %s: their worker stopped", resumed)
    failed = given_up + writing_jobs.writing_jobs_expire(stale_after_s=settings.OPTIML_WRITING_STALE_S)
    if failed:
        logger.warning("failed the stale writing jobs %s", failed)
    return failed
