"""Skeleton cards as rows of the default library (issue 31): stored, listed, reviewed,
copied and retired like the token cards, so a team reads a skeleton card against its
evidence before its searches use it, and a node a skeleton made links to its card.

The cards come from lineage.engine.skeleton_cards.recorded(): induced from the lineages
recorded in this tree, each with its admission by transfer from the newest recorded
trials. The admission sets the system's status (admitted: verified; rejected: failed;
otherwise induced); a reviewer's decision, once made, stays.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from lineage.models import Lineage, SkillCard, SkillCardVersion
from lineage.services import DECIDED
from lineage.services import card_changed as changed
from profiling.serialization import json_safe

# What a skeleton card's admission by transfer makes of its status in a library.
ADMISSION_STATUS = {"admitted": SkillCard.Status.VERIFIED, "rejected": SkillCard.Status.FAILED}


def skeleton_status(card: dict[str, Any]) -> str:
    """The status the system gives a skeleton card from its admission."""
    return ADMISSION_STATUS.get(card.get("admission", {}).get("status"), SkillCard.Status.INDUCED)


@transaction.atomic
def skeleton_cards_store(*, cards: list[dict[str, Any]] | None = None) -> list[SkillCard]:
    """The skeleton cards (given, or the recorded ones) into the default library, every
    card or none: each row's data replaced by the newest induction (`for_library`: its
    risks and an example diff with it), its status set from its admission unless a
    reviewer decided or it was retired, the team's edited text kept, and linked to the
    stored lineages of its source tasks that hold a step of its intents. Viewers of each
    card's page hear of it once this commits."""
    from lineage.engine import skeleton_cards

    if cards is None:
        cards = list(skeleton_cards.recorded())
    made = [json_safe(skeleton_cards.for_library(card)) for card in cards]  # before any row is locked
    rows = {row.card_id: row for row in SkillCard.objects.select_for_update()
            .filter(team=None, card_id__in=[card["id"] for card in made])}
    stored = []
    for data in made:
        row = rows.get(data["id"])
        if row is None:
            row = SkillCard.objects.create(team=None, card_id=data["id"], intent=data["intent"], data=data,
                                           status=skeleton_status(data))
            changed(row)
        else:
            if SkillCardVersion.objects.filter(card=row).exists():  # the team's text stays
                data["sentence"], data["notes"] = row.data["sentence"], row.data.get("notes", "")
            status = row.status if row.status in DECIDED else skeleton_status(data)
            if (row.data, row.status) != (data, status):  # a card's viewers hear of real changes only
                row.data, row.intent, row.status = data, data["intent"], status
                row.save(update_fields=["data", "intent", "status", "updated_at"])
                changed(row)
        row.lineages.set(Lineage.objects.filter(task__name__in=data["tasks"],
                                                transitions__intent__in=data["intents"]).distinct())
        stored.append(row)
    return stored


def skeleton_cards_missing() -> bool:
    """Whether the default library holds none of the recorded skeleton cards (a library
    filled before skeleton cards were rows)."""
    return not SkillCard.objects.filter(team=None, card_id__startswith="skeleton:").exists()
