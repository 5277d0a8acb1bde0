"""Skeleton cards as rows of a library (lineage.skeleton_services): stored from the
recorded lineages with the status their admission by transfer gives them, reviewed like
any card (a reviewer's decision stays, and decides whether searches use the card),
served to the app's searches from their rows, shown on a card page with an example diff
and their trials, and exported and imported under the library file's checks."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
from django.test import override_settings

from lineage import services, skeleton_services
from lineage.engine import skeleton_cards
from lineage.engine.library import LibraryError, parse_library
from lineage.models import SkillCard
from lineage.sources import StoredSkillSource
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.types import NodeContext
from search.inspector import skill_card_url

pytestmark = pytest.mark.django_db
TILE = "skeleton:contraction.smem_register_tile"


def context_for(name: str) -> NodeContext:
    task = tasks.get(name)
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    return NodeContext(task=name, candidate=candidate, measurement=None, diagnosis=None)


@pytest.fixture
def stored():
    return {row.card_id: row for row in skeleton_services.skeleton_cards_store()}


@pytest.fixture
def reviewer(people):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("rita", password="rita-secret-1", is_staff=True)


def test_each_recorded_skeleton_card_is_a_row_whose_status_its_admission_gives(stored):
    recorded = {card["id"]: card for card in skeleton_cards.recorded()}
    assert set(stored) == set(recorded) and len(stored) >= 8
    for card_id, row in stored.items():
        admission = recorded[card_id]["admission"].get("status")
        assert row.status == {"admitted": "verified", "rejected": "failed"}.get(admission, "induced"), card_id
        assert row.intent == recorded[card_id]["intent"] and row.data["kind"] == "skeleton"
    assert stored[TILE].status == "verified" and stored["skeleton:window.quads"].status == "failed"
    tile = stored[TILE].data
    assert tile["example"]["task"] in tile["tasks"] and "+++ b/kernel.cu" in tile["example"]["diff"]
    assert all(risk["kind"] == "transfer trial" and risk["message"] for risk in
               stored["skeleton:window.quads"].data["risks"])


def test_storing_again_keeps_a_reviewers_decision_and_the_teams_text_and_changes_nothing_unchanged(
        stored, reviewer):
    services.skill_card_review(card_id=TILE, reviewer=reviewer, decision="reject", comment="not on sm_80")
    services.skill_card_edit(card_id=TILE, author=reviewer, sentence="Tiles for any contraction.")
    quads = SkillCard.objects.get(card_id="skeleton:map.quads")
    revision = quads.revision

    skeleton_services.skeleton_cards_store()

    tile = SkillCard.objects.get(card_id=TILE)
    assert tile.status == "rejected" and tile.data["sentence"] == "Tiles for any contraction."
    quads.refresh_from_db()
    assert quads.revision == revision  # nothing changed: its viewers hear of nothing


@override_settings(OPTIML_SKELETON_CARDS=True)
def test_the_apps_searches_use_the_stored_skeleton_cards_their_status_allows(stored, reviewer):
    offered = {p.source: p for p in StoredSkillSource().propose(context_for("sgemm"))}
    proposal = offered[f"skill:{TILE}"]
    assert proposal.params["materialised_by"] == "skeleton"
    assert proposal.params["card_version"]["library"] == "default"
    assert proposal.params["card_version"]["status"] == "verified"
    assert "skeleton card" in StoredSkillSource().note()
    # a failed (rejected by transfer) card is not used; a reviewer's rejection stops a verified one
    assert not any(p.source == "skill:skeleton:window.quads"
                   for p in StoredSkillSource().propose(context_for("maxpool3d")))
    services.skill_card_review(card_id=TILE, reviewer=reviewer, decision="reject", comment="not here")
    assert f"skill:{TILE}" not in {p.source for p in StoredSkillSource().propose(context_for("sgemm"))}


def test_with_the_setting_off_no_skeleton_card_is_used(stored):
    source = StoredSkillSource()
    assert source.cards == [] and source.skeleton_cards == []
    assert source.propose(context_for("sgemm")) == []


def test_a_node_a_skeleton_card_made_links_to_its_card():
    made = SimpleNamespace(source="skill:skeleton:map.quads",
                           detail={"params": {"card_version": {"library": "team:7"}}})
    assert skill_card_url(made) == "/api/skills/skeleton:map.quads/?team=7"


def test_its_page_shows_the_skeleton_the_example_and_the_admission_trials(stored, people, api):
    client = api(people["bob"])
    response = client.get(f"/api/skills/{TILE}/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["kind"] == "skeleton" and body["skeleton"] == "contraction.smem_register_tile"
    assert body["family"] == "batched_contraction" and body["status"] == "verified"
    assert body["card"]["example"]["diff"] and body["card"]["admission"]["trials"]
    assert body["lineages"] == len(body["card"]["tasks"])
    effects = client.get(f"/api/skills/{TILE}/effects/").json()
    (admission,) = [group for group in effects["groups"] if group["kind"] == "admission"]
    assert any(point["what"].endswith("reproduced") for point in admission["points"])
    rows = {row["card_id"]: row for row in client.get("/api/skills/").json()}
    assert rows[TILE]["kind"] == "skeleton" and rows["skeleton:map.quads"]["skeleton"] == "map.quads"
    for bad in ("skeleton:Map.quads", "skeleton:map", "skeleton:map.quads.x"):
        assert client.get(f"/api/skills/{bad}/").status_code == 404


def test_a_reviewer_approves_a_skeleton_card_on_its_page(stored, reviewer, api):
    response = api(reviewer).post(f"/api/skills/{TILE}/review/",
                                  {"decision": "approve", "comment": "the tile pays on every GEMM"},
                                  format="json")
    assert response.status_code == 201, response.content
    assert SkillCard.objects.get(card_id=TILE).status == "approved"


def test_an_exported_skeleton_card_imports_untried_and_a_forged_one_is_refused(stored, people, reviewer, api):
    exported = api(reviewer).get("/api/skills/export/").json()
    skeletons = [card for card in exported["cards"] if card["card_id"].startswith("skeleton:")]
    assert {card["card_id"] for card in skeletons} == set(stored)
    parse_library({**exported, "cards": skeletons})  # what it exports, it imports

    made = services.skill_library_import(data={**exported, "cards": skeletons}, importer=reviewer,
                                         team=people["team"])
    assert set(made["created"]) == set(stored)
    copy_row = SkillCard.objects.get(team=people["team"], card_id=TILE)
    assert copy_row.status == "induced" and copy_row.data["admission"] == {"status": "untried"}
    assert copy_row.data["imported"]["admission"]["status"] == "admitted"  # kept as what the file said

    def refused(change) -> str:
        card = copy.deepcopy(next(c for c in skeletons if c["card_id"] == TILE))
        change(card)
        with pytest.raises(LibraryError) as error:
            parse_library({**exported, "cards": [card]})
        return error.value.where

    assert refused(lambda c: c.update(card_id="skeleton:rows.no_such")) == "cards[0].data.skeleton"
    assert refused(lambda c: c["data"].update(kind="token")) == "cards[0].data.kind"
    assert refused(lambda c: c["data"].update(family="elementwise_map")) == "cards[0].data.skeleton"
    assert refused(lambda c: c["data"]["evidence"]["steps"][0].update(speedup=-1)) == \
        "cards[0].data.evidence.steps"
    assert refused(lambda c: c["data"]["evidence"]["steps"][0].update(speedup=True)) == \
        "cards[0].data.evidence.steps"
    assert refused(lambda c: c.update(card_id="skeleton:../x")) == "cards[0].card_id"
