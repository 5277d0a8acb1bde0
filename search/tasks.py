"""Celery tasks of the search. Thin: a run id in, a service call, the outcome in the rows."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction

from search import services
from search.models import Run

logger = logging.getLogger(__name__)


@shared_task(name="search.drive_run")
def drive_run(run_id: int) -> str | None:
    """Step a run until its budget is spent or someone pauses or stops it. Routed to the
    `gpu` queue (optiml_web/celery.py): its evaluations run where the GPU is. A repeated
    message is harmless: a run that is not running is left alone, and each step works
    under the run's row lock."""
    if not Run.objects.filter(pk=run_id).exists():
        logger.warning("run %s no longer exists; nothing to drive", run_id)
        return None
    try:
        run = services.run_drive(run_id=run_id)
    except Exception as error:
        # A failure is a state people see on the run, not only a traceback in a log.
        logger.exception("driving run %s failed", run_id)
        services.run_fail(run_id=run_id, message=f"{type(error).__name__}: {error}")
        return Run.Status.FAILED
    return run.status


def drive_run_enqueue(*, run_id: int) -> None:
    """Queue the run's search once the current transaction commits, so the worker never
    looks for a run (or a status) it cannot see yet."""
    transaction.on_commit(lambda: drive_run.apply_async(args=[run_id]))
