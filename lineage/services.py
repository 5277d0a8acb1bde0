"""Writes of the lineage app: storing a walked or imported lineage as rows, in one go, and
walks queued for a GPU worker."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from lineage.engine import experts
from lineage.engine.walker import Lineage as LineageData
from lineage.engine.walker import walk
from lineage.models import (
    Lineage,
    LineageState,
    RejectedAttempt,
    SkillCard,
    SkillCardVersion,
    SkillComment,
    SkillReview,
    Transition,
    WalkRequest,
)
from profiling import services as gate_services
from profiling.harness.tasks import UnknownTask
from profiling.serialization import json_safe

logger = logging.getLogger(__name__)

MAX_STATES_LIMIT = 512  # a queued walk's bound: the largest lattice (sgemm's 40) many times over
# How long a worker may hold a claim before another may take the walk over: the walk's
# own time limit (the walker's, per batch of states) plus the claim grace.
WALK_TIME_LIMIT_S = 3600.0


class LineageImportError(ValueError):
    """A lineage file that cannot be stored; the message says why."""


class WalkRequestError(ValueError):
    """A walk that cannot be queued; the message says why."""


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


def walk_request_create(*, task_name: str, max_states: int) -> WalkRequest:
    """Queue a walk of `task_name`'s expert for a GPU worker (after the commit)."""
    from lineage.tasks import walk_enqueue  # the Celery task imports this module

    if not 1 <= max_states <= MAX_STATES_LIMIT:
        raise WalkRequestError(f"--max-states must be between 1 and {MAX_STATES_LIMIT}")
    try:
        experts.load(task_name)
    except experts.ExpertError as error:
        raise WalkRequestError(f"no expert for {task_name!r}: {error}") from None
    try:
        task = gate_services.task_get_or_sync(name=task_name)
    except UnknownTask as error:
        raise WalkRequestError(f"unknown task {task_name!r}") from error
    with transaction.atomic():
        request = WalkRequest.objects.create(task=task, max_states=max_states)
        walk_enqueue(request_id=request.pk)
    return request


def _walk_claim(request_id: int, stale_after_s: float) -> WalkRequest | None:
    """The request, now running and ours; None when it is gone, done, failed, or held by
    a worker whose claim is still fresh."""
    with transaction.atomic():
        request = (WalkRequest.objects.select_for_update().select_related("task")
                   .filter(pk=request_id).first())
        if request is None or request.status in (WalkRequest.Status.DONE, WalkRequest.Status.FAILED):
            return None
        now = timezone.now()
        if (request.status == WalkRequest.Status.RUNNING and request.claimed_at
                and now - request.claimed_at < datetime.timedelta(seconds=stale_after_s)):
            return None
        request.status, request.claimed_at = WalkRequest.Status.RUNNING, now
        request.save(update_fields=["status", "claimed_at"])
        return request


def walk_request_run(*, request_id: int, evaluator_factory: Callable[[WalkRequest], Any],
                     stale_after_s: float = WALK_TIME_LIMIT_S) -> WalkRequest | None:
    """Run a queued walk: claim it, walk with the evaluator the factory builds (the gate on
    a GPU worker), store the lineage and mark it done, together. A failure marks it
    failed with the reason; nothing of the lineage is stored then."""
    request = _walk_claim(request_id, stale_after_s)
    if request is None:
        return None
    evaluator = None
    try:
        expert = experts.load(request.task.name)
        evaluator = evaluator_factory(request)
        lineage = walk(expert, evaluator, max_states=request.max_states, timeout_s=stale_after_s)
    except Exception as error:  # the walk's failure is the request's outcome, not a crash
        logger.exception("walk request %s failed", request_id)
        WalkRequest.objects.filter(pk=request_id).update(
            status=WalkRequest.Status.FAILED, error=f"{type(error).__name__}: {error}"[:2000],
            finished_at=timezone.now())
        return WalkRequest.objects.get(pk=request_id)
    finally:
        close = getattr(evaluator, "close", None)
        if close is not None:
            close()
    with transaction.atomic():
        row = lineage_store(lineage=lineage, origin=Lineage.Origin.WALK)
        WalkRequest.objects.filter(pk=request_id).update(
            status=WalkRequest.Status.DONE, lineage=row, finished_at=timezone.now())
    return WalkRequest.objects.get(pk=request_id)


@transaction.atomic
def cards_induce(*, probes: dict[str, list] | None = None,
                 lineage_ids: list[int] | None = None) -> list[SkillCard]:
    """Induce the skill cards from the stored lineages (all, or `lineage_ids`) into the
    default library, replacing cards of the same id; every card or none. (A team's
    library changes only by its own copies, imports and reviews.) `probes`: task -> the
    probes of its expert (lineage/engine/probes.py), for order preconditions and risks."""
    from lineage.engine import cards

    rows = list(Lineage.objects.select_related("task").filter(pk__in=lineage_ids)
                if lineage_ids else Lineage.objects.select_related("task"))
    parsed = [(row, LineageData.from_dict(row.data)) for row in rows]
    induced = [card.to_dict() for card in cards.induce([data for _, data in parsed], probes or {})]
    return cards_store(induced, parsed)


def cards_store(induced: list[dict], parsed: list[tuple[Lineage, LineageData]]) -> list[SkillCard]:
    """The induced cards (their dicts) into the default library, each linked to the stored
    lineages that took its intent; a card stored already keeps its roundtrip, and its
    text when the team edited it."""
    stored = []
    for card in induced:
        data = json_safe(card)
        old = SkillCard.objects.filter(team=None, card_id=card["id"]).values_list("data", flat=True).first()
        if old and "roundtrip" in old:
            data["roundtrip"] = old["roundtrip"]  # the trials stay with the card
        if old and SkillCardVersion.objects.filter(card__team=None, card__card_id=card["id"]).exists():
            data["sentence"], data["notes"] = old["sentence"], old.get("notes", "")  # the team's text stays
        row, _ = SkillCard.objects.update_or_create(
            team=None, card_id=card["id"], defaults={"intent": card["intent"], "data": data})
        card_changed(row)
        row.lineages.set([r for r, lineage in parsed
                          if any(t.intent == card["intent"] for t in lineage.transitions)])
        stored.append(row)
    return stored


DECIDED = (SkillCard.Status.APPROVED, SkillCard.Status.REJECTED, SkillCard.Status.RETIRED)


class AdmissionError(ValueError):
    """An admission file that cannot be applied; the message says why."""


@transaction.atomic
def cards_admit(*, admission: Any, team: Any = None) -> list[SkillCard]:
    """Set the stored cards' status from a roundtrip's admission (bench/cards_admission.py
    writes it; lineage/engine/admission.py decides), keeping the trials in the card's data;
    every card named or none. Cards the file does not name are left as they are, and a
    card a reviewer approved or rejected (or that was retired) keeps that status. `team`:
    the library whose cards the roundtrip tried (None: the default one). Viewers of each
    card's page hear of it once the whole admission commits."""
    if not isinstance(admission, dict) or not isinstance(admission.get("cards"), dict):
        raise AdmissionError("not an admission file: expected {\"cards\": {card id: {\"status\": ...}}}")
    allowed = {SkillCard.Status.INDUCED, SkillCard.Status.VERIFIED, SkillCard.Status.FAILED}
    rows = {row.card_id: row for row in SkillCard.objects.select_for_update()
            .filter(team=team, card_id__in=list(admission["cards"]))}
    missing = sorted(set(admission["cards"]) - set(rows))
    if missing:
        raise AdmissionError(f"no stored skill cards {missing} (manage.py lineage induce first)")
    for card_id, result in admission["cards"].items():
        if not isinstance(result, dict) or result.get("status") not in allowed:
            raise AdmissionError(f"{card_id}: status must be one of {sorted(allowed)}")
        row = rows[card_id]
        if row.status not in DECIDED:  # a reviewer's decision stays; the trials update
            row.status = result["status"]
        row.data = {**row.data, "roundtrip": json_safe({**result, "source": admission.get("source", "")})}
        row.save(update_fields=["status", "data", "updated_at"])
        card_changed(row, "roundtrip")
    return list(rows.values())


def card_changed(card: SkillCard, what: str = "card") -> None:
    """One more revision of the card (in this transaction), announced to the viewers of
    its page once it commits (lineage.live)."""
    from django.db.models import F

    from lineage import live

    SkillCard.objects.filter(pk=card.pk).update(revision=F("revision") + 1, last_change=what)
    live.card_changed_after_commit(card_pk=card.pk, what=what)


# -- the team's review of the skill library ------------------------------------------------


class SkillCardUnchanged(ValueError):
    """An edit whose text is the card's already: a sound request that the card's state
    refuses (the API's 409, not a 400)."""


class ReviewError(ValueError):
    """A review the card's state does not allow; the message says why (an HTTP 409)."""


MAX_COMMENT = 10_000


def _comment_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a comment is required: say why")
    if len(text) > MAX_COMMENT:
        raise ValueError(f"a comment is at most {MAX_COMMENT} characters")
    return text.strip()


REVIEWING_ROLES = ("admin", "reviewer")  # accounts.Membership.Role: who reviews a team's library


def skill_card_can_review(*, user: Any, team: Any = None) -> bool:
    """Who approves, rejects, edits and imports a library's cards (and copies the default
    library into a team): for the project's default library (`team` None) its admins
    (staff); for a team's, the team's admins and reviewers."""
    if not (user and user.is_authenticated):
        return False
    if team is None:
        return bool(user.is_staff)
    from accounts.selectors import team_role

    return team_role(user=user, team_id=getattr(team, "pk", team)) in REVIEWING_ROLES


def _card_locked(card_id: str, team: Any) -> SkillCard:
    card = SkillCard.objects.select_for_update().filter(team=team, card_id=card_id).first()
    if card is None:
        raise SkillCard.DoesNotExist(card_id)
    return card


def _roundtrip_reproduced(card: SkillCard) -> bool:
    """Whether the newest roundtrip reproduced the card's effect: its admission's status
    where one is kept, else whether the system verified it (now, or before a review)."""
    kept = (card.data.get("roundtrip") or {}).get("status")
    if kept:
        return kept == SkillCard.Status.VERIFIED
    return (card.status == SkillCard.Status.VERIFIED
            or card.reviews.filter(status_before=SkillCard.Status.VERIFIED).exists())


@transaction.atomic
def skill_card_review(*, card_id: str, reviewer: Any, decision: str, comment: Any,
                      team: Any = None) -> SkillReview:
    """Approve or reject a card, with the comment that says why. Only a card whose
    roundtrip reproduced its effect (verified by the system) can be approved; any card not
    already rejected or retired can be rejected. The card's status and the review change
    together, or neither."""
    if decision not in SkillReview.Decision.values:
        raise ValueError(f"decision must be one of {sorted(SkillReview.Decision.values)}")
    text = _comment_text(comment)
    card = _card_locked(card_id, team)
    before = card.status
    if decision == SkillReview.Decision.APPROVE:
        if before == SkillCard.Status.APPROVED:
            raise ReviewError(f"{card_id} is approved already")
        if not _roundtrip_reproduced(card):
            raise ReviewError(f"{card_id} is {before}: only a card whose roundtrip reproduced its "
                              "effect (verified) can be approved")
        after = SkillCard.Status.APPROVED
    else:
        if before in (SkillCard.Status.REJECTED, SkillCard.Status.RETIRED):
            raise ReviewError(f"{card_id} is {before} already")
        after = SkillCard.Status.REJECTED
    card.status = after
    card.save(update_fields=["status", "updated_at"])
    card_changed(card, "review")
    return SkillReview.objects.create(card=card, reviewer=reviewer, decision=decision, comment=text,
                                      status_before=before, status_after=after)


@transaction.atomic
def skill_comment_create(*, card_id: str, author: Any, text: Any, team: Any = None) -> SkillComment:
    body = _comment_text(text)
    card = _card_locked(card_id, team)
    card_changed(card, "comment")
    return SkillComment.objects.create(card=card, author=author, text=body)


MAX_SENTENCE = 500


def _card_text(card: SkillCard) -> dict[str, str]:
    return {"sentence": card.data.get("sentence", ""), "notes": card.data.get("notes", "")}


@transaction.atomic
def skill_card_edit(*, card_id: str, author: Any, sentence: str | None = None,
                    notes: str | None = None, team: Any = None) -> SkillCardVersion:
    """Edit a card's text (its sentence, the team's notes): a new version with its author
    and time, and the card's data holds it. The first edit keeps the induced text as
    version 1. Its code, evidence and status are not text: they do not change."""
    card = _card_locked(card_id, team)
    current = _card_text(card)
    new = {"sentence": current["sentence"] if sentence is None else sentence.strip(),
           "notes": current["notes"] if notes is None else notes.strip()}
    if not new["sentence"]:
        raise ValueError("a card needs its sentence")
    if len(new["sentence"]) > MAX_SENTENCE or len(new["notes"]) > MAX_COMMENT:
        raise ValueError(f"the sentence is at most {MAX_SENTENCE} characters, the notes {MAX_COMMENT}")
    if new == current:
        raise SkillCardUnchanged("the text is unchanged")
    last = card.versions.order_by("-number").first()
    if last is None:
        last = SkillCardVersion.objects.create(card=card, number=1, author=None, **current)
    version = SkillCardVersion.objects.create(card=card, number=last.number + 1, author=author, **new)
    card.data = {**card.data, **new}
    card.save(update_fields=["data", "updated_at"])
    card_changed(card, "edit")
    return version


@transaction.atomic
def skill_library_import(*, data: Any, importer: Any, team: Any = None) -> dict[str, list[str]]:
    """Import a library file (lineage/engine/library.py checks it first: every card or
    none). A card whose id is stored already is left as it is (skipped). A new card is
    stored as induced, whatever the file says: its roundtrip ran elsewhere, so it enters
    this library only by passing its roundtrip here. What the file said (its status and
    trials) is kept as evidence under data["imported"]. `team`: the library it goes into
    (None: the default one)."""
    from lineage.engine.library import parse_library

    cards = parse_library(data)
    stored = set(SkillCard.objects.filter(team=team, card_id__in=[c["card_id"] for c in cards])
                 .values_list("card_id", flat=True))
    created, skipped = [], []
    for card in cards:
        if card["card_id"] in stored:
            skipped.append(card["card_id"])
            continue
        body = {key: value for key, value in card["data"].items()
                if key not in ("roundtrip", "admission", "imported")}
        if body.get("kind") == "skeleton":  # its admission by transfer ran elsewhere too
            body["admission"] = {"status": "untried"}
        body["imported"] = json_safe({"status": card["status"], "roundtrip": card["data"].get("roundtrip"),
                                      "admission": card["data"].get("admission"),
                                      "by": getattr(importer, "username", ""),
                                      "at": timezone.now().isoformat(timespec="seconds")})
        SkillCard.objects.create(card_id=card["card_id"], intent=card["intent"], team=team,
                                 status=SkillCard.Status.INDUCED, data=body)
        created.append(card["card_id"])
    return {"created": created, "skipped": skipped}


@transaction.atomic
def skill_library_copy(*, team: Any, actor: Any, card_ids: list[str] | None = None) -> dict[str, list[str]]:
    """Copy the default library's cards (all, or `card_ids`) into `team`'s library. A card
    the team has already is skipped (its team's text, reviews and status stay). A copy
    keeps the card's data, lineages and current text (as its version 1) and what the
    system found of it (induced, verified or failed by its roundtrip), but not the
    project's review: the team reviews its own copy. Only the team's reviewers copy."""
    if not skill_card_can_review(user=actor, team=team):
        raise PermissionError("only the team's admins and reviewers copy cards into its library")
    source = SkillCard.objects.filter(team=None).prefetch_related("lineages").order_by("card_id")
    if card_ids is not None:
        source = source.filter(card_id__in=card_ids)
        missing = sorted(set(card_ids) - set(source.values_list("card_id", flat=True)))
        if missing:
            raise SkillCard.DoesNotExist(f"the default library has no cards {missing}")
    held = set(SkillCard.objects.filter(team=team).values_list("card_id", flat=True))
    created, skipped = [], []
    for card in source:
        if card.card_id in held:
            skipped.append(card.card_id)
            continue
        copy = SkillCard.objects.create(card_id=card.card_id, intent=card.intent, team=team, copied_from=card,
                                        status=_system_status(card), data=card.data)
        copy.lineages.set(card.lineages.all())
        created.append(card.card_id)
    return {"created": created, "skipped": skipped}


def _system_status(card: SkillCard) -> str:
    """What the system (not a reviewer) found of a card: its roundtrip's status where one
    is kept, else induced."""
    system = (SkillCard.Status.INDUCED, SkillCard.Status.VERIFIED, SkillCard.Status.FAILED)
    if card.status in (*system, SkillCard.Status.RETIRED):
        return card.status
    kept = (card.data.get("roundtrip") or {}).get("status")
    if kept in system:
        return kept
    return SkillCard.Status.VERIFIED if _roundtrip_reproduced(card) else SkillCard.Status.INDUCED


def generation_pairs() -> list:
    """OptiML-G's training pairs from the experts (settings.OPTIML_GENERATION_KERNEL_SOURCES):
    lineage.engine.experts.generation_pairs, every expert's all-off and all-on state."""
    return experts.generation_pairs()
