"""Schemathesis's own command line with `--checks all` against the app served over HTTP,
signed in: every check it has, including those test_api_fuzz.py cannot run case by case
(an undeclared method must be a 405 with `Allow`, `Allow` must list the documented
methods, a missing required header is refused, a deleted resource stays gone, a created
one can be read) and the stricter-than-schema one, positive_data_acceptance: a request
the schema calls valid may be refused only with a status that says why it could not be
served (401, 403, 404, 409, 429), not with a 400.

Bounded (ALL_CHECKS_EXAMPLES per operation, default 3, and ALL_CHECKS_MAX_S seconds,
default 75; under two minutes on two cores), seeded, so CI's run is the same
each time. Run it longer by hand: ALL_CHECKS_EXAMPLES=50 ALL_CHECKS_MAX_S=900.

Three things are set apart, each with its reason:
- CSRF: the command line can send the session cookie (the schema's cookieAuth) but not
  a CSRF cookie beside it, so the session check here does not ask for the CSRF token;
  CSRF itself is tested on its own (test_run_api.py,
  test_a_session_write_without_its_csrf_token_is_refused).
- REFUSED_BY_DATA: operations whose body names things that only the database knows (a
  task, a team the user is in, a card, a colleague): a schema-valid request naming one
  that does not exist is a 400 on that field, which no schema can rule out beforehand.
- JSON the database cannot store (NUL or a lone surrogate in a key, say) is refused
  whole by every operation: tests/web/schemathesis_hooks.py sets that 400 aside, and only
  where the service's own optiml_web.limits.unstorable refuses the body sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = int(os.environ.get("ALL_CHECKS_EXAMPLES", "3"))
MAX_S = int(os.environ.get("ALL_CHECKS_MAX_S", "75"))
REPO = Path(__file__).resolve().parents[2]

# (method, path): what in the body only the database can judge.
REFUSED_BY_DATA = {
    ("POST", "/api/kernels/write/"): "the task must be one the user may use",
    ("POST", "/api/runs/"): "the task, and the team, must exist and be the user's",
    ("POST", "/api/runs/preflight/"): "the task must be one the user may use",
    ("POST", "/api/runs/import/"): "the team must be one the user is in",
    ("POST", "/api/skills/copy/"): "the cards must be in the library",
    ("POST", "/api/skills/import/"): "the file must be a library export (its format and cards)",
    ("POST", "/api/tasks/declared/"): "the definition must mean something: names that the shapes and "
                                      "the reference use, a reference the harness can run",
    ("POST", "/api/teams/{team_id}/members/"): "the username must be a colleague's",
}


def _config(session: str) -> str:
    lines = ['hooks = "tests.web.schemathesis_hooks"', "",
             "[auth.openapi.cookieAuth]", f'api_key = "{session}"', ""]
    for (method, path), _ in sorted(REFUSED_BY_DATA.items()):
        lines += ["[[operations]]", f'include-path = "{path}"', f'include-method = "{method}"',
                  "checks.positive_data_acceptance.expected-statuses = "
                  '["2xx", "3xx", "400", "401", "403", "404", "409", "429"]', ""]
    return "\n".join(lines)


@pytest.mark.timeout(MAX_S + 120)
def test_the_api_passes_every_schemathesis_check(
    live_server, people, relu_run, monkeypatch, settings, tmp_path
):
    from django.test import Client

    from accounts.authentication import SessionAuthentication

    monkeypatch.setattr(SessionAuthentication, "enforce_csrf", lambda self, request: None)
    for name in [key for key in os.environ if key.startswith("OPTIML_LLM_")]:
        monkeypatch.delenv(name)  # /api/kernels/write/ must not reach out to an LLM
    settings.OPTIML_WORKDIR = tmp_path
    relu_run(budget=2, user=people["alice"], team=people["team"])
    client = Client()
    client.force_login(people["alice"])
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(client.cookies["sessionid"].value))
    command = [str(Path(sys.executable).parent / "schemathesis"), "--config-file", str(config), "run",
               f"{live_server.url}/api/schema/", "--url", live_server.url, "--checks", "all",
               "--max-examples", str(EXAMPLES), "--max-time", str(MAX_S), "--seed", "34", "--workers", "1",
               "--no-color"]

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=MAX_S + 100, cwd=tmp_path, env=env)

    assert done.returncode == 0, f"{done.stdout[-12000:]}\n{done.stderr[-3000:]}"
    assert "Tested: " in done.stdout  # it reached the operations, not only the schema
