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

The signed-in user has something to act on wherever an operation names a thing by id
(OWN_THINGS): a run still waiting (pause, resume, stop), a lineage, a card of the default
library, whose reviewers she is among (staff: review, edit, import), a writing job and a
declared task of hers, a team she is an admin of (adding a member, copying cards). Ids
drawn at random name nothing, and the ids the stateful phase follows reach few of these
in a bounded run: such an operation was then only ever refused (404, 409, and the 401s
of the signed-out check, which schemathesis took for a failed sign-in: "14 operations
returned only 401/403"), and its body never reached the code behind the lookup.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

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


# (method, path): the parameters that name what the signed-in user may act on; filled in
# from the things the test stores (_own_things).
OWN_THINGS = {
    ("GET", "/api/kernels/write/{job_id}/"): {"path.job_id": "job"},
    ("GET", "/api/lineages/{lineage_id}/"): {"path.lineage_id": "lineage"},
    ("GET", "/api/tasks/declared/{name}/"): {"path.name": "declared"},
    **{("POST", f"/api/runs/{{run_id}}/{action}/"): {"path.run_id": "waiting_run"}
       for action in ("pause", "resume", "stop")},
    **{(method, f"/api/skills/{{card_id}}/{tail}"): {"path.card_id": "card"}
       for method, tail in [("GET", ""), ("PATCH", ""), ("GET", "comments/"), ("POST", "comments/"),
                            ("GET", "effects/"), ("GET", "usage/"), ("GET", "versions/"),
                            ("POST", "review/")]},
    ("POST", "/api/teams/{team_id}/members/"): {"path.team_id": "team"},
}


def _config(session: str, things: dict[str, int | str]) -> str:
    lines = ['hooks = "tests.web.schemathesis_hooks"', "",
             "[auth.openapi.cookieAuth]", f'api_key = "{session}"', ""]
    for method, path in sorted({*REFUSED_BY_DATA, *OWN_THINGS}):
        lines += ["[[operations]]", f'include-path = "{path}"', f'include-method = "{method}"']
        if (method, path) in REFUSED_BY_DATA:
            lines.append("checks.positive_data_acceptance.expected-statuses = "
                         '["2xx", "3xx", "400", "401", "403", "404", "409", "429"]')
        for name, thing in OWN_THINGS.get((method, path), {}).items():
            lines.append(f"parameters.{json.dumps(name)} = {json.dumps(things[thing])}")
        lines.append("")
    return "\n".join(lines)


def _own_things(people, relu_run) -> dict[str, int | str]:
    """What alice may act on, stored; by the names OWN_THINGS uses."""
    from accounts import services as accounts
    from accounts.models import Membership
    from lineage.models import SkillCard
    from profiling import services as profiling
    from search.models import WritingJob
    from tests.web.conftest import store_recorded_lineage
    from tests.web.test_skills_api import card_data

    alice, team = people["alice"], people["team"]
    accounts.membership_set(team=team, user=alice, role=Membership.Role.ADMIN)
    alice.is_staff = True  # a reviewer of the default library (lineage.services.skill_card_can_review)
    alice.save(update_fields=["is_staff"])
    SkillCard.objects.create(card_id="vec4-v1", intent="VEC4", status="verified",
                             data=card_data("vec4-v1", "VEC4", 1.16, 2, ["relu"]))
    declared = profiling.declared_task_create(owner=alice, definition={
        "name": "scaled", "sizes": {"n": 64}, "inputs": [{"name": "x", "shape": ["n"]}],
        "outputs": [{"name": "y", "shape": ["n"]}], "reference": {"y": "x * 2"}})
    return {"team": team.pk, "card": "vec4-v1", "declared": declared.name,
            "lineage": store_recorded_lineage("relu").pk,
            "waiting_run": relu_run(budget=2, user=alice, team=team, drive=False).pk,
            "job": WritingJob.objects.create(task="relu", intent="vectorize the loads", created_by=alice).pk}


@pytest.mark.timeout(MAX_S + 120)
def test_the_api_passes_every_schemathesis_check(
    live_server, people, relu_run, task_dir, monkeypatch, settings, tmp_path
):
    from django.test import Client

    from accounts.authentication import SessionAuthentication

    monkeypatch.setattr(SessionAuthentication, "enforce_csrf", lambda self, request: None)
    for name in [key for key in os.environ if key.startswith("OPTIML_LLM_")]:
        monkeypatch.delenv(name)  # /api/kernels/write/ must not reach out to an LLM
    settings.OPTIML_WORKDIR = tmp_path
    relu_run(budget=2, user=people["alice"], team=people["team"])
    things = _own_things(people, relu_run)
    client = Client()
    client.force_login(people["alice"])
    config, har = tmp_path / "schemathesis.toml", tmp_path / "requests.har"
    config.write_text(_config(client.cookies["sessionid"].value, things))
    command = [str(Path(sys.executable).parent / "schemathesis"), "--config-file", str(config), "run",
               f"{live_server.url}/api/schema/", "--url", live_server.url, "--checks", "all",
               "--max-examples", str(EXAMPLES), "--max-time", str(MAX_S), "--seed", "34", "--workers", "1",
               "--no-color", "--report", "har", "--report-har-path", str(har)]

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=MAX_S + 100, cwd=tmp_path, env=env)

    assert done.returncode == 0, f"{done.stdout[-12000:]}\n{done.stderr[-3000:]}"
    assert "Tested: " in done.stdout  # it reached the operations, not only the schema
    # Each operation given a thing of hers that the bounded run sent with it got past
    # sign-in and the lookup at least once. Which operations the time bound lets it reach
    # depends on the machine's load (a loaded CI host sends fewer requests in MAX_S), so
    # an operation it never sent her thing to is not counted against it.
    sent, reached = _reached(har, things)
    assert reached, "no operation given a thing of hers got past sign-in and the lookup"
    assert sent <= reached, sorted(sent - reached)


def _reached(har: Path, things: dict[str, int | str]) -> tuple[set, set]:
    """(the OWN_THINGS operations some request was sent to with the session and her thing,
    those of them that some such request got past sign-in and the lookup of the thing with:
    any answer but 401, 403, 404 or 405)."""
    urls = {}
    for (method, path), names in OWN_THINGS.items():
        url = path
        for name, thing in names.items():
            url = url.replace(f"{{{name.split('.', 1)[1]}}}", str(things[thing]))
        urls[(method, url)] = (method, path)
    sent, reached = set(), set()
    for entry in json.loads(har.read_text())["log"]["entries"]:
        request = entry["request"]
        signed_in = any(h["name"].lower() == "cookie" for h in request["headers"])
        key = (request["method"], urlsplit(request["url"]).path)
        if key in urls and signed_in:
            sent.add(urls[key])
            if entry["response"]["status"] not in (401, 403, 404, 405):
                reached.add(urls[key])
    return sent, reached
