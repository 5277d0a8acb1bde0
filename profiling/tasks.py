"""Celery tasks of the gate. Thin: ids in, a service call, the outcome in the database.

(Not to be confused with profiling/harness/tasks/, the registry of benchmark tasks.)
"""

from __future__ import annotations

import dataclasses
import logging

from celery import shared_task
from django.conf import settings
from django.db import transaction

from profiling import services
from profiling.evaluators import options_from_dict, options_to_dict
from profiling.harness.gate import GateOptions
from profiling.models import Candidate, Evaluation

logger = logging.getLogger(__name__)

# A retryable failure (a worker without nvcc, a crashed harness) is tried this many more
# times, a minute apart, before its "failed" row is left for a person to look at.
MAX_RETRIES = 3
RETRY_DELAY_S = 60


@shared_task(name="profiling.evaluate_candidate", bind=True, max_retries=MAX_RETRIES)
def evaluate_candidate(self, candidate_id: int, task_name: str, options: dict) -> int | None:
    """Evaluate a stored candidate on a task; returns the Evaluation id."""
    candidate = Candidate.objects.filter(pk=candidate_id).first()
    if candidate is None:
        # Deleted after it was queued: nothing to evaluate and nowhere to record it.
        logger.warning("candidate %s no longer exists; evaluation dropped", candidate_id)
        return None
    gate_options = options_from_dict(options)
    evaluation = services.evaluation_run(task_name=task_name, candidate=candidate, options=gate_options)
    if evaluation.status == Evaluation.Status.FAILED and evaluation.retryable:
        raise self.retry(countdown=RETRY_DELAY_S)
    if evaluation.status == Evaluation.Status.RUNNING:
        # Another worker holds the claim. If it died (this may be its message, delivered
        # again), nobody else will finish the job: look again once the claim can be
        # taken over. If it finishes first, the retry finds the row done and stops.
        raise self.retry(countdown=gate_options.time_limit_s + settings.OPTIML_CLAIM_GRACE_S)
    return evaluation.pk


def evaluation_enqueue(*, candidate: Candidate, task_name: str, options: GateOptions) -> None:
    """Queue an evaluation on the `gpu` queue once the current transaction commits, so
    the worker never looks for a candidate row that is not yet visible to it.

    A single evaluation never has a fixed seed: the worker draws a fresh one from the OS
    and records it in the verdict, so nobody can know its inputs beforehand (a run's
    candidates share a secret one instead: search.measuring.run_gate_seed)."""
    options = dataclasses.replace(options, seed=None, input_cache=None)
    # The worker's hard limit: the gate's own limit plus the same grace a claim gets.
    time_limit = options.time_limit_s + settings.OPTIML_CLAIM_GRACE_S
    transaction.on_commit(
        lambda: evaluate_candidate.apply_async(
            args=[candidate.pk, task_name, options_to_dict(options)], time_limit=time_limit
        )
    )
