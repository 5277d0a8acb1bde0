"""The page views (optiml_web/pages.py): who may open which page, and that each page
names itself and loads the built front end (no browser needed)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client):
    client.force_login(User.objects.create_user("grace", password="compiler-1952"))
    return client


@pytest.mark.parametrize("path", ["/runs/", "/runs/new/", "/runs/7/", "/skills/", "/skills/vec4-v1/"])
def test_a_signed_out_visitor_is_sent_to_sign_in(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize(
    ("path", "page"), [("/runs/", "runs"), ("/runs/new/", "new-run"), ("/runs/7/", "run"),
                       ("/skills/", "skills"), ("/skills/vec4-v1/", "skill"), ("/lineages/3/", "lineage")]
)
def test_each_page_names_itself_and_loads_the_bundle(signed_in, path, page):
    response = signed_in.get(path)
    html = response.content.decode()
    assert response.status_code == 200
    assert f'data-page="{page}"' in html
    assert "/static/assets/main.js" in html and "/static/assets/main.css" in html
    assert 'name="csrf-token"' in html and "csrftoken" in response.cookies


def test_the_card_page_carries_its_card_id_and_takes_only_card_ids(signed_in):
    assert 'data-card-id="vec4-v1"' in signed_in.get("/skills/vec4-v1/").content.decode()
    assert signed_in.get("/skills/not a card/").status_code == 404


def test_the_run_page_carries_its_run_id(signed_in):
    assert 'data-run-id="7"' in signed_in.get("/runs/7/").content.decode()


def test_a_share_link_opens_without_signing_in(client):
    response = client.get("/share/abc_DEF-123/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-page="share"' in html and 'data-share-token="abc_DEF-123"' in html


def test_the_home_page_is_the_first_run_page_until_there_is_a_run_then_the_runs_list(signed_in):
    from profiling.harness import tasks
    from search import services

    response = signed_in.get("/")
    assert response.status_code == 302 and response["Location"] == "/welcome/"
    relu = tasks.get("relu")
    services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan, budget=1,
                        user=User.objects.get(username="grace"))
    response = signed_in.get("/")
    assert response.status_code == 302 and response["Location"] == "/runs/"
