"""Sign-in is throttled (django-axes, and accounts/backends.py): failures are counted per
(username, address) pair, so after AXES_FAILURE_LIMIT failures that name is refused from
that address, with a 429 that says why and for how long, even with the right password,
while the same name from elsewhere and other names from the same address still sign in.
An address with OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT failures across all names is refused
altogether. Once the cool-off has passed, the right password signs in again."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

LIMIT = 3
ADDRESS_LIMIT = 10  # more than LIMIT, as in production (5 and 50)
COOLOFF_S = 1.0


@pytest.fixture
def throttled(settings, people):
    settings.AXES_FAILURE_LIMIT = LIMIT
    settings.OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT = ADDRESS_LIMIT
    settings.AXES_COOLOFF_TIME = timedelta(seconds=COOLOFF_S)
    return people


@pytest.fixture
def superuser(throttled):
    return get_user_model().objects.create_superuser("root", password="root-secret-1")


def sign_in(username: str, password: str, address: str = "10.0.0.1", path: str = "/accounts/login/"):
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def test_the_attempt_after_the_limit_is_refused_with_a_clear_message_even_with_the_right_password(
    throttled
):
    for _ in range(LIMIT - 1):
        assert sign_in("bob", "wrong").status_code == 200  # the form again, with its error

    refused = sign_in("bob", "wrong")  # the LIMITth failure locks
    assert refused.status_code == 429
    page = refused.content.decode()
    assert "Too many failed sign-ins" in page
    assert f"Signing in as bob from your address is paused after {LIMIT} failed attempts" in page
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


def test_the_pair_is_locked_not_the_name_nor_the_address(throttled):
    for _ in range(LIMIT):
        sign_in("bob", "wrong", address="10.0.1.1")
    assert sign_in("bob", "bob-secret-1", address="10.0.1.1").status_code == 429

    # bob from elsewhere, and a colleague behind the same address, still sign in
    assert sign_in("bob", "bob-secret-1", address="10.0.1.2").status_code == 302
    assert sign_in("alice", "alice-secret-1", address="10.0.1.1").status_code == 302


def test_nobody_elsewhere_can_lock_a_named_account(throttled):
    for index in range(2):  # under the address limit from each address
        for _ in range(LIMIT):
            sign_in("bob", "wrong", address=f"10.0.2.{index}")

    assert sign_in("bob", "bob-secret-1", address="10.0.2.9").status_code == 302


def test_an_address_is_refused_after_the_address_limit_across_many_names(throttled):
    for index in range(ADDRESS_LIMIT - 1):  # one guess each: no pair is near its limit
        assert sign_in(f"nobody{index}", "guess", address="10.0.3.3").status_code == 200
    assert sign_in("alice", "alice-secret-1", address="10.0.3.3").status_code == 302  # not yet
    assert sign_in("somebody", "guess", address="10.0.3.3").status_code == 200  # the limit's failure

    refused = sign_in("alice", "alice-secret-1", address="10.0.3.3")

    assert refused.status_code == 429 and "_auth_user_id" not in refused.wsgi_request.session
    page = refused.content.decode()
    assert f"Signing in from your address is paused after {ADDRESS_LIMIT} failed attempts" in page
    assert "Try again in 0:00:01" in page
    assert sign_in("alice", "alice-secret-1", address="10.0.3.4").status_code == 302  # elsewhere


def test_the_address_limit_covers_the_admin_sign_in_too(throttled, superuser):
    for index in range(ADDRESS_LIMIT):
        sign_in(f"nobody{index}", "guess", address="10.0.4.4")

    assert sign_in("root", "root-secret-1", address="10.0.4.4", path="/admin/login/").status_code == 429
    assert sign_in("root", "root-secret-1", address="10.0.4.5", path="/admin/login/").status_code == 302


def test_the_superuser_is_not_locked_by_others_failures(throttled, superuser):
    # colleagues behind the same address lock themselves (under the address limit) ...
    for name in ("alice", "bob"):
        for _ in range(LIMIT):
            sign_in(name, "wrong", address="10.0.5.5")
    assert sign_in("bob", "bob-secret-1", address="10.0.5.5").status_code == 429
    # ... and someone elsewhere guesses root's password
    for _ in range(LIMIT):
        sign_in("root", "guess", address="192.0.2.66")

    client = Client(REMOTE_ADDR="10.0.5.5")
    assert client.post("/admin/login/", {"username": "root", "password": "root-secret-1"}).status_code == 302
    assert client.get("/admin/").status_code == 200


def test_a_success_before_the_limit_resets_the_count(throttled):
    for _ in range(LIMIT - 1):
        sign_in("bob", "wrong")
    assert sign_in("bob", "bob-secret-1").status_code == 302

    for _ in range(LIMIT - 1):
        assert sign_in("bob", "wrong").status_code == 200
