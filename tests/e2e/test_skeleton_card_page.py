"""A skeleton card's page in a real Chromium (issue 31): stored by `lineage skeletons`, the
library lists it by its intent and skeleton; its page shows the skeleton's preconditions,
the example it makes of a source task's kernel as a side-by-side diff and its transfer
trials, and a reviewer approves it there. test_explorer's server and app, imported here by
name (F811). The browser half is tests/e2e/skeleton_card.mjs; the screenshot goes to
build/e2e/skeleton-card.png."""
# ruff: noqa: F811

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_explorer import MISSING, _browse, _manage, app_env, server  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
SCRIPT = Path(__file__).with_name("skeleton_card.mjs")


def test_a_reviewer_reads_a_skeleton_card_with_its_example_and_trials_and_approves_it(server, app_env):
    _manage(app_env, "shell", "-c", "from django.contrib.auth.models import User\n"
                                    "User.objects.filter(username='ada').update(is_staff=True)")
    said = _manage(app_env, "lineage", "skeletons")
    assert "skeleton:contraction.smem_register_tile verified" in said

    result = _browse(SCRIPT, *server)

    assert "SMEM_TILE · skeleton contraction.smem_register_tile" in result["library_rows"], result
    assert result["example_side_by_side"] is True and result["trials"] >= 2
    assert any("lifts to a batched_contraction form" in p for p in result["preconditions"])
    assert (result["status_before"], result["status_after"]) == ("verified", "approved")
    assert result["page_errors"] == []
    stored = _manage(app_env, "shell", "-c", (
        "from lineage.models import SkillCard\n"
        "card = SkillCard.objects.get(card_id='skeleton:contraction.smem_register_tile')\n"
        "print(card.status, card.reviews.count())"))
    assert stored.splitlines()[-1] == "approved 1"
