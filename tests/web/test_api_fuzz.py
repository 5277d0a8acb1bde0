"""Schemathesis against the running app: every operation in /api/schema/, requests
generated from the schema (valid ones and invalid ones), sent signed in, through Django's
WSGI handler in this process, over real rows (a searched run, its share link, a declared
task). Each answer must not be a server error and must be what the schema says: a
documented status, its content type, headers and body.

Bounded: FUZZ_EXAMPLES per operation (default 20; about a minute on two cores). Each
generated request with path parameters is sent twice: as generated (mostly ids that do
not exist) and with the ids of the real rows, so that the answers that carry data are
checked too. Then the edge values of every integer parameter (EDGES), which random
generation seldom hits, are sent as well.

`positive_data_acceptance` is left out on purpose: a request the schema allows may still
be refused with a 400 for what only the server can know (an unknown task, a plan whose
expressions do not parse), and that is the documented answer, not a bug.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "20"))
RANDOM = os.environ.get("FUZZ_RANDOM") == "1"  # a new seed each run, for hunting; CI's is fixed
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, negative_data_rejection, ignored_auth]
WITH_REAL_IDS = [check for check in CHECKS if check is not negative_data_rejection]


@pytest.fixture
def world(db, people, relu_run, api, task_dir, monkeypatch, settings, tmp_path):
    """Real rows to aim at (a run whose root has a report our gate wrote, its share link,
    a declared task), and alice's signed-in session (cookie and CSRF token)."""
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    from profiling.models import Evaluation
    from search.models import RunNode

    for name in [key for key in os.environ if key.startswith("OPTIML_LLM_")]:
        monkeypatch.delenv(name)  # /api/kernels/write/ must not reach out to an LLM
    alice = people["alice"]
    run = relu_run(budget=3, user=alice, team=people["team"])
    settings.OPTIML_WORKDIR = tmp_path
    report = tmp_path / "relu-537c95419d00.ncu-rep"
    report.write_bytes(b"NCU-REP")
    evaluation = RunNode.objects.get(run=run, node_id=0).evaluation
    evaluation.source = Evaluation.Source.GATE
    evaluation.verdict["profile"]["report_path"] = str(report)
    evaluation.save()
    share = api(alice).post(f"/api/runs/{run.pk}/shares/").json()
    declared = api(alice).post("/api/tasks/declared/", {
        "name": "fuzz-relu", "sizes": {"n": 4096}, "inputs": [{"name": "x", "shape": ["n"]}],
        "outputs": [{"name": "y", "shape": ["n"]}], "reference": {"y": "np.maximum(x, 0)"}}, format="json")
    assert declared.status_code == 201, declared.json()
    from lineage.models import SkillCard
    from tests.web.conftest import store_recorded_lineage

    SkillCard.objects.create(card_id="vec4-v1", intent="VEC4", status="verified", data={
        "sentence": "float4", "effects": {"speedup": {"n": 1, "median": 1.2, "min": 1.2, "max": 1.2}},
        "evidence": {"lineages": 1, "transitions": 1}, "scope": {"tasks": ["relu"], "arch": "sm_90"},
        "anchor": {"rewrites": [], "steps": []}})
    from search.models import WritingJob

    job = WritingJob.objects.create(task="relu", intent="relu, clamped at zero", created_by=alice)
    invitation = api(people["dana"]).post(f"/api/teams/{people['team'].pk}/invitations/").json()
    client = Client()
    client.force_login(alice)
    csrf = _get_new_csrf_string()
    return {
        "ids": {"run_id": run.pk, "node_id": 0, "share_id": share["id"], "token": share["token"],
                "name": declared.json()["name"], "card_id": "vec4-v1",
                "lineage_id": store_recorded_lineage("relu").pk, "team_id": people["team"].pk,
                "username": "bob", "job_id": job.pk, "invitation_id": invitation["id"]},
        "query_ids": {"a": run.pk, "b": run.pk},
        # As a browser sends them: the session and CSRF cookies, and the token as a header.
        "cookies": {"sessionid": client.cookies["sessionid"].value, "csrftoken": csrf},
        "headers": {"X-CSRFToken": csrf},
    }


@pytest.fixture
def wsgi_app():
    """Django's WSGI handler, as a server runs it, except that it keeps the test's database
    connection open between requests (as Django's own test client does): the rows of
    `world` live in the test's transaction, which closing the connection would end."""
    from django.core import signals
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def _operations() -> list[tuple[str, str]]:
    """(method, path) of every operation the schema documents, read when tests are collected
    (a new endpoint is fuzzed without anyone adding it here)."""
    from drf_spectacular.generators import SchemaGenerator

    spec = SchemaGenerator().get_schema(request=None, public=True)
    return [(method.upper(), path) for path, operations in spec["paths"].items() for method in operations]


@pytest.mark.parametrize(("method", "path"), _operations())
def test_every_operation_answers_as_its_schema_says_and_never_with_a_server_error(
    world, wsgi_app, method, path
):
    operation = schemathesis.openapi.from_wsgi("/api/schema/", wsgi_app).find_operation_by_path(method, path)
    # Signed in as a browser is: the session and CSRF cookies (fixed, so never mutated; the
    # ignored_auth check sends each request once more without them), the token as a header.
    signed_in = {"cookies": world["cookies"], "headers": world["headers"]}
    generated = st.one_of(operation.as_strategy(GenerationMode.POSITIVE, **signed_in),
                          operation.as_strategy(GenerationMode.NEGATIVE, **signed_in))

    statuses: set[int] = set()

    def send(case, checks) -> None:
        response = case.call_and_validate(checks=checks)
        statuses.add(response.status_code)

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not RANDOM,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(case=generated)
    def answers_as_documented(case):
        send(case, CHECKS)
        real = {name: world["ids"][name] for name in (case.path_parameters or {}) if name in world["ids"]}
        # Ids a query names (compare's ?a=&b=) are real ids too.
        query_ids = world["query_ids"]
        real_query = {name: query_ids[name] for name in (case.query or {}) if name in query_ids}
        if real or real_query:
            # With real ids a request that was invalid only in its path is valid: the other
            # checks still hold, but not "invalid data is refused".
            case.path_parameters = {**(case.path_parameters or {}), **real}
            if real_query:
                case.query = {**case.query, **real_query}
            send(case, WITH_REAL_IDS)

    answers_as_documented()
    for case in _edge_cases(operation, world["ids"], **signed_in):
        send(case, WITH_REAL_IDS)
    # Every request went signed in (ignored_auth sends its own without): none may be a 401,
    # or the fuzzing never got past the sign-in check.
    assert 401 not in statuses, statuses
    if method == "GET":
        assert any(200 <= status < 300 for status in statuses), statuses  # real rows were read


# Whole numbers that once made 500s: a digit that is not ASCII ("²".isdigit() is true and
# int("²") fails), numbers past a 64-bit integer, the edges of the documented range. Sent
# for every integer parameter of every operation, the other path parameters real.
EDGES = ["²", "٣", "9" * 30, str(2**63), str(2**63 - 1), "-1", "", "1.5"]


def _edge_cases(operation, ids: dict, **signed_in) -> list:
    real = {p.name: ids[p.name] for p in operation.path_parameters if p.name in ids}
    cases = []
    for parameter in [*operation.path_parameters, *operation.query]:
        if parameter.definition.get("schema", {}).get("type") != "integer":
            continue
        for value in EDGES:
            if parameter.location == "path" and value:  # an empty segment is another URL
                cases.append(operation.Case(path_parameters={**real, parameter.name: value}, **signed_in))
            elif parameter.location == "query":
                cases.append(operation.Case(path_parameters=real, query={parameter.name: value}, **signed_in))
    return cases
