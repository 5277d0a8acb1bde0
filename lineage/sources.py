"""The skill cards in the database as a search proposal source, for the app: add
`lineage.sources.StoredSkillSource` to OPTIML_PROPOSAL_SOURCES. The database is the
source of truth; the engine's SkillSource (lineage/engine/skills.py) does the matching."""

from __future__ import annotations

from lineage import selectors
from lineage.engine.skills import SkillSource


class StoredSkillSource(SkillSource):
    """The `skills` source over the stored cards (read when the source is first used)."""

    def __init__(self) -> None:
        super().__init__(cards=None)

    @property
    def cards(self) -> list[dict]:
        if self._cards is None:
            self._cards = selectors.skill_cards_data()
        return self._cards
