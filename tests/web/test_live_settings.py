"""Settings of live views and the admin pages of teams, runs and share links."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from optiml_web.env import env_float


def test_env_float_reads_a_number_and_falls_back_when_unset():
    assert env_float("POLL", 0.1, environ={"POLL": "0.5"}) == 0.5
    assert env_float("POLL", 0.1, environ={"POLL": ""}) == 0.1
    assert env_float("POLL", 0.1, environ={}) == 0.1


@pytest.mark.parametrize("raw", ["fast", "-1", "nan"])
def test_env_float_refuses_what_is_not_a_non_negative_number(raw):
    with pytest.raises(ImproperlyConfigured, match="POLL"):
        env_float("POLL", 0.1, environ={"POLL": raw})


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["accounts_team", "accounts_membership", "search_run", "search_sharelink"])
def test_the_admin_lists_teams_memberships_runs_and_share_links(admin_client, people, relu_run, page):
    from search import sharing_services

    run = relu_run(budget=1, user=people["alice"], team=people["team"])
    sharing_services.share_create(run=run, user=people["alice"])

    assert admin_client.get(reverse(f"admin:{page}_changelist")).status_code == 200


@pytest.mark.django_db
def test_the_admin_run_page_shows_its_share_links_without_tokens(admin_client, people, relu_run):
    from search import sharing_services
    from search.models import ShareLink

    run = relu_run(budget=1, user=people["alice"])
    _, token = sharing_services.share_create(run=run, user=people["alice"])
    page = admin_client.get(reverse("admin:search_run_change", args=[run.pk])).content.decode()
    link_page = admin_client.get(
        reverse("admin:search_sharelink_change", args=[ShareLink.objects.get().pk])).content.decode()

    assert token not in page and token not in link_page
    assert ShareLink.objects.get().token_hash in link_page
