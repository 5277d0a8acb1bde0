"""Writing a first kernel from an intent, as a job: the writes (services) and reads
(selectors) of WritingJob rows.

A web request only checks what it can check at once (the intent, the task, that somebody
is configured to write) and stores a queued job; a CPU worker runs the writers
(search.tasks.write_kernel -> writing_job_run), which takes LLM latency times repair
rounds plus nvcc. The row is the truth: whoever polls the job reads its status, the
attempts stored so far (each as it is checked) and, once done, the kernel.

A worker may die while it writes (SIGKILL, the OOM killer, a host lost). While the
writers work, a heartbeat (profiling.leases.Heartbeat, as evaluations and run nodes
have) moves the job's `updated` every OPTIML_WRITING_HEARTBEAT_S, and each attempt moves
it too; a running job that missed ORPHAN_HEARTBEATS of them lost its worker, and the beat
queues it again with a new message (writing_jobs_resume), for another worker to write
from the start; the attempts of the lost try stay. A job is claimed at most MAX_TRIES
times. Each claim counts in `tries`, and only the latest claim's worker beats, stores the
outcome and ends the job. A queued or running job that has not moved for OPTIML_WRITING_STALE_S is
failed (no worker took it, or the beat did not run), by the beat or the next read.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from profiling.harness.candidate import Candidate
from profiling.leases import Heartbeat
from search import generation_services
from search.engine.types import Proposal
from search.generation.loop import Checker
from search.models import GenerationAttempt, WritingJob
from search.services import RunError

logger = logging.getLogger(__name__)

# A running job that has not moved for this many heartbeats lost its worker.
ORPHAN_HEARTBEATS = 6
# Claims of one job before it is failed: a job that kills its worker every time (a writer
# that eats the host's memory, say) is not handed to every worker in turn.
MAX_TRIES = 3


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
    # A conditional update: of two deliveries of one message, one runs it. Each claim
    # counts, and the count is the claim's token (beats and the outcome check it).
    claimed = WritingJob.objects.filter(pk=job_id, status=WritingJob.Status.QUEUED).update(
        status=WritingJob.Status.RUNNING, tries=F("tries") + 1, updated=timezone.now())
    return WritingJob.objects.select_related("created_by").get(pk=job_id) if claimed else None


def _mine(job_id: int, tries: int):
    """The job while this claim runs it: running, and not claimed again since."""
    return WritingJob.objects.filter(pk=job_id, status=WritingJob.Status.RUNNING, tries=tries)


def writing_job_renew(*, job_id: int, tries: int) -> bool:
    """Move the job's `updated` on (its heartbeat); False once the claim is not ours
    (ended, failed as stale, or claimed again: `tries` is the claim's token)."""
    return bool(_mine(job_id, tries).update(updated=timezone.now()))


def writing_job_heartbeat(*, job_id: int, tries: int) -> Heartbeat:
    """The heartbeat of our claim while the writers work (an LLM call and nvcc may each
    take minutes without a word), every OPTIML_WRITING_HEARTBEAT_S: a job whose updates
    stop has lost its worker. profiling.leases.Heartbeat, as evaluations and nodes beat."""
    return Heartbeat(f"writing job {job_id}", lambda: writing_job_renew(job_id=job_id, tries=tries),
                     every_s=settings.OPTIML_WRITING_HEARTBEAT_S)


def writing_job_run(*, job_id: int, checker: Checker | None = None) -> WritingJob | None:
    """Run a queued job: claim it, have the writers write (every attempt stored as it is
    checked, and the job's heartbeat beside them), and end it done with the kernel or
    failed with the reason. None when another delivery has it, or it ended (or went
    stale) already."""
    job = _claim(job_id)
    if job is None:
        return None
    tries = job.tries
    try:
        with writing_job_heartbeat(job_id=job_id, tries=tries):
            proposal, _ = generation_services.kernel_generate(
                task_name=job.task, intent=job.intent, user=job.created_by, checker=checker,
                generation_id=job.generation,
                on_attempt=lambda: writing_job_renew(job_id=job_id, tries=tries))
    except RunError as error:
        _end(job_id, tries, WritingJob.Status.FAILED, message=str(error))
    except Exception as error:  # the job's outcome, never only a traceback in a worker's log
        logger.exception("writing job %s failed", job_id)
        _end(job_id, tries, WritingJob.Status.FAILED, message=f"{type(error).__name__}: {error}"[:2000])
    else:
        _end(job_id, tries, WritingJob.Status.DONE, written={
            "source": proposal.candidate.source, "plan": proposal.candidate.plan_dict(),
            "title": proposal.title, "rationale": proposal.rationale, "writer": proposal.source,
            "experts": proposal.params.get("experts", []), "attempts": proposal.params.get("attempts", [])})
    return WritingJob.objects.get(pk=job_id)


def _end(job_id: int, tries: int, status: str, *, message: str = "", written: dict | None = None) -> None:
    # Only the latest claim ends a job still running: one failed as stale meanwhile stays
    # failed, and one queued again (its worker given up for dead) is the new claim's.
    _mine(job_id, tries).update(status=status, message=message, written=written, updated=timezone.now(),
                                finished=timezone.now())


def writing_jobs_resume(*, heartbeat_s: float) -> tuple[list[int], list[int]]:
    """Queue again the running jobs that missed ORPHAN_HEARTBEATS heartbeats (their worker
    died), each with a new message; fail those claimed MAX_TRIES times already. Returns
    (queued again, failed)."""
    from search.tasks import write_kernel_enqueue  # the Celery task imports this module

    cutoff = timezone.now() - timedelta(seconds=ORPHAN_HEARTBEATS * heartbeat_s)
    resumed, failed = [], []
    orphans = WritingJob.objects.filter(status=WritingJob.Status.RUNNING, updated__lt=cutoff)
    for pk, tries in orphans.values_list("pk", "tries"):
        lost = WritingJob.objects.filter(pk=pk, status=WritingJob.Status.RUNNING, tries=tries,
                                         updated__lt=cutoff)
        if tries >= MAX_TRIES:
            message = (f"the job was given up: its worker stopped {tries} times while it wrote; "
                       "the attempts so far are kept: write it again")
            if lost.update(status=WritingJob.Status.FAILED, message=message, finished=timezone.now()):
                failed.append(pk)
            continue
        with transaction.atomic():
            # Conditional: a job that beat, ended or was queued again meanwhile is left alone.
            if lost.update(status=WritingJob.Status.QUEUED, updated=timezone.now()):
                write_kernel_enqueue(job_id=pk)
                resumed.append(pk)
    return resumed, failed


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


def writing_job_for_run(*, user, job_id: int, task_name: str) -> WritingJob:
    """The writing job a new run starts from (POST /api/runs/ `writing_job`): `user`'s
    own, done, of the run's task. RunError on the writing_job field otherwise."""
    job = writing_job_visible(user=user, job_id=job_id)
    if job is None:
        raise RunError(f"no writing job {job_id} of yours", field="writing_job")
    if job.status != WritingJob.Status.DONE or not job.written:
        raise RunError(f"writing job {job_id} has not written a kernel ({job.status})", field="writing_job")
    if job.task != task_name:
        raise RunError(f"writing job {job_id} wrote a kernel for {job.task}, not {task_name}",
                       field="writing_job")
    return job


def written_proposal(*, job: WritingJob) -> Proposal:
    """The done job's kernel as the search's root proposal: the root node then names its
    writer, the experts and the rounds, as a run the command line starts from an intent."""
    written = job.written or {}
    attempts = [a for a in written.get("attempts") or [] if isinstance(a, dict)]
    return Proposal(
        source=str(written.get("writer") or "written"), title=str(written.get("title") or ""),
        rationale=str(written.get("rationale") or ""),
        candidate=Candidate.from_source_and_plan(written["source"], written["plan"]),
        params={"intent": job.intent, "experts": list(written.get("experts") or []),
                "generation": str(job.generation), "writing_job": job.pk,
                "rounds": attempts[-1].get("round", 0) if attempts else 0, "attempts": attempts})


# -- reads -------------------------------------------------------------------------------


def writing_job_visible(*, user, job_id: int) -> WritingJob | None:
    """The job, when `user` made it; None otherwise (as if it did not exist)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return WritingJob.objects.filter(pk=job_id, created_by=user).first()


def writing_job_attempts(*, job: WritingJob) -> QuerySet[GenerationAttempt]:
    """The attempts stored so far, in the order they were made."""
    return GenerationAttempt.objects.filter(generation=job.generation).order_by("created", "round")
