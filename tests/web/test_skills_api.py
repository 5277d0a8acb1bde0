"""The skill library's API (/api/skills/, issue 11) on the real database: the library's
filters and sorts, a card whole without the machine's parts or any gate seed, the review
workflow (only the library's reviewers; only a verified card can be approved; a comment
says why; status and review change together) and the comment thread."""

import pytest

from lineage import services
from lineage.models import SkillCard, SkillComment, SkillReview
from tests.web.conftest import store_recorded_lineage

pytestmark = pytest.mark.django_db


def card_data(card_id: str, intent: str, median: float, lineages: int, tasks: list[str]) -> dict:
    return {
        "id": card_id, "intent": intent, "sentence": f"do {intent.lower()}", "family": "memory",
        "anchor": {"status": "generalised", "kinds": ["call_expression"],
                   "rewrites": [{"before": "expf(?0)", "after": "__expf(?0)", "tasks": tasks,
                                 "tree": {"kind": "call_expression", "children": ["x" * 5000]}}],
                   "steps": [{"task": tasks[0], "before": "", "after": f"OPT_{intent}", "speedup": median,
                              "edits": [{"kind": "call_expression", "big": "y" * 5000}]}]},
        "vector": [{"task": tasks[0], "before": "", "after": f"OPT_{intent}", "speedup": median,
                    "source_diff": "--- before.cu\n+++ after.cu\n-expf(x)\n+__expf(x)\n"}],
        "preconditions": {"order": {"required": {}}}, "scope": {"tasks": tasks, "arch": "sm_90"},
        "effects": {"speedup": {"n": 3, "min": median * 0.9, "median": median, "max": median * 1.1}},
        "risks": [{"kind": "refused", "task": tasks[0], "message": "wrong at seed 123456789: max error 3.2"}],
        "evidence": {"lineages": lineages, "transitions": 3 * lineages, "helped": 3, "neutral": 0, "hurt": 0},
    }


@pytest.fixture
def library(people):
    make = SkillCard.objects.create
    return {
        "fast": make(card_id="fast_math-v1", intent="FAST_MATH", status="verified",
                     data=card_data("fast_math-v1", "FAST_MATH", 1.03, 2, ["softmax", "cross_entropy"])),
        "vec4": make(card_id="vec4-v1", intent="VEC4", status="verified",
                     data=card_data("vec4-v1", "VEC4", 1.16, 10, ["relu", "softmax"])),
        "tile": make(card_id="smem_tile-v1", intent="SMEM_TILE", status="induced",
                     data=card_data("smem_tile-v1", "SMEM_TILE", 1.5, 3, ["sgemm"])),
    }


@pytest.fixture
def reviewer(people):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("rita", password="rita-secret-1", is_staff=True)


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["card_id"] for row in response.json()]


def test_the_library_filters_and_sorts(library, people, api):
    bob = api(people["bob"])
    assert ids(bob.get("/api/skills/")) == ["fast_math-v1", "smem_tile-v1", "vec4-v1"]  # by intent
    assert ids(bob.get("/api/skills/?sort=effect")) == ["smem_tile-v1", "vec4-v1", "fast_math-v1"]
    assert ids(bob.get("/api/skills/?sort=evidence")) == ["vec4-v1", "smem_tile-v1", "fast_math-v1"]
    assert ids(bob.get("/api/skills/?task=softmax")) == ["fast_math-v1", "vec4-v1"]
    assert ids(bob.get("/api/skills/?status=induced")) == ["smem_tile-v1"]
    assert ids(bob.get("/api/skills/?intent=VEC4&arch=sm_90")) == ["vec4-v1"]
    assert ids(bob.get("/api/skills/?arch=sm_100")) == []
    row = bob.get("/api/skills/?intent=VEC4").json()[0]
    assert row["effect"]["median"] == pytest.approx(1.16) and row["lineages"] == 10 and row["steps"] == 30
    assert row["status"] == "verified" and row["tasks"] == ["relu", "softmax"]
    for bad in ("sort=speed", "status=great"):
        response = bob.get(f"/api/skills/?{bad}")
        assert response.status_code == 400 and bad.split("=")[0] in response.json()


def test_a_card_comes_whole_without_the_machines_parts_or_a_gate_seed(library, people, api):
    response = api(people["carol"]).get("/api/skills/vec4-v1/")
    assert response.status_code == 200
    body = response.json()
    card = body["card"]
    assert card["vector"][0]["source_diff"].startswith("--- before.cu")
    assert card["anchor"]["rewrites"][0]["before"] == "expf(?0)"
    assert "tree" not in card["anchor"]["rewrites"][0] and "edits" not in card["anchor"]["steps"][0]
    assert "123456789" not in response.content.decode() and "seed (hidden)" in card["risks"][0]["message"]
    assert body["review_history"] == [] and body["comment_thread"] == []
    assert api(people["carol"]).get("/api/skills/nope-v1/").status_code == 404
    assert api(people["carol"]).get("/api/skills/Not_A_Card/").status_code == 404
    stored = SkillCard.objects.get(card_id="vec4-v1").data
    assert stored["risks"][0]["message"].endswith("seed 123456789: max error 3.2")  # stored as is


def test_a_reviewer_approves_a_verified_card_with_a_comment_and_everyone_sees_it(library, people,
                                                                                  reviewer, api):
    response = api(reviewer).post("/api/skills/vec4-v1/review/",
                                  {"decision": "approve", "comment": "float4 pays on every row kernel"},
                                  format="json")
    assert response.status_code == 201, response.content
    assert response.json()["status_before"] == "verified" and response.json()["status_after"] == "approved"
    seen = api(people["bob"]).get("/api/skills/vec4-v1/").json()
    assert seen["status"] == "approved"
    (review,) = seen["review_history"]
    assert review["reviewer"] == "rita" and review["comment"] == "float4 pays on every row kernel"
    # Approved already: a second approval is a conflict, and writes nothing.
    again = api(reviewer).post("/api/skills/vec4-v1/review/", {"decision": "approve", "comment": "again"},
                               format="json")
    assert again.status_code == 409 and SkillReview.objects.count() == 1
    # A reviewer may still reject it later, with the reason.
    rejected = api(reviewer).post("/api/skills/vec4-v1/review/",
                                  {"decision": "reject", "comment": "slower on odd N"}, format="json")
    assert rejected.status_code == 201 and SkillCard.objects.get(card_id="vec4-v1").status == "rejected"


def test_only_a_verified_card_can_be_approved_and_only_reviewers_review(library, people, reviewer, api):
    response = api(reviewer).post("/api/skills/smem_tile-v1/review/",
                                  {"decision": "approve", "comment": "looks right"}, format="json")
    assert response.status_code == 409
    assert "only a card whose roundtrip reproduced" in response.json()["detail"]
    assert SkillCard.objects.get(card_id="smem_tile-v1").status == "induced"
    for who in ("alice", "bob", "dana"):  # a team's admin reviews the team's cards, not the project's
        refused = api(people[who]).post("/api/skills/vec4-v1/review/",
                                        {"decision": "approve", "comment": "ok"}, format="json")
        assert refused.status_code == 403
    assert api().post("/api/skills/vec4-v1/review/", {"decision": "approve", "comment": "ok"},
                      format="json").status_code == 401
    for body in ({"decision": "approve"}, {"decision": "approve", "comment": "   "},
                 {"decision": "promote", "comment": "x"}, {"decision": "approve", "comment": "x" * 10_001}):
        assert api(reviewer).post("/api/skills/vec4-v1/review/", body, format="json").status_code == 400
    assert not SkillReview.objects.exists() and SkillCard.objects.get(card_id="vec4-v1").status == "verified"


def test_a_rejected_card_whose_roundtrip_reproduced_can_be_approved_after_all(library, reviewer):
    services.skill_card_review(card_id="fast_math-v1", reviewer=reviewer, decision="reject", comment="unsure")
    review = services.skill_card_review(card_id="fast_math-v1", reviewer=reviewer, decision="approve",
                                        comment="the trials hold up")
    assert (review.status_before, review.status_after) == ("rejected", "approved")
    with pytest.raises(services.ReviewError, match="only a card whose roundtrip reproduced"):
        services.skill_card_review(card_id="smem_tile-v1", reviewer=reviewer, decision="approve", comment="x")


def test_members_comment_on_a_card_and_read_the_thread_in_order(library, people, api):
    for who, text in (("bob", "does it hold for N % 4 != 0?"), ("carol", "the probes say it is refused")):
        response = api(people[who]).post("/api/skills/vec4-v1/comments/", {"text": text}, format="json")
        assert response.status_code == 201 and response.json()["author"] == who
    thread = api(people["dana"]).get("/api/skills/vec4-v1/comments/").json()
    assert [c["text"] for c in thread] == ["does it hold for N % 4 != 0?", "the probes say it is refused"]
    assert api(people["bob"]).post("/api/skills/vec4-v1/comments/", {"text": ""},
                                   format="json").status_code == 400
    assert api().post("/api/skills/vec4-v1/comments/", {"text": "hi"}, format="json").status_code == 401
    assert api(people["bob"]).post("/api/skills/nope-v1/comments/", {"text": "hi"},
                                   format="json").status_code == 404
    assert SkillComment.objects.count() == 2
    row = api(people["bob"]).get("/api/skills/?intent=VEC4").json()[0]
    assert row["comments"] == 2 and row["reviews"] == 0


def test_an_admission_leaves_a_reviewers_decision_and_updates_the_trials(library, reviewer):
    services.skill_card_review(card_id="vec4-v1", reviewer=reviewer, decision="approve", comment="good")
    services.cards_admit(admission={"cards": {"vec4-v1": {"status": "failed", "trials": []},
                                              "smem_tile-v1": {"status": "verified", "trials": []}}})
    vec4, tile = SkillCard.objects.get(card_id="vec4-v1"), SkillCard.objects.get(card_id="smem_tile-v1")
    assert vec4.status == "approved" and vec4.data["roundtrip"]["status"] == "failed"
    assert tile.status == "verified"


def test_an_edit_makes_a_new_version_whose_diff_the_history_shows(library, people, reviewer, api):
    history = api(people["bob"]).get("/api/skills/vec4-v1/versions/").json()
    assert [(v["number"], v["author"]) for v in history] == [(1, None)]  # the induced text
    response = api(reviewer).patch("/api/skills/vec4-v1/", {
        "sentence": "load and store four floats at a time", "notes": "needs N % 4 == 0"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["sentence"] == "load and store four floats at a time"
    history = api(people["bob"]).get("/api/skills/vec4-v1/versions/").json()
    assert [(v["number"], v["author"]) for v in history] == [(1, None), (2, "rita")]
    diff = history[1]["diff"]
    assert "-do vec4" in diff and "+load and store four floats at a time" in diff
    assert "+needs N % 4 == 0" in diff
    assert diff.startswith("--- v1\n+++ v2")
    # Only the text changed: the evidence and status are the card's as before.
    card = SkillCard.objects.get(card_id="vec4-v1")
    assert card.status == "verified" and card.data["evidence"]["lineages"] == 10
    # Refusals write nothing: an unchanged text, an empty one, a member, a visitor.
    refusals = ((reviewer, {"notes": "needs N % 4 == 0"}, 409), (reviewer, {"sentence": " "}, 400),
                (reviewer, {}, 400), (people["dana"], {"notes": "mine"}, 403), (None, {"notes": "x"}, 401))
    for who, body, code in refusals:
        assert api(who).patch("/api/skills/vec4-v1/", body, format="json").status_code == code
    assert SkillCard.objects.get(card_id="vec4-v1").versions.count() == 2


def test_inducing_again_keeps_the_teams_text(library, reviewer, monkeypatch):
    from lineage.engine import cards as card_engine

    services.skill_card_edit(card_id="vec4-v1", author=reviewer, notes="our caveat")

    class Induced:
        id, intent = "vec4-v1", "VEC4"

        def to_dict(self):
            return {**card_data("vec4-v1", "VEC4", 1.2, 11, ["relu"]), "sentence": "induced again"}

    monkeypatch.setattr(card_engine, "induce", lambda lineages, probes: [Induced()])
    services.cards_induce()
    data = SkillCard.objects.get(card_id="vec4-v1").data
    assert data["notes"] == "our caveat" and data["sentence"] == "do vec4"
    assert data["evidence"]["lineages"] == 11  # the evidence is induced anew


def test_a_card_lists_where_it_was_applied_in_runs_you_may_see_and_the_node_links_back(
        library, people, relu_run, api):
    from search.models import RunNode

    mine = relu_run(user=people["alice"], team=people["team"], intent="the team's relu")
    private = relu_run(user=people["alice"], intent="alice alone")
    for run, time_ms in ((mine, 0.4), (private, 0.6)):
        root = RunNode.objects.get(run=run, node_id=0)
        RunNode.objects.filter(pk=root.pk).update(time_ms=0.8)
        RunNode.objects.create(run=run, node_id=99, parent_id=0, candidate=root.candidate, state="done",
                               engine={**root.engine, "id": 99, "parent": 0, "depth": 1, "created": 99},
                               source="skill:vec4-v1", title="VEC4: relu's step", status="passed",
                               level="screen", time_ms=time_ms)
    seen_by_bob = api(people["bob"]).get("/api/skills/vec4-v1/usage/").json()
    assert [(u["run"], u["node"]) for u in seen_by_bob] == [(mine.pk, 99)]  # not alice's private run
    (use,) = seen_by_bob
    assert use["speedup_vs_parent"] == pytest.approx(2.0) and use["status"] == "passed"
    assert use["page"] == f"/runs/{mine.pk}/" and use["api"] == f"/api/runs/{mine.pk}/nodes/99/"
    assert len(api(people["alice"]).get("/api/skills/vec4-v1/usage/").json()) == 2
    assert api(people["carol"]).get("/api/skills/vec4-v1/usage/").json() == []
    # The library's row counts the runs behind the card that the reader may see.
    runs = {who: {r["card_id"]: r["runs"] for r in api(people[who]).get("/api/skills/").json()}
            for who in ("bob", "alice", "carol")}
    assert (runs["bob"]["vec4-v1"], runs["alice"]["vec4-v1"], runs["carol"]["vec4-v1"]) == (1, 2, 0)
    assert runs["alice"]["fast_math-v1"] == 0
    assert api(people["bob"]).get("/api/skills/fast_math-v1/usage/").json() == []
    node = api(people["bob"]).get(use["api"]).json()
    assert node["skill_card_url"] == "/api/skills/vec4-v1/"
    assert api(people["bob"]).get(f"/api/runs/{mine.pk}/nodes/0/").json()["skill_card_url"] is None


def test_a_library_exported_here_imports_elsewhere_as_cards_to_verify_again(library, people, reviewer, api):
    exported = api(people["bob"]).get("/api/skills/export/")
    assert exported.status_code == 200 and "attachment" in exported["Content-Disposition"]
    data = exported.json()
    assert [c["card_id"] for c in data["cards"]] == ["fast_math-v1", "smem_tile-v1", "vec4-v1"]
    assert data["cards"][2]["data"]["anchor"]["rewrites"][0]["tree"]  # the search needs the patterns
    # Another team's library: one card is new here, one we have already.
    theirs = {**data, "cards": [{**data["cards"][2], "card_id": "vec4-v2", "status": "approved",
                                 "data": {**data["cards"][2]["data"], "roundtrip": {"status": "verified"}}},
                                data["cards"][0]]}
    response = api(reviewer).post("/api/skills/import/", theirs, format="json")
    assert response.status_code == 201, response.content
    assert response.json() == {"created": ["vec4-v2"], "skipped": ["fast_math-v1"]}
    new = SkillCard.objects.get(card_id="vec4-v2")
    assert new.status == "induced"  # approved there: it must pass its roundtrip here
    assert new.data["imported"]["status"] == "approved" and new.data["imported"]["by"] == "rita"
    assert "roundtrip" not in new.data and new.data["imported"]["roundtrip"] == {"status": "verified"}
    assert SkillCard.objects.get(card_id="fast_math-v1").status == "verified"  # left as it was


@pytest.mark.parametrize("broken, where", [
    ({"format": "something else"}, "format"),
    ({"version": 2}, "version"),
    ({"cards": []}, "cards"),
    ({"cards": [{"card_id": "../etc/passwd", "intent": "VEC4", "data": {}}]}, "cards[0].card_id"),
    ({"cards": [{"card_id": "x-v1", "intent": "MAGIC", "data": {}}]}, "cards[0].intent"),
    ({"cards": [{"card_id": "x-v1", "intent": "VEC4", "data": {"sentence": "s"}}]},
     "cards[0].data.effects.speedup"),
    ({"cards": [{"card_id": "x-v1", "intent": "VEC4", "data": "text"}]}, "cards[0].data"),
])
def test_a_bad_library_file_is_one_clear_error_and_imports_nothing(library, reviewer, api, broken, where):
    good = {"card_id": "good-v1", "intent": "VEC4", "status": "approved",
            "data": card_data("good-v1", "VEC4", 1.2, 1, ["relu"])}
    body = {"format": "optiml-skill-library", "version": 1, "cards": [good], **broken}
    if "cards" in broken and broken["cards"]:
        body["cards"] = [good, *broken["cards"]]
        where = where.replace("cards[0]", "cards[1]")
    response = api(reviewer).post("/api/skills/import/", body, format="json")
    assert response.status_code == 400 and where in response.json(), response.json()
    assert not SkillCard.objects.filter(card_id="good-v1").exists()  # whole or not at all


def test_a_lineage_is_a_graph_whose_path_runs_from_the_plain_attempt_to_the_expert(library, people, api):
    row = store_recorded_lineage("relu")
    SkillCard.objects.get(card_id="vec4-v1").lineages.add(row)
    listed = api(people["carol"]).get("/api/lineages/").json()
    assert [(r["id"], r["task"], r["states"]) for r in listed] == [(row.pk, "relu", 16)]
    graph = api(people["carol"]).get(f"/api/lineages/{row.pk}/").json()
    rows = {r["id"]: r for r in graph["rows"]}
    assert rows[graph["path"][0]]["flags_on"] == "(plain attempt)"
    assert graph["expert_id"] == graph["path"][-1] and rows[graph["expert_id"]]["status"] == "passed"
    assert all(rows[i]["parentId"] == j for j, i in zip(graph["path"], graph["path"][1:], strict=False))
    card = api(people["carol"]).get("/api/skills/vec4-v1/").json()
    assert card["lineages_behind"] == [{"id": row.pk, "task": "relu", "page": f"/lineages/{row.pk}/"}]
    assert api(people["carol"]).get("/api/lineages/999999/").status_code == 404
    assert api().get(f"/api/lineages/{row.pk}/").status_code == 401


# -- team libraries (issue 11): cards belong to a library; a team copies the default one ---


def test_a_team_admin_copies_the_default_library_and_the_team_reviews_its_own_copies(
        library, people, reviewer, api):
    from accounts import services as accounts

    team, dana, bob = people["team"], people["dana"], people["bob"]
    services.skill_card_review(card_id="vec4-v1", reviewer=reviewer, decision="approve", comment="project ok")
    # A member cannot copy; a stranger is told there is no such team.
    assert api(bob).post("/api/skills/copy/", {"team": team.pk}, format="json").status_code == 403
    assert api(people["carol"]).post("/api/skills/copy/", {"team": team.pk}, format="json").status_code == 404
    assert not SkillCard.objects.filter(team=team).exists()
    copied = api(dana).post("/api/skills/copy/", {"team": team.pk}, format="json")
    assert copied.status_code == 201, copied.content
    assert copied.json() == {"created": ["fast_math-v1", "smem_tile-v1", "vec4-v1"], "skipped": []}
    again = api(dana).post("/api/skills/copy/", {"team": team.pk, "cards": ["vec4-v1"]}, format="json")
    assert again.json() == {"created": [], "skipped": ["vec4-v1"]}
    unknown = api(dana).post("/api/skills/copy/", {"team": team.pk, "cards": ["nope-v1"]}, format="json")
    assert unknown.status_code == 400 and "nope-v1" in unknown.json()["cards"][0]
    # The copy keeps the evidence and what the roundtrip found, not the project's approval.
    mine = SkillCard.objects.get(team=team, card_id="vec4-v1")
    assert mine.status == "verified" and mine.copied_from.team is None
    assert mine.data["evidence"]["lineages"] == 10
    body = api(bob).get(f"/api/skills/vec4-v1/?team={team.pk}").json()
    assert body["library"] == {"team": team.pk, "name": "kernels", "copied_from": "vec4-v1"}
    assert body["status"] == "verified" and body["can_review"] is False
    # A reviewer of the team (not an admin) approves the team's copy; the project's card
    # and its review stay as they were, and a member may not review.
    carol = people["carol"]
    accounts.membership_set(team=team, user=carol, role="reviewer")
    assert api(carol).get(f"/api/skills/vec4-v1/?team={team.pk}").json()["can_review"] is True
    assert api(bob).post(f"/api/skills/vec4-v1/review/?team={team.pk}",
                         {"decision": "reject", "comment": "no"}, format="json").status_code == 403
    reviewed = api(carol).post(f"/api/skills/vec4-v1/review/?team={team.pk}",
                               {"decision": "reject", "comment": "slower on our odd sizes"}, format="json")
    assert reviewed.status_code == 201
    assert SkillCard.objects.get(team=team, card_id="vec4-v1").status == "rejected"
    assert SkillCard.objects.get(team=None, card_id="vec4-v1").status == "approved"
    # The team reviewer is no reviewer of the project's library.
    assert api(carol).post("/api/skills/fast_math-v1/review/", {"decision": "approve", "comment": "x"},
                           format="json").status_code == 403
    # Each library lists its own cards; edits, comments and history are per library.
    assert ids(api(bob).get(f"/api/skills/?team={team.pk}&status=rejected")) == ["vec4-v1"]
    assert ids(api(bob).get("/api/skills/?status=rejected")) == []
    assert api(carol).patch(f"/api/skills/vec4-v1/?team={team.pk}", {"notes": "ours"},
                            format="json").status_code == 200
    team_versions = api(bob).get(f"/api/skills/vec4-v1/versions/?team={team.pk}").json()
    assert [v["number"] for v in team_versions] == [1, 2]
    assert [v["number"] for v in api(bob).get("/api/skills/vec4-v1/versions/").json()] == [1]
    assert api(bob).post(f"/api/skills/vec4-v1/comments/?team={team.pk}", {"text": "agreed"},
                         format="json").status_code == 201
    assert SkillComment.objects.get().card == mine
    # Someone outside the team finds no such library, whatever they ask.
    erin_view = api(people["carol"].__class__.objects.create_user("erin", password="erin-secret-1"))
    for path in (f"/api/skills/?team={team.pk}", f"/api/skills/vec4-v1/?team={team.pk}",
                 f"/api/skills/export/?team={team.pk}"):
        assert erin_view.get(path).status_code == 404
    assert erin_view.get("/api/skills/?team=abc").status_code == 400


def test_the_libraries_you_read_are_listed_with_your_role(library, people, api, reviewer):
    rows = api(people["dana"]).get("/api/skills/libraries/").json()
    assert rows == [{"team": None, "name": "Default library", "cards": 3, "role": "reader"},
                    {"team": people["team"].pk, "name": "kernels", "cards": 0, "role": "admin"}]
    assert api(reviewer).get("/api/skills/libraries/").json()[0]["role"] == "staff"
    assert api(people["carol"]).get("/api/skills/libraries/").json()[1:] == []


def test_a_teams_search_uses_the_teams_library_once_it_has_one_and_records_which(library, people, reviewer):
    from lineage import selectors
    from lineage.sources import StoredSkillSource

    team = people["team"]
    for card_id in ("vec4-v1", "fast_math-v1"):
        services.skill_card_review(card_id=card_id, reviewer=reviewer, decision="approve", comment="ok")
    cards, versions = selectors.skill_cards_for_search(team_id=team.pk)  # no team library yet
    assert sorted(c["id"] for c in cards) == ["fast_math-v1", "vec4-v1"]
    assert {v["library"] for v in versions.values()} == {"default"}
    services.skill_library_copy(team=team, actor=people["dana"], card_ids=["vec4-v1", "fast_math-v1"])
    cards, versions = selectors.skill_cards_for_search(team_id=team.pk)  # copies not approved yet
    assert cards == [] and versions == {}
    services.skill_card_review(card_id="vec4-v1", reviewer=people["dana"], decision="approve",
                               comment="ours too", team=team)
    source = StoredSkillSource()
    source.scope_to_team(team.pk)
    assert [c["id"] for c in source.cards] == ["vec4-v1"]
    assert source._versions["vec4-v1"]["library"] == f"team:{team.pk}"
    unscoped = StoredSkillSource()
    assert sorted(c["id"] for c in unscoped.cards) == ["fast_math-v1", "vec4-v1"]  # the default library


def test_verified_cards_are_searched_in_the_default_library_but_wait_for_approval_in_a_teams(
        library, people, settings):
    from lineage.sources import StoredSkillSource

    team = people["team"]
    assert sorted(c["id"] for c in StoredSkillSource().cards) == ["fast_math-v1", "vec4-v1"]  # verified
    services.skill_library_copy(team=team, actor=people["dana"])
    scoped = StoredSkillSource()
    scoped.scope_to_team(team.pk)
    assert scoped.cards == []  # the team's copies are verified too, but not approved by the team
    settings.OPTIML_SKILL_STATUSES = ["approved", "verified"]  # a team that trusts the roundtrip
    scoped.scope_to_team(team.pk)
    assert sorted(c["id"] for c in scoped.cards) == ["fast_math-v1", "vec4-v1"]
    settings.OPTIML_DEFAULT_LIBRARY_SKILL_STATUSES = ["approved"]  # a project that reviews first
    assert StoredSkillSource().cards == []


def test_a_teams_copy_lists_the_nodes_its_runs_made_and_the_node_links_to_the_copy(
        library, people, relu_run, api):
    from search.models import RunNode

    team = people["team"]
    services.skill_library_copy(team=team, actor=people["dana"], card_ids=["vec4-v1"])
    run = relu_run(user=people["alice"], team=team, intent="the team's relu")
    root = RunNode.objects.get(run=run, node_id=0)
    for node_id, library_label in ((98, f"team:{team.pk}"), (99, "default")):
        RunNode.objects.create(run=run, node_id=node_id, parent_id=0, candidate=root.candidate, state="done",
                               engine={**root.engine, "id": node_id, "parent": 0, "depth": 1,
                                       "created": node_id},
                               source="skill:vec4-v1", title="VEC4", status="passed", level="screen",
                               time_ms=0.5, detail={"params": {"card": "vec4-v1", "card_version": {
                                   "library": library_label, "version": 1, "status": "approved"}},
                                   "deltas_vs_parent": {"dram_read_bytes": 0.5 if node_id == 98 else 0.9}})
    bob = api(people["bob"])
    assert [u["node"] for u in bob.get(f"/api/skills/vec4-v1/usage/?team={team.pk}").json()] == [98]
    assert [u["node"] for u in bob.get("/api/skills/vec4-v1/usage/").json()] == [99]
    # The team copy's effects: its node's speed-up and metric change, not the default's.
    effects = bob.get(f"/api/skills/vec4-v1/effects/?team={team.pk}").json()
    (runs,) = [g for g in effects["groups"] if g["kind"] == "run"]
    assert [p["link"] for p in runs["points"]] == [f"/runs/{run.pk}/#node-98"]
    assert effects["metrics"] == [{"label": f"run {run.pk} (relu)", "steps": 1,
                                   "median": {"dram_read_bytes": 0.5}}]
    assert bob.get(f"/api/runs/{run.pk}/nodes/98/").json()["skill_card_url"] == \
        f"/api/skills/vec4-v1/?team={team.pk}"
    assert bob.get(f"/api/runs/{run.pk}/nodes/99/").json()["skill_card_url"] == "/api/skills/vec4-v1/"


def test_a_team_imports_into_its_own_library(library, people, api):
    team = people["team"]
    exported = api(people["bob"]).get("/api/skills/export/").json()
    assert api(people["bob"]).post(f"/api/skills/import/?team={team.pk}", exported,
                                   format="json").status_code == 403
    response = api(people["dana"]).post(f"/api/skills/import/?team={team.pk}", exported, format="json")
    assert response.status_code == 201 and len(response.json()["created"]) == 3
    assert SkillCard.objects.filter(team=team, status="induced").count() == 3
    assert SkillCard.objects.filter(team=None).count() == 3  # the default library as it was
    theirs = api(people["bob"]).get(f"/api/skills/export/?team={team.pk}").json()["cards"]
    assert [c["card_id"] for c in theirs] == ["fast_math-v1", "smem_tile-v1", "vec4-v1"]


def test_every_change_to_a_card_is_a_new_revision(library, people, reviewer):
    def revision() -> int:
        return SkillCard.objects.get(team=None, card_id="vec4-v1").revision

    start = revision()
    services.skill_comment_create(card_id="vec4-v1", author=people["bob"], text="hm")
    services.skill_card_review(card_id="vec4-v1", reviewer=reviewer, decision="approve", comment="ok")
    services.skill_card_edit(card_id="vec4-v1", author=reviewer, notes="n")
    services.cards_admit(admission={"cards": {"vec4-v1": {"status": "verified", "trials": []}}})
    assert revision() == start + 4
    with pytest.raises(ValueError):
        services.skill_comment_create(card_id="vec4-v1", author=people["bob"], text="  ")
    assert revision() == start + 4  # a refused change is no revision
