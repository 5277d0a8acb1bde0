"""The skill cards in the database as a search proposal source, for the app:
`lineage.sources.StoredSkillSource` in OPTIML_PROPOSAL_SOURCES (there by default). The
database is the source of truth; the engine's SkillSource (lineage/engine/skills.py) does
the matching."""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings

from lineage import selectors
from lineage.engine.skills import SkillSource
from search.engine.types import NodeContext, Proposal


class StoredSkillSource(SkillSource):
    """The `skills` source over the stored cards (read when the source is first used) of
    the run's library: its team's when the team has one, else the project's default
    library. `manage.py lineage admit` verifies a card from its roundtrip; a reviewer then
    approves or rejects it (/api/skills/<id>/review/). A team's cards are used when their
    status is in settings.OPTIML_SKILL_STATUSES (by default: approved); the default
    library's when it is in OPTIML_DEFAULT_LIBRARY_SKILL_STATUSES (by default: approved or
    verified, as `lineage bootstrap` admits the recorded cards)."""

    def __init__(self) -> None:
        # A library holds token cards and skeleton cards (lineage.skeleton_services) as rows;
        # settings.OPTIML_SKELETON_CARDS off leaves its skeleton cards out.
        super().__init__(cards=None, skeletons=settings.OPTIML_SKELETON_CARDS)
        self._versions: dict[str, dict] = {}
        self._team_id: int | None = None

    def scope_to_team(self, team_id: int | None) -> None:
        """The run's team: its searches use the team's library when it has one
        (selectors.skill_library_for_run). search.services calls this for every
        configured source that has it, before the first proposal."""
        self._team_id, self._cards, self._skeleton_cards = team_id, None, None

    @property
    def cards(self) -> list[dict]:
        """The library's token cards a search may use."""
        self._read()
        return self._cards

    @property
    def skeleton_cards(self) -> list[dict]:
        """The library's skeleton cards a search may use (their rows' status says it: the
        system sets it from their admission by transfer, a reviewer may decide otherwise)."""
        self._read()
        return self._skeleton_cards

    def _read(self) -> None:
        if self._cards is None or self._skeleton_cards is None:
            stored, self._versions = selectors.skill_cards_for_search(
                statuses=tuple(settings.OPTIML_SKILL_STATUSES),
                default_library_statuses=tuple(settings.OPTIML_DEFAULT_LIBRARY_SKILL_STATUSES),
                team_id=self._team_id)
            self._cards = [card for card in stored if card.get("kind") != "skeleton"]
            self._skeleton_cards = [card for card in stored if card.get("kind") == "skeleton"] \
                if self.skeletons else []

    def note(self) -> str:
        """What the New session form says beside the source (GET /api/sources/): how many
        cards the library lends a search, or that it lends none and the source proposes
        nothing (a search still runs on its other sources)."""
        count, skeletons = len(self.cards), len(self.skeleton_cards)
        also = f" and {skeletons} skeleton card{'s' if skeletons != 1 else ''}" if skeletons else ""
        if count:
            return f"{count} card{'s' if count != 1 else ''}{also} in the library"
        if skeletons:
            return f"{skeletons} skeleton card{'s' if skeletons != 1 else ''} in the library"
        return ("no card in the library yet, so it proposes nothing; make start fills the default "
                "library with manage.py lineage bootstrap")

    def propose(self, context: NodeContext) -> list[Proposal]:
        """As the engine's, each proposal of a card naming the card's version it used (its
        text version and status then, and a digest of its data), so a run records what
        it knew; the node's params keep it."""
        proposals = super().propose(context)
        return [replace(p, params={**p.params, "card_version": self._versions[p.params["card"]]})
                if p.params.get("card") in self._versions else p for p in proposals]
