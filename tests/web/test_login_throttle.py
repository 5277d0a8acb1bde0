"""Sign-in is throttled (accounts/signing_in.py) with a wait that grows, never a lock:
past the free failures a try waits, doubling with each failure up to the longest wait,
and is refused (429, saying how long) before its password is checked, the right one
included; once the wait has passed, the right password signs in. Failures count per
(username, address), and per address over many names; a browser that has signed in as
the name before counts under its own device cookie, so nobody else's failures, a
colleague's behind the same address or a stranger's who knows the name, hold it up.

The audit's findings (issue 34, part 5), each a test below that failed on django-axes'
lock: one user's failures locked every user behind the address, the superuser included
(`test_one_users_failures_never_hold_up_a_colleague_or_the_superuser_behind_the_address`);
anyone could lock a named account for 15 minutes (`..._cannot_hold_up_a_user_who_signed_in_there_before`,
`test_guessing_many_names_holds_up_only_browsers_new_to_the_address`); and the lock was a
hard one (`test_the_wait_ends_and_the_right_password_signs_in_again`)."""

from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from accounts.models import SignInFailures

pytestmark = pytest.mark.django_db

LIMIT = 3
ADDRESS_LIMIT = 10  # more than LIMIT, as in production (5 and 50)
FIRST_WAIT_S = 60
LONGEST_WAIT_S = 15 * 60


class Clock:
    """The throttle's clock, moved by the test rather than by sleeping."""

    def __init__(self) -> None:
        self.time = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr("accounts.signing_in.timezone", SimpleNamespace(now=clock.now))
    return clock


@pytest.fixture
def throttled(settings, people, clock):
    settings.OPTIML_LOGIN_FAILURE_LIMIT = LIMIT
    settings.OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT = ADDRESS_LIMIT
    settings.OPTIML_LOGIN_FIRST_WAIT_S = FIRST_WAIT_S
    settings.OPTIML_LOGIN_LONGEST_WAIT_S = LONGEST_WAIT_S
    settings.OPTIML_LOGIN_MEMORY_S = 24 * 3600
    return people


@pytest.fixture
def superuser(throttled):
    return get_user_model().objects.create_superuser("root", password="root-secret-1")


def browser(address: str = "10.0.0.1") -> Client:
    return Client(REMOTE_ADDR=address)


def sign_in(username: str, password: str, address: str = "10.0.0.1", path: str = "/accounts/login/",
            client: Client | None = None):
    client = client or browser(address)
    return client.post(path, {"username": username, "password": password})


def signed_in_before(username: str, address: str = "10.0.0.1") -> Client:
    """A browser that has signed in as `username` (and out again): it holds the device cookie."""
    client = browser(address)
    assert sign_in(username, f"{username}-secret-1", client=client).status_code == 302
    assert "optiml_device" in client.cookies
    client.post("/accounts/logout/")
    return client


def test_past_the_free_failures_a_try_waits_even_with_the_right_password_and_says_how_long(throttled):
    assert [sign_in("bob", "wrong").status_code for _ in range(LIMIT)] == [200] * LIMIT

    refused = sign_in("bob", "bob-secret-1")

    assert refused.status_code == 429 and "_auth_user_id" not in refused.wsgi_request.session
    page = refused.content.decode()
    assert "Too many failed sign-ins" in page
    assert f"Signing in as bob from here waits after {LIMIT} failed attempts" in page
    assert "Try again in 0:01:00" in page and "up to 0:15:00" in page


def test_the_wait_ends_and_the_right_password_signs_in_again(throttled, clock):
    for _ in range(LIMIT):
        sign_in("bob", "wrong")
    clock.advance(FIRST_WAIT_S - 1)
    assert sign_in("bob", "bob-secret-1").status_code == 429

    clock.advance(1)
    client = browser()
    assert sign_in("bob", "bob-secret-1", client=client).status_code == 302
    assert client.get("/api/me/").json()["username"] == "bob"


def waits_s(page) -> int:
    hours, minutes, seconds = re.search(r"Try again in (\d+):(\d\d):(\d\d)", page.content.decode()).groups()
    return 3600 * int(hours) + 60 * int(minutes) + int(seconds)


def test_each_further_failure_doubles_the_wait_up_to_the_longest(throttled, clock):
    for _ in range(LIMIT):
        sign_in("bob", "wrong")
    waits = []
    for _ in range(6):
        refused = sign_in("bob", "bob-secret-1")
        assert refused.status_code == 429
        waits.append(waits_s(refused))
        clock.advance(waits[-1])
        assert sign_in("bob", "wrong").status_code == 200  # checked and counted: the wait had passed

    assert waits == [60, 120, 240, 480, 900, 900]


def test_tries_during_a_wait_are_refused_unchecked_and_do_not_lengthen_it(throttled, clock):
    for _ in range(LIMIT):
        sign_in("bob", "wrong")
    clock.advance(30)
    assert {sign_in("bob", guess).status_code for guess in ("guess1", "guess2", "bob-secret-1")} == {429}

    clock.advance(FIRST_WAIT_S - 30)
    assert sign_in("bob", "bob-secret-1").status_code == 302


def test_one_users_failures_never_hold_up_a_colleague_or_the_superuser_behind_the_address(
    throttled, superuser, clock
):
    # bob keeps trying his own name from the office address, waiting out each wait, until
    # he has failed far more often than the address's free allowance
    for _ in range(3 * ADDRESS_LIMIT):
        sign_in("bob", "wrong", address="10.0.5.5")
        clock.advance(LONGEST_WAIT_S)
    assert sign_in("bob", "wrong", address="10.0.5.5").status_code == 200
    assert sign_in("bob", "bob-secret-1", address="10.0.5.5").status_code == 429  # his own name waits

    # colleagues in browsers new to the site, and the superuser, still sign in from there
    assert sign_in("alice", "alice-secret-1", address="10.0.5.5").status_code == 302
    assert sign_in("root", "root-secret-1", address="10.0.5.5", path="/admin/login/").status_code == 302


def test_many_refused_tries_at_one_name_do_not_hold_up_others_either(throttled, superuser):
    for _ in range(5 * ADDRESS_LIMIT):  # no time passes: all but the first LIMIT are refused
        sign_in("bob", "wrong", address="10.0.6.6")

    assert sign_in("root", "root-secret-1", address="10.0.6.6", path="/admin/login/").status_code == 302


def test_a_stranger_at_the_same_address_cannot_hold_up_a_user_who_signed_in_there_before(throttled):
    bobs_browser = signed_in_before("bob", address="10.0.1.1")
    for _ in range(4 * LIMIT):
        sign_in("bob", "guess", address="10.0.1.1")  # a fresh browser each time, as a script
    assert sign_in("bob", "bob-secret-1", address="10.0.1.1").status_code == 429  # a new browser waits

    assert sign_in("bob", "bob-secret-1", client=bobs_browser).status_code == 302


def test_nobody_elsewhere_can_hold_up_a_named_account(throttled):
    for index in range(2):
        for _ in range(2 * LIMIT):
            sign_in("bob", "wrong", address=f"10.0.2.{index}")

    assert sign_in("bob", "bob-secret-1", address="10.0.2.9").status_code == 302


def test_guessing_many_names_holds_up_only_browsers_new_to_the_address(throttled, superuser):
    alices_browser = signed_in_before("alice", address="10.0.3.3")
    roots_browser = signed_in_before("root", address="10.0.3.3")
    for index in range(ADDRESS_LIMIT):  # one guess each: no name is near its own limit
        assert sign_in(f"nobody{index}", "guess", address="10.0.3.3").status_code == 200

    refused = sign_in("carol", "carol-secret-1", address="10.0.3.3")

    assert refused.status_code == 429
    page = refused.content.decode()
    assert f"Signing in from your address waits after {ADDRESS_LIMIT} failed attempts under any" in page
    assert sign_in("carol", "carol-secret-1", address="10.0.3.4").status_code == 302  # elsewhere
    assert sign_in("alice", "alice-secret-1", client=alices_browser).status_code == 302
    assert sign_in("root", "root-secret-1", path="/admin/login/", client=roots_browser).status_code == 302
    assert roots_browser.get("/admin/").status_code == 200


def test_the_address_wait_covers_the_admin_sign_in_too(throttled, superuser):
    for index in range(ADDRESS_LIMIT):
        sign_in(f"nobody{index}", "guess", address="10.0.4.4")

    assert sign_in("root", "root-secret-1", address="10.0.4.4", path="/admin/login/").status_code == 429
    assert sign_in("root", "root-secret-1", address="10.0.4.5", path="/admin/login/").status_code == 302


def test_a_device_counts_its_own_failures_and_waits_for_them(throttled):
    bobs_browser = signed_in_before("bob")
    for _ in range(LIMIT):
        assert sign_in("bob", "wrong", client=bobs_browser).status_code == 200

    assert sign_in("bob", "bob-secret-1", client=bobs_browser).status_code == 429


def test_a_forged_or_borrowed_device_cookie_is_no_way_around_the_wait(throttled):
    alices_browser = signed_in_before("alice")
    for _ in range(LIMIT):
        sign_in("bob", "wrong")
    forged = browser()
    forged.cookies["optiml_device"] = "bob:forged"

    assert sign_in("bob", "bob-secret-1", client=forged).status_code == 429
    assert sign_in("bob", "bob-secret-1", client=alices_browser).status_code == 429  # alice's, not bob's


def test_a_success_before_the_limit_resets_the_count(throttled):
    for _ in range(LIMIT - 1):
        sign_in("bob", "wrong")
    assert sign_in("bob", "bob-secret-1").status_code == 302

    for _ in range(LIMIT):
        assert sign_in("bob", "wrong").status_code == 200
    assert sign_in("bob", "bob-secret-1").status_code == 429


def test_failures_are_forgotten_a_day_after_the_latest(throttled, clock):
    for _ in range(LIMIT + 5):
        sign_in("bob", "wrong")
        clock.advance(LONGEST_WAIT_S)

    clock.advance(24 * 3600)
    assert [sign_in("bob", "wrong").status_code for _ in range(LIMIT)] == [200] * LIMIT


@pytest.mark.django_db(transaction=True)
def test_guesses_sent_at_once_get_no_more_checks_than_guesses_sent_one_by_one(settings):
    """Each try is counted before its password is checked, under the count's row lock: a
    burst of tries at once cannot all pass the check before the first failure is counted."""
    settings.OPTIML_LOGIN_FAILURE_LIMIT = LIMIT
    settings.OPTIML_LOGIN_FIRST_WAIT_S = FIRST_WAIT_S
    # Django's own (slow) password hash, as in production: the window a burst aims at
    get_user_model().objects.create_user("bob", password="bob-secret-1")
    tries = 12
    start = threading.Barrier(tries)

    def guess(index: int) -> int:
        try:
            start.wait()
            return sign_in("bob", f"guess{index}", address="10.0.7.7").status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=tries) as pool:
        answers = sorted(pool.map(guess, range(tries)))

    assert answers == [200] * LIMIT + [429] * (tries - LIMIT)


def test_right_passwords_take_back_what_they_added_to_the_address_in_advance(throttled):
    for _ in range(2 * ADDRESS_LIMIT):  # a room of colleagues, each in a browser new to the site
        assert sign_in("alice", "alice-secret-1", address="10.0.8.8").status_code == 302

    assert sign_in("carol", "wrong", address="10.0.8.8").status_code == 200
    assert sign_in("carol", "carol-secret-1", address="10.0.8.8").status_code == 302


def test_an_administrator_ends_a_wait_by_deleting_its_count_in_the_admin(throttled, superuser):
    for _ in range(LIMIT):
        sign_in("bob", "wrong", address="10.0.9.9")
    assert sign_in("bob", "bob-secret-1", address="10.0.9.9").status_code == 429
    admin = Client()
    admin.force_login(superuser)
    listing = admin.get("/admin/accounts/signinfailures/?q=bob")
    assert listing.status_code == 200 and "pair:10.0.9.9 bob" in listing.content.decode()

    row = SignInFailures.objects.get(key="pair:10.0.9.9 bob")
    assert admin.post(f"/admin/accounts/signinfailures/{row.pk}/delete/", {"post": "yes"}).status_code == 302

    assert sign_in("bob", "bob-secret-1", address="10.0.9.9").status_code == 302


def test_a_name_that_extends_an_ipv6_address_counts_apart_from_the_longer_address(throttled):
    for _ in range(2 * LIMIT):
        sign_in("5:bob", "guess", address="2001:db8::1")

    assert sign_in("bob", "bob-secret-1", address="2001:db8::1:5").status_code == 302


def test_failed_and_refused_sign_ins_are_logged_with_the_name_quoted(throttled, caplog):
    with caplog.at_level(logging.WARNING, logger="accounts.backends"):
        for _ in range(LIMIT):
            sign_in("bob\nforged line", "wrong", address="10.0.10.10")
        sign_in("bob\nforged line", "wrong", address="10.0.10.10")

    lines = [record.getMessage() for record in caplog.records if record.name == "accounts.backends"]
    assert lines[:LIMIT] == ["Sign-in as 'bob\\nforged line' from 10.0.10.10 failed"] * LIMIT
    assert lines[LIMIT] == "Sign-in as 'bob\\nforged line' from 10.0.10.10 refused: it waits 60 s more"
