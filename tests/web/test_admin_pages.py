"""The admin shows tasks, candidates and evaluations to a superuser."""

from __future__ import annotations

import pytest
from django.urls import reverse

from profiling import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def some_evaluations(relu_task, store, fast, leaky, recorded, options):
    return [
        services.evaluation_run(
            task_name="relu", candidate=store(recording), options=options, evaluator=recorded
        )
        for recording in (fast, leaky)
    ]


@pytest.mark.parametrize("model", ["task", "candidate", "evaluation"])
def test_each_changelist_loads_for_a_superuser(admin_client, some_evaluations, model):
    response = admin_client.get(reverse(f"admin:profiling_{model}_changelist"))

    assert response.status_code == 200


def test_the_evaluation_list_shows_status_guard_and_median(admin_client, some_evaluations):
    page = admin_client.get(reverse("admin:profiling_evaluation_changelist")).content.decode()

    assert "wrong_values" in page
    assert "0.5121" in page
    assert "rejected" in page


def test_the_evaluation_page_shows_the_verdict_read_only(admin_client, some_evaluations):
    rejected = some_evaluations[1]

    page = admin_client.get(reverse("admin:profiling_evaluation_change", args=[rejected.pk])).content.decode()

    assert "497 of 1000 elements differ" in page
    assert 'name="verdict"' not in page


def test_the_evaluation_list_filters_by_status(admin_client, some_evaluations):
    url = reverse("admin:profiling_evaluation_changelist") + "?status__exact=passed"

    shown = admin_client.get(url).context["cl"].result_list

    assert [evaluation.status for evaluation in shown] == ["passed"]


def test_anonymous_visitors_are_sent_to_the_login_page(client):
    response = client.get(reverse("admin:profiling_evaluation_changelist"))

    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]
