"""Signing up (accounts/views.py, accounts/joining.py): open where settings.OPTIML_OPEN_SIGN_UP
says so (on in the embedded default, off in production), Django's UserCreationForm and
password validators, a limit per address; and the first-run page a new user lands on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import SignUp

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
GOOD = "a-long-passphrase-7"


@pytest.fixture
def open_sign_up(settings):
    settings.OPTIML_OPEN_SIGN_UP = True
    # A deliberately slow hash is for real passwords; these make tests wait for nothing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def sign_up(client: Client, username: str = "ann", password: str = GOOD, again: str | None = None,
            address: str = "203.0.113.7"):
    return client.post("/accounts/sign-up/", {"username": username, "password1": password,
                                              "password2": password if again is None else again},
                       REMOTE_ADDR=address)


def users() -> list[str]:
    return sorted(get_user_model().objects.values_list("username", flat=True))


def test_a_visitor_signs_up_is_signed_in_and_lands_on_the_first_run_page(open_sign_up):
    client = Client()

    form = client.get("/accounts/sign-up/")
    assert form.status_code == 200 and 'name="password2"' in form.content.decode()

    response = sign_up(client)

    assert response.status_code == 302 and response["Location"] == "/welcome/"
    assert client.get("/api/me/").json()["username"] == "ann"
    user = get_user_model().objects.get(username="ann")
    assert user.check_password(GOOD) and not user.is_staff and not user.is_superuser
    assert SignUp.objects.get(user=user).ip_address == "203.0.113.7"
    assert Client().post("/accounts/login/", {"username": "ann", "password": GOOD}).status_code == 302


def test_the_sign_in_page_links_to_sign_up_only_while_it_is_open(settings):
    settings.OPTIML_OPEN_SIGN_UP = True
    assert 'href="/accounts/sign-up/"' in Client().get("/accounts/login/").content.decode()

    settings.OPTIML_OPEN_SIGN_UP = False
    assert 'href="/accounts/sign-up/"' not in Client().get("/accounts/login/").content.decode()


def test_with_sign_up_off_the_page_is_a_404_that_says_how_to_join_and_makes_nobody(settings):
    settings.OPTIML_OPEN_SIGN_UP = False
    client = Client()

    page = client.get("/accounts/sign-up/")
    posted = sign_up(client)

    assert page.status_code == 404 and posted.status_code == 404
    assert "Sign-up is closed" in page.content.decode() and "invitation" in page.content.decode()
    assert users() == []


def test_mistyped_and_weak_passwords_are_refused_with_the_forms_errors(open_sign_up):
    client = Client()

    mistyped = sign_up(client, again=GOOD + "x")
    weak = sign_up(client, password="12345678")
    like_the_name = sign_up(client, username="margaret-hamilton", password="margaret-hamilton")

    assert mistyped.status_code == 200 and mistyped.context["form"].errors["password2"]
    assert "The two password fields didn’t match." in mistyped.content.decode()
    assert weak.status_code == 200
    assert "This password is too common." in weak.content.decode()
    assert "This password is entirely numeric." in weak.content.decode()
    assert like_the_name.status_code == 200
    assert "The password is too similar to the username." in like_the_name.content.decode()
    assert users() == [] and "_auth_user_id" not in client.session


def test_a_taken_username_is_refused_in_any_case(open_sign_up):
    get_user_model().objects.create_user("Ann", password="anns-own-secret-1")

    for name in ("Ann", "ann"):
        response = sign_up(Client(), username=name)
        assert response.status_code == 200
        assert "A user with that username already exists." in response.content.decode()
    assert users() == ["Ann"]
    assert get_user_model().objects.get(username="Ann").check_password("anns-own-secret-1")


def test_a_bad_username_or_an_empty_form_is_a_form_error_not_a_500(open_sign_up):
    for data in ({}, {"username": "no spaces please", "password1": GOOD, "password2": GOOD},
                 {"username": "x" * 151, "password1": GOOD, "password2": GOOD},
                 {"username": "ann\x00", "password1": GOOD, "password2": GOOD}):
        response = Client().post("/accounts/sign-up/", data)
        assert response.status_code == 200, data
        assert response.context["form"].errors, data
    assert users() == []


def test_one_address_makes_at_most_the_limit_of_accounts_an_hour(open_sign_up, settings):
    settings.OPTIML_SIGN_UP_ADDRESS_LIMIT = 2

    made = [sign_up(Client(), username=f"user{i}").status_code for i in range(2)]
    refused = sign_up(Client(), username="user2")
    elsewhere = sign_up(Client(), username="user3", address="198.51.100.9")

    assert made == [302, 302]
    assert refused.status_code == 429 and "try again later" in refused.content.decode()
    assert elsewhere.status_code == 302
    assert users() == ["user0", "user1", "user3"]


def test_sign_ups_older_than_an_hour_do_not_count_against_the_address(open_sign_up, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.OPTIML_SIGN_UP_ADDRESS_LIMIT = 1
    assert sign_up(Client(), username="early").status_code == 302
    assert sign_up(Client(), username="blocked").status_code == 429

    SignUp.objects.update(created=timezone.now() - timedelta(minutes=61))

    assert sign_up(Client(), username="later").status_code == 302
    assert users() == ["early", "later"]


def test_a_signed_in_user_is_sent_on_from_the_sign_up_page(open_sign_up):
    client = Client()
    client.force_login(get_user_model().objects.create_user("bea", password="beas-secret-1"))

    assert client.get("/accounts/sign-up/")["Location"] == "/welcome/"
    assert sign_up(client, username="another").status_code == 302
    assert users() == ["bea"]


def test_the_sign_in_throttle_still_counts_after_sign_up_exists(open_sign_up, settings):
    """Signing up signs in through Django's own backend; the sign-in page is still
    throttled (accounts/signing_in.py) for a name made by sign-up, and the browser that
    signed up is a known device for it, which nobody else's failures hold up."""
    settings.OPTIML_LOGIN_FAILURE_LIMIT = 3
    own_browser = Client()
    assert sign_up(own_browser, username="ann").status_code == 302
    own_browser.post("/accounts/logout/")
    client = Client()

    answers = [client.post("/accounts/login/", {"username": "ann", "password": "wrong"}).status_code
               for _ in range(4)]
    waits = client.post("/accounts/login/", {"username": "ann", "password": GOOD})

    assert answers == [200, 200, 200, 429]
    assert waits.status_code == 429
    assert own_browser.post("/accounts/login/", {"username": "ann", "password": GOOD}).status_code == 302


# -- the first-run page ----------------------------------------------------------------------


def test_the_first_run_page_says_what_to_do_next(open_sign_up):
    client = Client()
    sign_up(client)

    page = client.get("/welcome/")
    text = page.content.decode()

    assert page.status_code == 200
    assert "Welcome, ann" in text
    assert 'href="/runs/new/"' in text and 'href="/skills/"' in text and 'href="/teams/"' in text
    assert "You are in no team yet" in text
    assert "OPTIML_EVALUATOR=recorded:" in text  # the way to see measurements without a GPU


def test_under_the_recorded_evaluator_the_page_says_the_times_are_recorded(people, settings):
    settings.OPTIML_EVALUATOR = "recorded:/somewhere/recording.json"
    client = Client()
    client.force_login(people["alice"])

    text = client.get("/welcome/").content.decode()

    assert "verdicts recorded earlier on a GPU" in text and "OPTIML_EVALUATOR=recorded:" not in text
    assert "You are in kernels." in text


def test_home_opens_the_first_run_page_until_the_user_can_see_a_run(people, relu_run):
    carol, alice = Client(), Client()
    carol.force_login(people["carol"])
    alice.force_login(people["alice"])

    assert carol.get("/")["Location"] == "/welcome/"
    relu_run(user=people["alice"], drive=False)
    assert alice.get("/")["Location"] == "/runs/"
    assert carol.get("/")["Location"] == "/welcome/"  # alice's private run is not hers to see
    assert Client().get("/welcome/")["Location"] == "/accounts/login/?next=/welcome/"


# -- the setting, as production and the embedded default read it --------------------------


def _read_setting(tmp_path: Path, **environ: str) -> bool:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("OPTIML_") and key != "DATABASE_URL"}
    env.update(OPTIML_SECRET_KEY="x" * 50, OPTIML_VAR_DIR=str(tmp_path),
               OPTIML_ALLOWED_HOSTS="studio.example.org", DJANGO_SETTINGS_MODULE="optiml_web.settings",
               **environ)
    code = "import json; from django.conf import settings; print(json.dumps(settings.OPTIML_OPEN_SIGN_UP))"
    finished = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=120)
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout.strip().splitlines()[-1])


def test_open_sign_up_is_on_in_the_embedded_default_and_off_in_production(tmp_path):
    assert _read_setting(tmp_path) is True
    assert _read_setting(tmp_path, OPTIML_DEBUG="false") is False
    assert _read_setting(tmp_path, DATABASE_URL="postgres://optiml@db.example.org/optiml") is False
    assert _read_setting(tmp_path, DATABASE_URL="postgres://optiml@db.example.org/optiml",
                         OPTIML_OPEN_SIGN_UP="true") is True
    assert _read_setting(tmp_path, OPTIML_DEBUG="false", OPTIML_OPEN_SIGN_UP="true") is True
    assert _read_setting(tmp_path, OPTIML_OPEN_SIGN_UP="false") is False
