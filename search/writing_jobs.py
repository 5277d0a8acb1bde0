"""Writing a first kernel from an intent, as a job: the writes (services) and reads
(selectors) of WritingJob rows.

A web request only checks what it can check at once (the intent, the task, that somebody
is configured to write) and stores a queued job; a CPU worker runs the writers
(search.tasks.write_kernel -> writing_job_run), which takes LLM latency times repair
rounds plus nvcc. The row is the truth: whoever polls the job reads its status, the
attempts stored so far (each as it is checked) and, once done, the kernel. A job whose
worker died is failed once it has not moved for OPTIML_WRITING_STALE_S, by the beat
(search.fail_stale_writing_jobs) or by the next read of it, whichever comes first.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from search import generation_services
from search.generation.loop import Checker
from search.models import GenerationAttempt, WritingJob
from search.services import RunError

logger = logging.getLogger(__name__)


def writing_job_create(*, task_name: str, intent: str, user=None) -> WritingJob:
    """Queue a writing job (its Celery message goes out once the row is committed).
    Raises what generation_services.writers_check raises: RunError on the intent field,
    UnknownTask. Nobody is called before the job runs."""
    from search.tasks import write_kernel_enqueue  # the Celery task imports this module

    generation_services.writers_check(task_name=task_name, intent=intent)
    with transaction.atomic():
        job = WritingJob.objects.create(task=task_name, intent=intent.strip(),
                                        created_by=user if getattr(user, "is_authenticated", False) else None)
        write_kernel_enqueue(job_id=job.pk)
    return job


def _claim(job_id: int) -> WritingJob | None:
    # A conditional update: of two deliveries of one message, one runs it.
    claimed = WritingJob.objects.filter(pk=job_id, status=WritingJob.Status.QUEUED).update(
        status=WritingJob.Status.RUNNING, updated=timezone.now())
    return WritingJob.objects.select_related("created_by").get(pk=job_id) if claimed else None


def writing_job_run(*, job_id: int, checker: Checker | None = None) -> WritingJob | None:
    """Run a queued job: claim it, have the writers write (every attempt stored as it is
    checked, each one the job's heartbeat), and end it done with the kernel or failed with
    the reason. None when another delivery has it, or it ended (or went stale) already."""
    job = _claim(job_id)
    if job is None:
        return None

    def heartbeat() -> None:
        WritingJob.objects.filter(pk=job_id, status=WritingJob.Status.RUNNING).update(updated=timezone.now())

    try:
        proposal, _ = generation_services.kernel_generate(
            task_name=job.task, intent=job.intent, user=job.created_by, checker=checker,
            generation_id=job.generation, on_attempt=heartbeat)
    except RunError as error:
        _end(job_id, WritingJob.Status.FAILED, message=str(error))
    except Exception as error:  # the job's outcome, never only a traceback in a worker's log
        logger.exception("writing job %s failed", job_id)
        _end(job_id, WritingJob.Status.FAILED, message=f"{type(error).__name__}: {error}"[:2000])
    else:
        _end(job_id, WritingJob.Status.DONE, written={
            "source": proposal.candidate.source, "plan": proposal.candidate.plan_dict(),
            "title": proposal.title, "rationale": proposal.rationale, "writer": proposal.source,
            "experts": proposal.params.get("experts", []), "attempts": proposal.params.get("attempts", [])})
    return WritingJob.objects.get(pk=job_id)


def _end(job_id: int, status: str, *, message: str = "", written: dict | None = None) -> None:
    # Only a job still running ends here: one failed as stale meanwhile stays failed.
    WritingJob.objects.filter(pk=job_id, status=WritingJob.Status.RUNNING).update(
        status=status, message=message, written=written, updated=timezone.now(), finished=timezone.now())


def writing_jobs_expire(*, stale_after_s: float, job_id: int | None = None) -> list[int]:
    """Fail the queued or running jobs (all, or `job_id`) that have not moved for
    `stale_after_s`: their worker died, or none took them. Their attempts stay. Returns
    the ids failed."""
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    stale = WritingJob.objects.filter(status__in=(WritingJob.Status.QUEUED, WritingJob.Status.RUNNING),
                                      updated__lt=cutoff)
    if job_id is not None:
        stale = stale.filter(pk=job_id)
    failed = []
    for pk, status in stale.values_list("pk", "status"):
        said = ("its worker stopped" if status == WritingJob.Status.RUNNING else "no worker took it")
        message = (f"the job was given up: {said} (nothing moved for {stale_after_s:.0f} s, "
                   "OPTIML_WRITING_STALE_S); the attempts so far are kept: write it again")
        # Conditional again: a job that moved or ended while we looked is left alone.
        if WritingJob.objects.filter(pk=pk, status=status, updated__lt=cutoff).update(
                status=WritingJob.Status.FAILED, message=message, finished=timezone.now()):
            failed.append(pk)
    return failed


# -- reads -------------------------------------------------------------------------------


def writing_job_visible(*, user, job_id: int) -> WritingJob | None:
    """The job, when `user` made it; None otherwise (as if it did not exist)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return WritingJob.objects.filter(pk=job_id, created_by=user).first()


def writing_job_attempts(*, job: WritingJob) -> QuerySet[GenerationAttempt]:
    """The attempts stored so far, in the order they were made."""
    return GenerationAttempt.objects.filter(generation=job.generation).order_by("created", "round")
