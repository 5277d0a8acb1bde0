"""Reads for the gate's side of the database."""

from __future__ import annotations

from django.db.models import QuerySet

from profiling.harness import HARNESS_VERSION
from profiling.models import Candidate, Evaluation, Task


def evaluation_for(
    *, candidate: Candidate, task: Task, gpu: str, harness_version: str = HARNESS_VERSION
) -> Evaluation | None:
    """The one evaluation stored under this key, finished or running."""
    return (
        Evaluation.objects.filter(candidate=candidate, task=task, gpu=gpu, harness_version=harness_version)
        .select_related("candidate", "task")
        .first()
    )


def naive_evaluation_for(
    *, task: Task, gpu: str, harness_version: str = HARNESS_VERSION
) -> Evaluation | None:
    """The stored evaluation of the task's own naive kernel on this GPU, if any."""
    if task.naive_candidate_id is None:
        return None
    return evaluation_for(candidate=task.naive_candidate, task=task, gpu=gpu, harness_version=harness_version)


def naive_ms_for(*, task: Task, gpu: str) -> float | None:
    """The naive kernel's median time on this GPU: the baseline of "N x faster"."""
    naive = naive_evaluation_for(task=task, gpu=gpu)
    if naive is None or naive.status != Evaluation.Status.PASSED:
        return None
    return naive.median_ms


def evaluation_list(
    *,
    task: Task | None = None,
    candidate: Candidate | None = None,
    gpu: str | None = None,
    status: str | None = None,
) -> QuerySet[Evaluation]:
    """Evaluations, newest claim first, narrowed by whichever arguments are given."""
    evaluations = Evaluation.objects.select_related("candidate", "task")
    if task is not None:
        evaluations = evaluations.filter(task=task)
    if candidate is not None:
        evaluations = evaluations.filter(candidate=candidate)
    if gpu is not None:
        evaluations = evaluations.filter(gpu=gpu)
    if status is not None:
        evaluations = evaluations.filter(status=status)
    return evaluations.order_by("-claimed_at", "-id")
