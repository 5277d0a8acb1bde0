"""Writes of the lineage app: storing a walked or imported lineage as rows, in one go."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from lineage.engine.walker import Lineage as LineageData
from lineage.models import Lineage, LineageState, RejectedAttempt, Transition
from profiling import services as gate_services
from profiling.harness.tasks import UnknownTask
from profiling.serialization import json_safe


class LineageImportError(ValueError):
    """A lineage file that cannot be stored; the message says why."""


def lineage_parse(data: Any) -> LineageData:
    """The engine's lineage from JSON data, or LineageImportError naming the problem."""
    if not isinstance(data, dict):
        raise LineageImportError("a lineage is a JSON object (python -m lineage.engine walk --json)")
    try:
        return LineageData.from_dict(data)
    except (TypeError, ValueError, KeyError) as error:
        raise LineageImportError(f"not a lineage: {error}") from None


@transaction.atomic
def lineage_store(*, lineage: LineageData, origin: str) -> Lineage:
    """Every state, transition and rejected attempt of `lineage`, or nothing."""
    try:
        task = gate_services.task_get_or_sync(name=lineage.task)
    except UnknownTask as error:
        raise LineageImportError(f"unknown task {lineage.task!r}") from error
    replayed = any(s.measurement.get("replayed") for s in lineage.states.values())
    row = Lineage.objects.create(task=task, expert=lineage.expert, gpu=lineage.gpu, origin=origin,
                                 replayed=replayed, complete=lineage.complete,
                                 stopped=lineage.stopped[:300],
                                 seconds=lineage.seconds, data=json_safe(lineage.to_dict()))
    LineageState.objects.bulk_create(
        LineageState(lineage=row, key=key, flags=s.flags, candidate_hash=s.candidate_hash,
                     status=s.measurement.get("status", ""), guard=s.measurement.get("guard") or "",
                     time_ms=s.measurement.get("time_ms"), measurement=json_safe(s.measurement))
        for key, s in lineage.states.items())
    Transition.objects.bulk_create(
        Transition(lineage=row, intent=t.intent, flag=t.flag, before=t.before, after=t.after,
                   before_ms=t.before_ms, after_ms=t.after_ms, speedup=t.speedup,
                   metric_deltas=json_safe(t.metric_deltas), source_diff=t.source_diff,
                   plan_diff=t.plan_diff,
                   diagnosis_before=json_safe(t.diagnosis_before), proposer=t.proposer[:200])
        for t in lineage.transitions)
    RejectedAttempt.objects.bulk_create(
        RejectedAttempt(lineage=row, flag=r.flag, start=r.start, state=r.state, guard=r.guard or "",
                        message=r.message, precondition=r.precondition, proposer=r.proposer[:200])
        for r in lineage.rejected)
    return row
