"""The app's skills source (lineage.sources.StoredSkillSource) offers the admitted
skeleton cards beside the library's stored cards, as the CLI does, unless
OPTIML_SKELETON_CARDS is off (the suite's settings turn it off for the tests written
before it); a node a skeleton card made links to no library card."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.test import override_settings

from lineage.sources import StoredSkillSource
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.types import NodeContext
from search.inspector import skill_card_url

pytestmark = pytest.mark.django_db


def context_for(name: str) -> NodeContext:
    task = tasks.get(name)
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    return NodeContext(task=name, candidate=candidate, measurement=None, diagnosis=None)


@override_settings(OPTIML_SKELETON_CARDS=True)
def test_an_empty_library_still_offers_the_admitted_skeleton_cards():
    source = StoredSkillSource()
    assert source.cards == []  # nothing stored: no token card
    offered = {p.source: p for p in source.propose(context_for("sgemm"))}
    assert "skill:skeleton:contraction.smem_register_tile" in offered, offered
    proposal = offered["skill:skeleton:contraction.smem_register_tile"]
    assert proposal.params["materialised_by"] == "skeleton" and proposal.params["admission"] == "admitted"
    assert "card_version" not in proposal.params  # no row of a library behind it
    assert "admitted skeleton card" in source.note() and "no card in the library yet" in source.note()


def test_with_the_setting_off_only_stored_cards_are_offered():
    source = StoredSkillSource()
    assert source.propose(context_for("sgemm")) == []
    assert "proposes nothing" in source.note()


def test_a_node_a_skeleton_card_made_links_to_no_library_card():
    made = SimpleNamespace(source="skill:skeleton:map.quads",
                           detail={"params": {"card": "skeleton:map.quads"}})
    stored = SimpleNamespace(source="skill:restrict-v1", detail={})
    assert skill_card_url(made) is None
    assert skill_card_url(stored) == "/api/skills/restrict-v1/"
