"""Reads of the lineage app."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from lineage.models import Lineage, SkillCard, WalkRequest


def lineage_list(*, task: str | None = None) -> QuerySet[Lineage]:
    rows = Lineage.objects.select_related("task").annotate(
        state_count=Count("states", distinct=True), transition_count=Count("transitions", distinct=True),
        rejected_count=Count("rejected", distinct=True))
    return rows.filter(task__name=task) if task else rows


def lineage_get(*, pk: int) -> Lineage | None:
    return Lineage.objects.select_related("task").filter(pk=pk).first()


def walk_request_get(*, pk: int) -> WalkRequest | None:
    return WalkRequest.objects.select_related("task", "lineage").filter(pk=pk).first()


def skill_card_list(*, intent: str | None = None) -> QuerySet[SkillCard]:
    rows = SkillCard.objects.annotate(lineage_count=Count("lineages", distinct=True))
    return rows.filter(intent=intent) if intent else rows


def skill_card_get(*, card_id: str) -> SkillCard | None:
    return SkillCard.objects.filter(card_id=card_id).first()


def skill_cards_data(*, statuses: tuple[str, ...] = ("verified",)) -> list[dict]:
    """The cards a search may use, as plain data (lineage/engine/skills.py reads them):
    the library, the cards whose roundtrip reproduced their effect, by default."""
    return [row.data for row in SkillCard.objects.filter(status__in=statuses)]
