"""Headers on every page (Content-Security-Policy and friends), no inline script or style
for the policy to refuse, the API's answer to an unexpected error (JSON, no traceback),
and the production settings (OPTIML_DEBUG=false) read in a fresh process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from optiml_web.errors import INTERNAL_ERROR

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
POLICY = {"default-src": "'self'", "script-src": "'self'", "style-src": "'self'", "img-src": "'self' data:",
          "connect-src": "'self'", "object-src": "'none'", "base-uri": "'self'", "form-action": "'self'",
          "frame-ancestors": "'none'"}


def _directives(header: str) -> dict[str, str]:
    return dict(part.strip().split(" ", 1) for part in header.split(";") if part.strip())


@pytest.fixture
def pages(client, people, relu_run, api):
    """Every kind of page, as the visitor who may open it: (client, path) pairs."""
    run = relu_run(user=people["alice"])
    token = api(people["alice"]).post(f"/api/runs/{run.pk}/shares/").json()["token"]
    signed_in = api(people["alice"])
    return [(client, "/accounts/login/"), (signed_in, "/runs/"), (signed_in, "/runs/new/"),
            (signed_in, f"/runs/{run.pk}/"), (client, f"/share/{token}/"), (signed_in, "/api/docs/"),
            (signed_in, f"/api/runs/{run.pk}/"), (client, "/api/runs/"), (client, "/admin/login/"),
            (client, "/no/such/page/"), (client, "/accounts/sign-up/"), (signed_in, "/welcome/")]


def test_every_page_and_answer_carries_the_content_security_policy_and_friends(pages):
    for client, path in pages:
        response = client.get(path)
        assert _directives(response["Content-Security-Policy"]) == POLICY, path
        assert "unsafe-inline" not in response["Content-Security-Policy"]
        assert response["X-Content-Type-Options"] == "nosniff", path
        assert response["Referrer-Policy"] == "same-origin", path
        assert response["X-Frame-Options"] == "DENY", path


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_STYLE = re.compile(r"<style\b|\sstyle\s*=|\son[a-z]+\s*=", re.IGNORECASE)


def test_no_page_has_an_inline_script_style_or_handler_for_the_policy_to_refuse(pages):
    for client, path in pages:
        html = client.get(path).content.decode()
        if "<html" not in html:
            continue  # JSON
        assert not INLINE_SCRIPT.search(html), (path, INLINE_SCRIPT.search(html))
        assert not INLINE_STYLE.search(html), (path, INLINE_STYLE.search(html))


def test_swagger_ui_loads_its_settings_as_a_script_file(api, people):
    page = api(people["alice"]).get("/api/docs/").content.decode()
    sources = re.findall(r'<script[^>]*src="([^"]+)"', page)

    assert any("swagger-ui-bundle" in src for src in sources)
    settings_js = [src for src in sources if "script=" in src or src.endswith("/api/docs/?script")]
    assert settings_js, sources
    assert api(people["alice"]).get(settings_js[0].replace("&amp;", "&")).status_code == 200


# -- an unexpected error ---------------------------------------------------------------


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_error_in_the_api_is_a_json_500_with_no_traceback(
    api, people, monkeypatch, settings, caplog, debug
):
    from search import selectors

    settings.DEBUG = debug

    def broken(**kwargs):
        raise RuntimeError("the secret database password is hunter2")

    monkeypatch.setattr(selectors, "run_list", broken)
    client = api(people["alice"])
    client.raise_request_exception = False

    response = client.get("/api/runs/")

    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": INTERNAL_ERROR}
    assert b"hunter2" not in response.content and b"Traceback" not in response.content
    logged = [r for r in caplog.records if r.name == "optiml_web.api"]
    assert logged and "GET /api/runs/" in logged[0].getMessage()
    assert logged[0].exc_info[0] is RuntimeError  # the server keeps the traceback


# -- production settings, read as a fresh process reads them ----------------------------

PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client
client = Client(raise_request_exception=False)
login = client.get("/accounts/login/")
missing = client.get("/no/such/page/")
api_missing = client.get("/api/no/such/endpoint/")
print(json.dumps({
    "DEBUG": settings.DEBUG, "ALLOWED_HOSTS": settings.ALLOWED_HOSTS,
    "SESSION_COOKIE_SECURE": settings.SESSION_COOKIE_SECURE,
    "CSRF_COOKIE_SECURE": settings.CSRF_COOKIE_SECURE,
    "SESSION_COOKIE_HTTPONLY": settings.SESSION_COOKIE_HTTPONLY,
    "csrf_cookie": login.cookies["csrftoken"].output(),
    "missing": [missing.status_code, missing.content.decode()[:2000]],
    "api_missing": [api_missing.status_code, api_missing.content.decode()],
    "csp": login.get("Content-Security-Policy"),
}))
"""


def _production(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPTIML_")}
    env.update(OPTIML_DEBUG="false", OPTIML_SECRET_KEY="x" * 50, OPTIML_VAR_DIR=str(tmp_path),
               OPTIML_ALLOWED_HOSTS="testserver,studio.example.org",
               DJANGO_SETTINGS_MODULE="optiml_web.settings")
    env.update(overrides)
    return subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


def test_production_settings_send_cookies_over_https_only_and_show_no_debug_page(tmp_path):
    finished = _production(tmp_path)
    assert finished.returncode == 0, finished.stderr
    seen = json.loads(finished.stdout.strip().splitlines()[-1])

    assert seen["DEBUG"] is False and seen["ALLOWED_HOSTS"] == ["testserver", "studio.example.org"]
    assert seen["SESSION_COOKIE_SECURE"] and seen["CSRF_COOKIE_SECURE"] and seen["SESSION_COOKIE_HTTPONLY"]
    assert "Secure" in seen["csrf_cookie"] and "SameSite=Lax" in seen["csrf_cookie"]
    status, page = seen["missing"]
    assert status == 404 and "URLconf" not in page and "DEBUG = True" not in page  # no debug page
    assert seen["api_missing"] == [404, '{"detail": "not found"}']
    assert "default-src 'self'" in seen["csp"]


def test_production_refuses_to_start_without_allowed_hosts(tmp_path):
    finished = _production(tmp_path, OPTIML_ALLOWED_HOSTS="")

    assert finished.returncode != 0
    assert "ImproperlyConfigured: OPTIML_ALLOWED_HOSTS must name the host names" in finished.stderr


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    finished = _production(tmp_path, OPTIML_SECRET_KEY="")

    assert finished.returncode != 0 and "OPTIML_SECRET_KEY" in finished.stderr


def test_plain_http_on_a_private_network_can_say_so(tmp_path):
    finished = _production(tmp_path, OPTIML_SECURE_COOKIES="false")
    assert finished.returncode == 0, finished.stderr

    seen = json.loads(finished.stdout.strip().splitlines()[-1])
    assert seen["SESSION_COOKIE_SECURE"] is False and "Secure" not in seen["csrf_cookie"]


def test_the_api_answers_a_browser_in_json_not_a_browsable_html_page(api, people):
    response = api(people["alice"]).get("/api/runs/", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")

    assert response.status_code == 200 and response["Content-Type"] == "application/json"
