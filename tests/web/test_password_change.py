"""A signed-in user changes their own password (Django's PasswordChangeView at
/accounts/password/, linked from their name in the navigation bar): the current password
is required, the new one signs in afterwards, and a visitor is sent to sign in."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

NEW = "a-fresh-passphrase-42"


@pytest.fixture
def bob_client(people):
    client = Client()
    client.force_login(people["bob"])
    return client


def change(client: Client, old: str, new: str = NEW, again: str | None = None):
    return client.post("/accounts/password/", {"old_password": old, "new_password1": new,
                                               "new_password2": new if again is None else again})


def signs_in(username: str, password: str) -> bool:
    response = Client().post("/accounts/login/", {"username": username, "password": password})
    return response.status_code == 302


def test_the_signed_in_users_name_links_to_the_password_form(bob_client):
    page = bob_client.get("/runs/").content.decode()

    assert 'href="/accounts/password/"' in page

    form = bob_client.get("/accounts/password/")
    assert form.status_code == 200
    assert "Change password" in form.content.decode() and 'name="old_password"' in form.content.decode()


def test_a_password_change_works_and_the_new_password_signs_in(people, bob_client):
    response = change(bob_client, "bob-secret-1")

    assert response.status_code == 302 and response["Location"] == "/accounts/password/done/"
    done = bob_client.get(response["Location"])
    assert done.status_code == 200 and "Password changed" in done.content.decode()
    assert bob_client.get("/api/me/").json()["username"] == "bob"  # this session stays signed in
    assert signs_in("bob", NEW)
    assert not signs_in("bob", "bob-secret-1")


def test_a_wrong_current_password_is_refused_with_the_forms_error(people, bob_client):
    response = change(bob_client, "not-my-password")

    assert response.status_code == 200
    assert response.context["form"].errors["old_password"]
    assert "Your old password was entered incorrectly" in response.content.decode()
    people["bob"].refresh_from_db()
    assert people["bob"].check_password("bob-secret-1")
    assert signs_in("bob", "bob-secret-1") and not signs_in("bob", NEW)


def test_a_weak_or_mistyped_new_password_is_refused(people, bob_client):
    assert change(bob_client, "bob-secret-1", new="12345678").status_code == 200  # the validators
    assert change(bob_client, "bob-secret-1", again=NEW + "x").status_code == 200

    people["bob"].refresh_from_db()
    assert people["bob"].check_password("bob-secret-1")


def test_a_signed_out_visitor_is_sent_to_sign_in(people):
    visitor = Client()

    for path in ("/accounts/password/", "/accounts/password/done/"):
        response = visitor.get(path)
        assert response.status_code == 302
        assert response["Location"] == f"/accounts/login/?next={path}"
    assert change(visitor, "bob-secret-1").status_code == 302
    people["bob"].refresh_from_db()
    assert people["bob"].check_password("bob-secret-1")


def test_the_current_password_is_checked_under_the_sign_in_throttle(people, bob_client, settings):
    """A session left open is no unthrottled way to guess its user's password."""
    settings.OPTIML_LOGIN_FAILURE_LIMIT = 3
    settings.OPTIML_LOGIN_FIRST_WAIT_S = 600
    for guess in ("guess-1", "guess-2", "guess-3"):
        assert "Your old password was entered incorrectly" in change(bob_client, guess).content.decode()

    refused = change(bob_client, "bob-secret-1")

    assert refused.status_code == 200
    assert "Too many wrong passwords: try again in 0:10:00" in refused.content.decode()
    people["bob"].refresh_from_db()
    assert people["bob"].check_password("bob-secret-1")


def test_the_right_current_password_takes_back_its_count(people, bob_client, settings):
    settings.OPTIML_LOGIN_FAILURE_LIMIT = 3
    change(bob_client, "guess-1")
    change(bob_client, "guess-2")
    assert change(bob_client, "bob-secret-1").status_code == 302

    assert change(bob_client, "guess-3").status_code == 200
    assert change(bob_client, NEW, new="another-passphrase-43").status_code == 302  # not held up
