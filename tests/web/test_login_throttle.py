"""Sign-in is throttled (django-axes): after AXES_FAILURE_LIMIT failures for one username,
or from one address, the next attempt is refused with a 429 that says why and for how
long, even with the right password; once the cool-off has passed, the right password
signs in again."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

LIMIT = 3
COOLOFF_S = 1.0


@pytest.fixture
def throttled(settings, people):
    settings.AXES_FAILURE_LIMIT = LIMIT
    settings.AXES_COOLOFF_TIME = timedelta(seconds=COOLOFF_S)
    return people


def sign_in(username: str, password: str, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).post("/accounts/login/", {"username": username, "password": password})


def test_the_attempt_after_the_limit_is_refused_with_a_clear_message_even_with_the_right_password(
    throttled
):
    for _ in range(LIMIT - 1):
        assert sign_in("bob", "wrong").status_code == 200  # the form again, with its error

    refused = sign_in("bob", "wrong")  # the LIMITth failure locks
    assert refused.status_code == 429
    page = refused.content.decode()
    assert "Too many failed sign-ins" in page and f"paused after {LIMIT} failed attempts" in page
    assert "Try again in 0:00:01" in page
    again = sign_in("bob", "bob-secret-1")
    assert again.status_code == 429 and "_auth_user_id" not in again.wsgi_request.session


def test_a_correct_sign_in_after_the_cool_off_works(throttled):
    for _ in range(LIMIT):
        sign_in("bob", "wrong")
    assert sign_in("bob", "bob-secret-1").status_code == 429

    time.sleep(COOLOFF_S + 0.2)
    client = Client(REMOTE_ADDR="10.0.0.1")
    response = client.post("/accounts/login/", {"username": "bob", "password": "bob-secret-1"})

    assert response.status_code == 302
    assert client.get("/api/me/").json()["username"] == "bob"


def test_failures_count_per_username_from_any_address(throttled):
    for index in range(LIMIT):
        sign_in("bob", "wrong", address=f"10.0.1.{index}")

    assert sign_in("bob", "bob-secret-1", address="10.0.2.1").status_code == 429
    assert sign_in("alice", "alice-secret-1", address="10.0.2.1").status_code == 302  # others may


def test_failures_count_per_address_whatever_the_username(throttled):
    for name in ("nobody", "somebody", "anybody")[:LIMIT]:
        sign_in(name, "guess", address="10.0.3.3")

    assert sign_in("alice", "alice-secret-1", address="10.0.3.3").status_code == 429
    assert sign_in("alice", "alice-secret-1", address="10.0.3.4").status_code == 302


def test_a_success_before_the_limit_resets_the_count(throttled):
    for _ in range(LIMIT - 1):
        sign_in("bob", "wrong")
    assert sign_in("bob", "bob-secret-1").status_code == 302

    for _ in range(LIMIT - 1):
        assert sign_in("bob", "wrong").status_code == 200
