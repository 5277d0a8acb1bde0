"""Skills on by default (issue 35): the New session form lists the `skills` source with what
the library lends it, and says so when it lends nothing; a search then still runs, the
skills source proposing nothing; `manage.py optimize` uses it too."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from lineage.models import SkillCard
from search.models import Run, RunNode
from tests.web.conftest import RUN_RECORDING

pytestmark = pytest.mark.django_db


def notes(client) -> dict[str, str]:
    return {row["name"]: row["note"] for row in client.get("/api/sources/").json()}


def test_an_empty_library_is_said_to_lend_the_skills_source_nothing(api, people):
    listed = notes(api(people["alice"]))

    assert list(listed) == ["tunable", "rewrite", "skills"]
    assert "no card in the library" in listed["skills"] and "lineage bootstrap" in listed["skills"]
    assert listed["tunable"] == listed["rewrite"] == ""


def test_the_skills_source_counts_the_cards_a_search_may_use(api, people):
    for number, status in enumerate(["verified", "approved", "induced", "rejected"]):
        SkillCard.objects.create(card_id=f"card-{number}-v1", status=status, data={"id": f"card-{number}-v1"})

    assert notes(api(people["alice"]))["skills"] == "2 cards in the library"  # verified, approved


def test_a_search_with_the_skills_source_on_an_empty_library_still_runs(relu_run, people):
    run = relu_run(budget=3, user=people["alice"])

    assert "skills" in run.sources and not SkillCard.objects.exists()
    assert RunNode.objects.filter(run=run).exclude(state="pending").count() == 3
    assert not RunNode.objects.filter(run=run, source__startswith="skill:").exists()


def test_the_optimize_command_searches_with_the_skills_source_by_default(settings):
    settings.OPTIML_EVALUATOR = f"recorded:{RUN_RECORDING}"

    call_command("optimize", "--task", "relu", "--budget", "1", stdout=StringIO())

    assert Run.objects.get().sources == ["tunable", "rewrite", "skills"]
