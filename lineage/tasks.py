"""Celery tasks of the lineage app. Thin: an id in, a service call, the outcome in the
database. A walk runs on the `gpu` queue (optiml_web/celery.py), where the gate runs."""

from __future__ import annotations

import secrets
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.db import transaction

from lineage import services


def gate_evaluator(request):
    """What a worker measures a walk with, as bench/lineage_suite.py does: the expert through
    the full gate, later states screened (and given the full gate when the screen finds
    them faster), on inputs from a fresh secret seed, recorded in each verdict."""
    from profiling.harness.gate import GateOptions
    from profiling.harness.seeds import SEED_BITS
    from search.engine.evaluators import ScreeningEvaluator

    workdir = Path(settings.OPTIML_WORKDIR) / "lineage" / f"walk-{request.pk}"
    return ScreeningEvaluator(GateOptions(workdir=str(workdir), seed=secrets.randbits(SEED_BITS),
                                          input_cache=str(workdir / "inputs")))


@shared_task(name="lineage.walk_expert")
def walk_expert(request_id: int) -> int | None:
    """Walk a queued request's expert; returns the stored lineage's id (None: nothing to do)."""
    request = services.walk_request_run(request_id=request_id, evaluator_factory=gate_evaluator)
    return request.lineage_id if request is not None else None


def walk_enqueue(*, request_id: int) -> None:
    """Queue the walk once the current transaction commits, so the worker finds the row."""
    transaction.on_commit(lambda: walk_expert.apply_async(args=[request_id]))
