"""Writes for the gate's side of the database: tasks, candidates, evaluations.

An evaluation is claimed, run, then completed, each step its own short transaction, so
that other workers see the claim while the (minutes-long) evaluation runs. Celery may
deliver a message twice and two users may ask for the same kernel at once: the unique
key (candidate, task, harness version, GPU, settings key, evaluator) and conditional
updates make sure the work is done once and each row written once. The settings key (how
the verdict was measured: GateOptions.identity()) is part of the key, so a verdict
measured with one seed and no profile is never served to a caller that asks for the
standard gate. So is the evaluator's identity (Evaluator.identity(): "gate", or a
recording's content hash): an evaluator's own failure ("no recorded verdict", no nvcc, a
crashed worker) is a "failed" row without a verdict, under that evaluator only, never
the kernel's verdict for another (issue 35).

The gate's seeds are not the users' to choose or know: a run's come from the server's
secret (gate_secret, profiling.harness.seeds), a single evaluation's from the worker's
own random draw. The verdict records them for the operator (Verdict.seeds, kept in the
row's verdict); profiling.serialization.verdict_for_users takes them out of whatever
users see.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
from datetime import datetime, timedelta
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from profiling import selectors
from profiling.evaluators import Evaluator, EvaluatorError, evaluator_identity, get_evaluator
from profiling.harness import HARNESS_VERSION, declared
from profiling.harness.candidate import Candidate as HarnessCandidate
from profiling.harness.gate import GateOptions
from profiling.harness.spec import Task as TaskSpec
from profiling.harness.verdict import ERROR, INCOMPLETE, PASSED, REJECTED, Verdict
from profiling.leases import evaluation_heartbeat, lease_expiry
from profiling.models import Candidate, DeclaredTask, Evaluation, Task
from profiling.serialization import json_safe, settings_key

logger = logging.getLogger(__name__)

Status = Evaluation.Status
_VERDICT_STATUSES = {
    PASSED: Status.PASSED,
    REJECTED: Status.REJECTED,
    INCOMPLETE: Status.INCOMPLETE,
    # The harness failed (its bug or the host's): no judgement of the kernel, so the row
    # is "failed" like any evaluator failure, keeps the verdict for its evidence, and may
    # be tried again.
    ERROR: Status.FAILED,
}


# The label the default gate secret is derived from SECRET_KEY under: another label, another
# secret, so knowing gate seeds (the operator's verdicts) tells nothing of Django's key.
GATE_SECRET_LABEL = b"optiml-studio: gate correctness seeds, v1"


def gate_secret() -> bytes:
    """The server's secret that gate seeds are derived from (profiling.harness.seeds).

    settings.OPTIML_GATE_SECRET when set (the environment's OPTIML_GATE_SECRET, or the
    file OPTIML_GATE_SECRET_FILE names); otherwise an HMAC of Django's SECRET_KEY under
    GATE_SECRET_LABEL, so the embedded default has one too. Changing it changes every
    run's seed from then on (a run's cached inputs are then built again), nothing else.
    """
    configured = getattr(settings, "OPTIML_GATE_SECRET", None)
    if configured:
        return configured.encode() if isinstance(configured, str) else bytes(configured)
    if not settings.SECRET_KEY:
        raise ImproperlyConfigured("gate seeds need OPTIML_GATE_SECRET or a SECRET_KEY to derive one from")
    return hmac.new(settings.SECRET_KEY.encode(), GATE_SECRET_LABEL, hashlib.sha256).digest()


def standard_gate_options(*, like: GateOptions) -> GateOptions:
    """The standard gate (GateOptions()) with `like`'s time limit and work folder, which
    do not change what is measured; a fresh random seed."""
    return GateOptions(time_limit_s=like.time_limit_s, workdir=like.workdir)


@transaction.atomic
def tasks_sync() -> list[Task]:
    """Upsert a Task row (and its naive Candidate) for every task the harness knows."""
    from profiling.harness import tasks as task_registry

    return [task_upsert(spec=spec) for spec in task_registry.all_tasks()]


@transaction.atomic
def task_upsert(*, spec: TaskSpec) -> Task:
    naive = None  # a declared task has no naive kernel (its source is empty): no baseline
    if spec.naive_source:
        naive = candidate_get_or_create(
            source=spec.naive_source, plan=spec.naive_plan, label=f"{spec.name}: naive"
        )
    task, _ = Task.objects.update_or_create(
        name=spec.name,
        defaults={
            "description": spec.description,
            "sizes": dict(spec.sizes),
            "vendor_ms": spec.vendor.time_ms if spec.vendor else None,
            "vendor_what": spec.vendor.what if spec.vendor else "",
            "flops": float(spec.flops(spec.sizes)),
            "bytes": float(spec.bytes(spec.sizes)),
            "naive_candidate": naive,
        },
    )
    return task


def task_get_or_sync(*, name: str) -> Task:
    """The Task row; copied from the harness registry first if this database lacks it.

    Raises profiling.harness.tasks.UnknownTask for a name the harness does not know.
    """
    task = Task.objects.filter(name=name).first()
    if task is not None:
        return task
    return task_upsert(spec=task_spec(name=name))


def task_floor_ms(*, task: Task, gpu: str = "NVIDIA H200") -> float | None:
    """The physics floor of the task at its timed sizes on `gpu` (its datasheet
    ceilings): the least time any correct kernel could take. None when the task or the
    GPU's ceilings are unknown.

    Worked out once per version of the task in this process (a run's page asks at every
    poll): the key holds the row's `updated`, which every save of the task moves on
    (task_upsert: tasks_sync, a declared task's creation), so a task defined again is
    worked out again."""
    return _floor_ms(task.name, task.updated, gpu or "NVIDIA H200")


@lru_cache(maxsize=1024)  # a few dozen tasks, each with a version or two per process
def _floor_ms(name: str, version: datetime, gpu: str) -> float | None:
    from profiling.harness.ceilings import ceilings_for, physics_floor_ms
    from profiling.harness.tasks import UnknownTask

    ceilings = ceilings_for(gpu)
    try:
        spec = task_spec(name=name)
    except UnknownTask:
        return None
    if ceilings is None:
        return None
    floor_ms, _ = physics_floor_ms(float(spec.bytes(spec.sizes)), float(spec.flops(spec.sizes)), spec.math,
                                   ceilings)
    return floor_ms


def task_spec(*, name: str) -> TaskSpec:
    """The harness's task by name, a declared one included even where its file was never
    written (a worker on another host). Raises UnknownTask for a name nobody knows."""
    from profiling.harness import tasks as task_registry

    declared_task_file_ensure(name=name)
    return task_registry.get(name)


def declared_task_file_ensure(*, name: str) -> None:
    """Write a declared task's file from its row if this host lacks it (a no-op else)."""
    if not declared.is_declared_name(name):
        return
    row = DeclaredTask.objects.filter(name=name).only("definition").first()
    if row is not None:
        declared.write_definition(row.definition, settings.OPTIML_TASK_DIR)


@transaction.atomic
def declared_task_create(*, definition: dict, owner, team=None) -> DeclaredTask:
    """Validate a task definition through the harness (its reference run at every small
    size), store it, and write its file where the harness looks. Raises
    declared.DefinitionError, whose `field` names the input at fault.

    The task is named for its owner (user-<slug>.<owner's id>): a name already taken can
    only be one of the owner's own, so declaring says nothing of other people's tasks."""
    definition = {**definition, "name": declared.owned_name(definition.get("name"), owner.pk)}
    canonical, spec = declared.declare(definition)
    taken = declared.DefinitionError("name", f"you have a task named {spec.name!r} already: "
                                             "pick another name")
    if DeclaredTask.objects.filter(name=spec.name).exists():
        raise taken
    try:
        with transaction.atomic():  # a savepoint: losing a race leaves this transaction usable
            row = DeclaredTask.objects.create(name=spec.name, definition=canonical, owner=owner, team=team)
    except IntegrityError:
        raise taken from None
    task_upsert(spec=spec)
    # Last: if writing fails, the row goes with the transaction. A file left behind by a
    # transaction that failed later holds this same definition, or write_definition
    # refuses to replace it.
    declared.write_definition(canonical, settings.OPTIML_TASK_DIR)
    return row


@transaction.atomic
def candidate_get_or_create(*, source: str, plan: dict, label: str = "") -> Candidate:
    """The stored candidate with this source and plan. Raises CandidateError if malformed."""
    parsed = HarnessCandidate.from_source_and_plan(source, plan)
    candidate, created = Candidate.objects.get_or_create(
        content_hash=parsed.content_hash(),
        defaults={"source": parsed.source, "plan": parsed.plan_dict(), "label": label},
    )
    if not created and label and not candidate.label:
        candidate.label = label
        candidate.save(update_fields=["label"])
    return candidate


def candidates_get_or_create(*, candidates: list[HarnessCandidate]) -> dict[str, Candidate]:
    """The stored rows of these (parsed) candidates by content hash, made where missing:
    two queries however many (a search step stores its new nodes' kernels this way)."""
    if not candidates:
        return {}
    Candidate.objects.bulk_create(
        [Candidate(content_hash=c.content_hash(), source=c.source, plan=c.plan_dict()) for c in candidates],
        ignore_conflicts=True)  # another worker may have stored some meanwhile: theirs stay
    hashes = {c.content_hash() for c in candidates}
    return {row.content_hash: row for row in Candidate.objects.filter(content_hash__in=hashes)}


@transaction.atomic
def evaluation_claim(
    *, candidate: Candidate, task: Task, gpu: str, gate_settings: dict, stale_after: timedelta | None = None,
    evaluator: str = "gate",
) -> Evaluation | None:
    """Take the right to evaluate with these gate settings (GateOptions.identity()) by this
    evaluator (its identity()): a new "running" row, or None if another process has it.

    A "running" row whose lease ran out (its worker stopped renewing it: profiling/leases.py),
    or claimed longer than `stale_after` ago, belongs to a worker that died; a failure
    marked retryable may be tried again. Both are reclaimed with a conditional update whose
    count says whether we, or a process racing us, got there first. The reclaim's new
    `claimed_at` is the claim's token, so the dead worker's late result is dropped.
    """
    if stale_after is None:
        stale_after = _stale_after(GateOptions())
    now = timezone.now()
    key = {"candidate": candidate, "task": task, "harness_version": HARNESS_VERSION, "gpu": gpu,
           "settings_key": settings_key(gate_settings), "evaluator": evaluator}
    try:
        # A savepoint, so that losing the race leaves the outer transaction usable.
        with transaction.atomic():
            return Evaluation.objects.create(**key, settings=json_safe(gate_settings), status=Status.RUNNING,
                                             claimed_at=now, lease_expires_at=lease_expiry(now))
    except IntegrityError:
        pass
    abandoned = Q(status=Status.RUNNING) & (Q(lease_expires_at__lt=now) | Q(claimed_at__lt=now - stale_after))
    retryable = Q(status=Status.FAILED, retryable=True)
    reclaimed = (
        Evaluation.objects.filter(**key)
        .filter(abandoned | retryable)
        .update(
            status=Status.RUNNING,
            claimed_at=now,
            lease_expires_at=lease_expiry(now),
            finished_at=None,
            guard=None,
            message="",
            stage="",
            verdict=None,
            median_ms=None,
            spread_ms=None,
            source="",
            retryable=False,
        )
    )
    if reclaimed != 1:
        return None
    return Evaluation.objects.get(**key)


@transaction.atomic
def evaluation_complete(*, evaluation: Evaluation, verdict: Verdict, source: str) -> Evaluation:
    """Store the verdict on a claimed row, in one write."""
    timing = verdict.timing
    status = _VERDICT_STATUSES[verdict.status]
    return _evaluation_finish(
        evaluation,
        status=status,
        guard=verdict.guard,
        message=verdict.message,
        stage=verdict.stage,
        verdict=json_safe(verdict.to_dict()),
        median_ms=timing.median_ms if timing else None,
        spread_ms=timing.spread_ms if timing else None,
        source=source,
        retryable=status == Status.FAILED,
    )


@transaction.atomic
def evaluation_fail(*, evaluation: Evaluation, message: str, retryable: bool) -> Evaluation:
    """Record that no verdict could be had: a state, not a crash."""
    return _evaluation_finish(evaluation, status=Status.FAILED, message=message, retryable=retryable)


def _evaluation_finish(evaluation: Evaluation, **fields: object) -> Evaluation:
    # Only the holder of this claim may write: if the row was reclaimed as abandoned
    # meanwhile, the other worker's result stands and ours is dropped.
    written = Evaluation.objects.filter(
        pk=evaluation.pk, status=Status.RUNNING, claimed_at=evaluation.claimed_at
    ).update(finished_at=timezone.now(), lease_expires_at=None, **fields)
    if written != 1:
        logger.warning("evaluation %s was reclaimed by another worker; result dropped", evaluation.pk)
    return Evaluation.objects.get(pk=evaluation.pk)


def evaluation_run(
    *,
    task_name: str,
    candidate: Candidate,
    options: GateOptions,
    evaluator: Evaluator | None = None,
) -> Evaluation:
    """Claim, evaluate and complete; or the stored row if it is finished or being run.

    Deliberately not one transaction: the claim must commit before the evaluation starts
    so that a concurrent caller sees it and waits instead of repeating the work.
    Raises UnknownTask for a task the harness does not know.
    """
    evaluator = evaluator or get_evaluator()
    task = task_get_or_sync(name=task_name)
    declared_task_file_ensure(name=task_name)  # the gate looks the task up by name
    gpu = evaluator.gpu()
    asked = options.identity()
    key = {"candidate": candidate, "task": task, "gpu": gpu, "settings_key": settings_key(asked),
           "evaluator": evaluator_identity(evaluator)}
    existing = selectors.evaluation_for(**key)
    if existing is not None and existing.finished and not existing.retryable:
        return existing
    evaluation = evaluation_claim(candidate=candidate, task=task, gpu=gpu, gate_settings=asked,
                                  stale_after=_stale_after(options), evaluator=key["evaluator"])
    if evaluation is None:
        return selectors.evaluation_for(**key)
    try:
        with evaluation_heartbeat(evaluation):  # our lease lives while the gate runs
            verdict, source = evaluator.evaluate(task_name, candidate.to_harness(), options)
    except EvaluatorError as error:
        return evaluation_fail(evaluation=evaluation, message=str(error), retryable=not error.permanent)
    except Exception as error:
        # The evaluator itself broke (our bug, or a tool missing on this host). Logged
        # with its traceback, recorded as a retryable failure so the row is not stuck.
        logger.exception("evaluator failed on candidate %s", candidate.content_hash)
        message = f"evaluator error: {type(error).__name__}: {error}"
        return evaluation_fail(evaluation=evaluation, message=message, retryable=True)
    if not verdict.settings:
        # An evaluator that does not say how it measured (a recording made before verdicts
        # said so) answers for the settings it was asked for: its contract.
        verdict = dataclasses.replace(verdict, settings=asked)
    problem = _verdict_problem(verdict, task=task, candidate=candidate)
    if problem:
        return evaluation_fail(evaluation=evaluation, message=problem, retryable=False)
    if settings_key(verdict.settings) != key["settings_key"]:
        return _evaluation_measured_otherwise(claim=evaluation, verdict=verdict, source=source, asked=asked)
    return evaluation_complete(evaluation=evaluation, verdict=verdict, source=source)


def _evaluation_measured_otherwise(*, claim: Evaluation, verdict: Verdict, source: str,
                                   asked: dict) -> Evaluation:
    """The evaluator measured with other settings than asked: this host lacks a tool the
    asked settings name (compute-sanitizer), or a recording was made with other ones. The
    verdict is real, so it is stored under the settings it was measured with and returned
    (the caller's kernel has a verdict, which says how it was measured); the asked
    settings' claim ends as a retryable failure that says why, so this verdict never
    answers for them and a host that can measure them still may."""
    row = evaluation_claim(candidate=claim.candidate, task=claim.task, gpu=claim.gpu,
                           gate_settings=verdict.settings, evaluator=claim.evaluator)
    if row is not None:
        stored = evaluation_complete(evaluation=row, verdict=verdict, source=source)
    else:  # measured or being measured with those settings already: that row stands
        stored = selectors.evaluation_for(candidate=claim.candidate, task=claim.task, gpu=claim.gpu,
                                          settings_key=settings_key(verdict.settings),
                                          evaluator=claim.evaluator)
    measured = verdict.settings
    differ = sorted(name for name in {*measured, *asked} if measured.get(name) != asked.get(name))
    evaluation_fail(evaluation=claim, retryable=True, message=(
        f"measured with other gate settings than asked ({', '.join(differ)}): stored as evaluation "
        f"{stored.pk} under those, never as this one"))
    return stored


def evaluation_run_naive(
    *, task_name: str, options: GateOptions, evaluator: Evaluator | None = None
) -> Evaluation | None:
    """Evaluate the task's own naive kernel, the baseline for speedups (None if it has
    none), always with the standard gate, profile included, whatever `options` weaken:
    the baseline is shared with every later caller, and a run starting from the naive
    kernel reuses it as its root, which needs the profile's metrics. `options` lend only
    their time limit and work folder."""
    task = task_get_or_sync(name=task_name)
    if task.naive_candidate is None:
        return None
    return evaluation_run(task_name=task_name, candidate=task.naive_candidate,
                          options=standard_gate_options(like=options), evaluator=evaluator)


def _stale_after(options: GateOptions) -> timedelta:
    """How long a claim may go unfinished before its worker is taken to be dead."""
    return timedelta(seconds=options.time_limit_s + settings.OPTIML_CLAIM_GRACE_S)


def _verdict_problem(verdict: Verdict, *, task: Task, candidate: Candidate) -> str:
    if verdict.status not in _VERDICT_STATUSES:
        return f"evaluator returned an unknown verdict status {verdict.status!r}"
    if verdict.task != task.name or verdict.candidate_hash != candidate.content_hash:
        return (
            f"evaluator returned a verdict for {verdict.task!r} / {verdict.candidate_hash[:12]}, "
            f"not for {task.name!r} / {candidate.content_hash[:12]}"
        )
    return ""
