"""The skill cards in the database as a search proposal source, for the app: add
`lineage.sources.StoredSkillSource` to OPTIML_PROPOSAL_SOURCES. The database is the
source of truth; the engine's SkillSource (lineage/engine/skills.py) does the matching."""

from __future__ import annotations

from django.conf import settings

from lineage import selectors
from lineage.engine.skills import SkillSource


class StoredSkillSource(SkillSource):
    """The `skills` source over the stored cards (read when the source is first used):
    those whose status is in settings.OPTIML_SKILL_STATUSES, by default only the approved
    ones (`manage.py lineage admit` verifies a card from its roundtrip; a reviewer then
    approves or rejects it, /api/skills/<id>/review/)."""

    def __init__(self) -> None:
        super().__init__(cards=None)

    @property
    def cards(self) -> list[dict]:
        if self._cards is None:
            statuses = tuple(getattr(settings, "OPTIML_SKILL_STATUSES", ("approved",)))
            self._cards = selectors.skill_cards_data(statuses=statuses)
        return self._cards
