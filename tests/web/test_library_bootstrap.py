"""`manage.py lineage bootstrap` (what `make start` runs): an empty default library is
filled from the recordings committed under bench/results, the lineages the CLI's skills
source reads, the cards induced from them with the recorded probes and admitted from the
newest recorded roundtrip, and the skeleton cards with their admission by transfer; all or
nothing, and nothing more once the library holds cards (but its skeleton cards, if it has none).

The induction is real: lineage.engine.recorded induces the cards once per process (and
once per content of its inputs on this machine), so only this module's first bootstrap
waits for it; each one still stores every row."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from lineage import services
from lineage.engine import recorded
from lineage.models import Lineage, SkillCard

pytestmark = pytest.mark.django_db


def bootstrap(*args: str) -> str:
    out = StringIO()
    call_command("lineage", "bootstrap", *args, stdout=out)
    return out.getvalue()


def token_cards():
    return SkillCard.objects.filter(team=None).exclude(card_id__startswith="skeleton:")


def recorded_admission() -> dict:
    return json.loads(recorded.recorded_admission_file().read_text())


def test_the_newest_card_admission_is_the_roundtrips_not_a_skeleton_admission():
    path = recorded.recorded_admission_file()
    assert path.name == "2026-12-01-h200-admission.json"  # 2026-12-06's skeleton admission lists trials
    assert [p.stem.removeprefix("lineage-") for p in recorded.recorded_lineage_files()] == [
        "conv2d", "cross_entropy", "maxpool3d", "reduce_sum", "relu", "self_attention", "sgemm",
        "softmax", "topk", "layernorm"]


def test_an_empty_default_library_is_filled_from_the_committed_recordings_and_then_left_alone(
        django_assert_num_queries):
    from lineage.sources import StoredSkillSource

    said = bootstrap()

    admission = recorded_admission()["cards"]
    cards = {c.card_id: c for c in token_cards()}
    assert set(cards) == set(admission) == {c["id"] for c in recorded.recorded_cards()}
    assert {card_id: c.status for card_id, c in cards.items()} == {
        card_id: result["status"] for card_id, result in admission.items()}
    assert cards["vec4-v1"].status == "verified" and cards["vec4-v1"].data["roundtrip"]["own"]["reproduced"]
    assert sorted(Lineage.objects.values_list("task__name", flat=True)) == sorted(
        p.stem.removeprefix("lineage-") for p in recorded.recorded_lineage_files())
    assert cards["vec4-v1"].lineages.count() == 10 and Lineage.objects.filter(origin="import").count() == 10
    skeletons = SkillCard.objects.filter(card_id__startswith="skeleton:")
    assert "the default library: 24 skill cards (16 verified, 7 induced, 1 failed) and " \
           f"{skeletons.count()} skeleton cards (" in said
    assert "from 10 recorded lineages (10 imported, 0 stored already), admitted from " \
           "bench/results/2026-12-01-h200-admission.json, in " in said
    verified = sorted(card_id for card_id, result in admission.items() if result["status"] == "verified")
    assert sorted(card["id"] for card in StoredSkillSource().cards) == verified  # searched before any review

    with django_assert_num_queries(2):  # a library with cards: a count and a look for its skeleton cards
        said = bootstrap()
    assert said.strip() == ("the default library holds 24 skill cards already: nothing else to do "
                            "(lineage bootstrap --force fills it again)")
    assert (SkillCard.objects.count() - skeletons.count(), Lineage.objects.count()) == (24, 10)


def test_a_library_filled_before_skeleton_cards_were_rows_gets_them_at_the_next_start():
    bootstrap()
    SkillCard.objects.filter(card_id__startswith="skeleton:").delete()

    said = bootstrap()

    stored = SkillCard.objects.filter(card_id__startswith="skeleton:")
    assert stored.count() >= 8 and f"stored its {stored.count()} skeleton cards" in said
    tile = stored.get(card_id="skeleton:contraction.smem_register_tile")
    assert tile.status == "verified" and {lineage.task.name for lineage in tile.lineages.all()} >= {"sgemm"}


def test_force_fills_it_again_without_a_second_copy_of_the_lineages_and_keeps_a_reviewers_decision():
    from django.contrib.auth import get_user_model

    bootstrap()
    reviewer = get_user_model().objects.create_user("rita", is_staff=True)
    services.skill_card_review(card_id="vec4-v1", reviewer=reviewer, decision="reject", comment="not here")
    SkillCard.objects.filter(card_id="restrict-v1").delete()  # a card gone from the library comes back

    said = bootstrap("--force")

    assert "(0 imported, 10 stored already)" in said
    assert (token_cards().count(), Lineage.objects.count()) == (24, 10)
    assert SkillCard.objects.get(card_id="vec4-v1").status == "rejected"
    assert SkillCard.objects.get(card_id="restrict-v1").status == "verified"


def test_a_bootstrap_that_cannot_admit_its_cards_stores_nothing(tmp_path, monkeypatch):
    bad = tmp_path / "2099-01-01-h200-admission.json"  # names a card the lineages never gave
    cards = {**recorded_admission()["cards"], "nope-v1": {"status": "verified"}}
    bad.write_text(json.dumps({"cards": cards}))
    monkeypatch.setattr(recorded, "recorded_admission_file", lambda: bad)

    with pytest.raises(CommandError, match=r"2099-01-01-h200-admission.json: no stored skill cards "
                                           r"\['nope-v1'\]"):
        bootstrap()

    assert (SkillCard.objects.count(), Lineage.objects.count()) == (0, 0)

