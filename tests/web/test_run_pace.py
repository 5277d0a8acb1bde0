"""A running run's pace in its detail (queue): candidates per minute over the last ten
minutes, the minutes its budget still needs at that pace, evaluations under way."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from profiling.models import Evaluation
from search import selectors
from search.models import Run, RunNode

pytestmark = pytest.mark.django_db


def test_the_pace_comes_from_the_finish_times_of_the_runs_evaluations(relu_run, api, people):
    run = relu_run(4, user=people["alice"])
    done = list(RunNode.objects.filter(run=run, state="done").exclude(evaluation=None))
    assert len(done) >= 2
    now = timezone.now()
    for minutes, node in zip(range(len(done)), done, strict=True):  # one a minute, the last just now
        Evaluation.objects.filter(pk=node.evaluation_id).update(
            finished_at=now - datetime.timedelta(minutes=len(done) - 1 - minutes))
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, budget=run.evaluated + 10)
    run.refresh_from_db()

    pace = selectors.run_pace(run=run, now=now)

    span = max(1, len(done) - 1)
    assert pace["per_minute"] == pytest.approx(len(done) / span, rel=0.02)
    assert pace["minutes_left"] == pytest.approx(10 / pace["per_minute"], rel=0.05)
    body = api(people["alice"]).get(f"/api/runs/{run.pk}/").json()
    assert body["queue"]["per_minute"] is not None and body["queue"]["under_way"] == 0


def test_a_finished_run_or_one_with_nothing_recent_has_no_pace(relu_run):
    run = relu_run(2)
    assert selectors.run_pace(run=run) == {"per_minute": None, "minutes_left": None, "under_way": 0,
                                           "queued": 0, "queued_ahead": 0, "measuring": 0}
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    later = timezone.now() + datetime.timedelta(hours=1)
    assert selectors.run_pace(run=run, now=later)["per_minute"] is None
