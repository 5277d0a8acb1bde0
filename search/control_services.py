"""A run's status once it exists: pause, resume and stop (by a person), a new driver
chain for a run whose chain was lost (the beat), and a run whose driving broke (the
worker). Each moves the run's drive token, so that a step still under way ends its chain;
the run's creation and its steps are search.services'."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from search.models import Run, RunNode
from search.services import RunError, _append


@transaction.atomic
def run_set_status(*, run_id: int, status: str, by=None) -> Run:
    """Pause, resume or stop (`by`: the user who asked, named in the run's message). A
    finished or failed run stays as it is."""
    allowed = {Run.Status.PAUSED: {Run.Status.RUNNING}, Run.Status.RUNNING: {Run.Status.PAUSED},
               Run.Status.STOPPED: {Run.Status.RUNNING, Run.Status.PAUSED}}
    run = Run.objects.select_for_update().get(pk=run_id)
    if status not in allowed or run.status not in allowed[status]:
        raise RunError(f"a {run.status} run cannot become {status}")
    if status == Run.Status.RUNNING:
        # Evaluations handed out before the pause and not measured (a GPU worker skips the
        # node of a run that is not running) are handed out again.
        RunNode.objects.filter(run=run, state="pending", result__isnull=True).update(
            issued_at=None, started_at=None, worker="", lease_expires_at=None)
    run.status = status
    run.message = _status_message(run, status, by)
    run.queued_since = None  # paused or stopped, it waits for nobody; resumed, its next step looks
    run.drive_token += 1  # whatever message is queued or running now cannot go on
    _append(run, "run_status", {"status": status, "message": run.message, "queued_since": None})
    run.save()
    return run


def _status_message(run: Run, status: str, by) -> str:
    who = f" by {by.username}" if getattr(by, "username", None) else ""
    if status == Run.Status.PAUSED:
        return f"paused{who} after {run.evaluated} of {run.budget} evaluations"
    if status == Run.Status.STOPPED:
        return f"stopped{who} after {run.evaluated} of {run.budget} evaluations"
    return ""


CONTROLS = {"pause": Run.Status.PAUSED, "resume": Run.Status.RUNNING, "stop": Run.Status.STOPPED}


@transaction.atomic
def run_control(*, run_id: int, action: str, user=None) -> Run:
    """pause, resume or stop. A resumed run starts one new driver chain on the GPU queue;
    the status change moved the drive token, so a step still under way ends its old one."""
    from search.tasks import drive_run_enqueue

    if action not in CONTROLS:
        raise RunError(f"unknown action {action!r}: use pause, resume or stop")
    run = run_set_status(run_id=run_id, status=CONTROLS[action], by=user)
    if run.status == Run.Status.RUNNING:
        drive_run_enqueue(run_id=run.pk, token=run.drive_token)
    return run


def run_restart_stalled(*, older_than_s: float) -> list[int]:
    """Start a new driver chain for each running run with budget left whose row has not
    changed for `older_than_s` (its chain was lost). Moving the token first means that
    were the old chain alive after all, its next hand-on finds the token changed and
    ends: a run still has one driver. Returns the ids restarted."""
    from search.tasks import drive_run_enqueue

    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    restarted = []
    for run_id in Run.objects.filter(status=Run.Status.RUNNING, updated__lt=cutoff,
                                     evaluated__lt=F("budget")).values_list("pk", flat=True):
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=run_id)
            if run.status != Run.Status.RUNNING or run.updated >= cutoff:
                continue  # it moved while we looked
            run.drive_token += 1
            run.save(update_fields=["drive_token", "updated"])
            drive_run_enqueue(run_id=run.pk, token=run.drive_token)
            restarted.append(run.pk)
    return restarted


@transaction.atomic
def run_fail(*, run_id: int, message: str) -> Run | None:
    """Record that driving a run broke: a state people can see, not a lost traceback."""
    run = Run.objects.select_for_update().filter(pk=run_id).first()
    if run is None or run.status not in (Run.Status.RUNNING, Run.Status.PAUSED):
        return run
    run.status, run.message, run.queued_since = Run.Status.FAILED, message, None
    run.drive_token += 1
    _append(run, "run_status", {"status": Run.Status.FAILED, "message": message, "queued_since": None})
    run.save()
    return run
