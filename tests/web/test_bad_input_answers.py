"""Input refused, and how (issue 34, part 8): a team's name that holds a control or a
text-direction character is a 400 naming the character; and a 400 says in words what is
wrong with the input, never in Python's (an exception's text, a class or module name, a
traceback)."""

from __future__ import annotations

import copy
import re

import pytest
from django.core.exceptions import TooManyFieldsSent

from accounts.models import Team
from accounts.names import display_name_problem
from optiml_web.errors import api_exception_handler
from profiling.harness import tasks as task_registry
from search.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("name", "named"), [
    ("kernels\u202eslennrek", "U+202E (right-to-left override)"),
    ("\u2066attention\u2069", "U+2066 (left-to-right isolate)"),
    ("softmax\u200f", "U+200F (right-to-left mark)"),
    ("\u202aembedded", "U+202A (left-to-right embedding)"),
    ("two\nlines", "U+000A"),
    ("bell\x07", "U+0007"),
    ("escape\x1b[31m", "U+001B"),
    ("next\x85line", "U+0085"),
    ("para\u2029graph", "U+2029 (paragraph separator)"),
])
def test_a_team_name_with_a_control_or_text_direction_character_is_refused_naming_it(
    api, people, name, named
):
    response = api(people["carol"]).post("/api/teams/", {"name": name}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["name"] and named in response.json()["name"][0]
    assert Team.objects.count() == 1  # the fixture's only


def test_names_in_any_script_with_joiners_and_accents_are_names():
    for name in ("attention kernels", "équipe noyaux", "核心组", "فريق", "टीम\u200dए", "👩\u200d💻 team"):
        assert display_name_problem(name) is None, name


# -- 400s in words ------------------------------------------------------------------------

# What Python, not the service, says: a traceback, an exception's repr, a dotted module
# path, a call's arguments, the messages of its built-in types and codecs, Django's settings.
PYTHON_SPEAKING = re.compile(
    r"Traceback|\w+Error\(|\b[a-z_]+\.[a-z_]+\.[A-Za-z_.]+|__\w+__|\(\) (?:got|missing|takes|argument)"
    r"|object is not|object has no attribute|not supported between|unhashable type|codec can't"
    r"|settings\.[A-Z_]+"
    # ast.dump of an expression, the name of its syntax class, float()'s and int()'s words
    r"|ctx=Load\(\)|\b(?:BinOp|Attribute|Subscript|Lambda|Call) syntax|could not convert string to"
    r"|cannot convert float")


def _says_it_in_words(response) -> None:
    assert response.status_code == 400, response.content
    assert not PYTHON_SPEAKING.search(response.content.decode()), response.content


@pytest.fixture
def exported(api, people, relu_run) -> dict:
    run = relu_run(budget=3, user=people["alice"])
    return api(people["alice"]).get(f"/api/runs/{run.pk}/export/").json()


def _broken(exported: dict, how) -> dict:
    data = copy.deepcopy(exported)
    how(data)
    return data


@pytest.mark.parametrize("how", [
    lambda d: d["state"].update(tree=5),  # was "'int' object is not subscriptable"
    lambda d: d["state"]["tree"]["nodes"][0].update(measurement=5),  # "...Measurement() argument after **"
    lambda d: d["state"]["config"].update(guardrails=[]),  # "search.engine.reward.Guardrails() argument ..."
    lambda d: d["state"]["tree"]["nodes"][0]["measurement"].pop("status"),  # "__init__() missing 1 ..."
    lambda d: d["state"]["tree"].update(root_id=[]),  # was a 500: "unhashable type: 'list'"
    lambda d: d["state"]["tree"]["nodes"][1].update(parent="x"),  # "'<' not supported between ..."
    lambda d: d["state"].update(rng=5),  # numpy's "state must be a dict"
])
def test_an_import_the_engine_cannot_load_is_refused_in_words(api, people, exported, how):
    before = Run.objects.count()

    response = api(people["alice"]).post("/api/runs/import/", _broken(exported, how), format="json")

    _says_it_in_words(response)
    assert Run.objects.count() == before


def test_bad_bodies_and_values_are_refused_in_words(api, people):
    alice = api(people["alice"])

    for response in [
        alice.generic("POST", "/api/teams/", b'{"name": "\xff\xfe"}', content_type="application/json"),
        alice.generic("POST", "/api/teams/", b"{not json", content_type="application/json"),
        alice.post("/api/runs/", {"task": "relu", "budget": "1_000"}, format="json"),
        alice.post("/api/runs/", {"task": "relu", "budget": 1, "plan": {"launches": [{"grid": {}}]},
                                  "source": "x"}, format="json"),
        alice.post("/api/runs/", {"task": "relu", "budget": 1, "team": 10**30}, format="json"),
        alice.post("/api/teams/", {"name": ["a list"]}, format="json"),
        alice.post("/api/runs/import/", [1, 2], format="json"),
        alice.get("/api/runs/?team=%C2%B2"),
    ]:
        _says_it_in_words(response)


def _plan(**launch) -> dict:
    return {"launches": [{"kernel": "relu", "grid": [1], "block": [256], "args": ["x", "y", "n"], **launch}]}


@pytest.mark.parametrize(("plan", "said"), [
    (_plan(grid=["n.bit_length()"]), "'n.bit_length()' is not allowed"),  # was ast.dump: "Call(func=Attr..."
    (_plan(grid=["n.real"]), "'n.real' is not allowed"),
    (_plan(grid=["lambda: 1"]), "'lambda: 1' is not allowed"),
    (_plan(grid=["floor(1e300 * 1e300)"]), "a number in it overflows"),  # "cannot convert float infinity..."
    (_plan(args=["x", "y", "f32:abc"]), "after f32: a number"),  # "could not convert string to float: 'abc'"
])
def test_a_plan_the_gate_cannot_read_is_refused_in_words(api, people, plan, said):
    relu = task_registry.get("relu")
    body = {"task": "relu", "source": relu.naive_source, "plan": plan, "budget": 3}

    response = api(people["alice"]).post("/api/runs/", body, format="json")

    _says_it_in_words(response)
    assert said in str(response.json()["plan"]) and not Run.objects.exists()


@pytest.mark.parametrize(("reference", "said"), [
    ("x @ x", "'x @ x' is not allowed"),  # was "BinOp syntax is not allowed"
    ("x[0:1, ...] if 1 else x", "'a if c else b'"),
])
def test_a_reference_the_harness_refuses_is_refused_in_words(api, people, task_dir, reference, said):
    body = {"name": "words", "sizes": {"n": 64}, "inputs": [{"name": "x", "shape": ["n"]}],
            "outputs": [{"name": "y", "shape": ["n"]}], "reference": {"y": reference}}

    response = api(people["alice"]).post("/api/tasks/declared/", body, format="json")

    _says_it_in_words(response)
    assert said in response.json()["reference"][0]


def test_a_body_that_is_not_utf8_is_refused_saying_where(api, people):
    response = api(people["alice"]).generic("POST", "/api/teams/", b'{"name": "ab\xffc"}',
                                            content_type="application/json")

    assert response.json() == {"detail": "JSON parse error - the body is not utf-8 text (byte 13 is not)"}


def test_djangos_bad_request_errors_are_answered_in_words():
    response = api_exception_handler(TooManyFieldsSent("The number of GET/POST parameters exceeded "
                                                       "settings.DATA_UPLOAD_MAX_NUMBER_FIELDS."), {})

    assert response.status_code == 400
    assert response.data == {"detail": "bad request: more than 1000 parameters"}


@pytest.mark.parametrize("expression", [
    "+".join(["n"] * 5000),  # the audit's: deep enough to exhaust the parser's stack
    "(" * 2000 + "n" + ")" * 2000,
])
def test_a_plan_expression_too_long_to_parse_is_a_400_that_says_so_before_it_is_parsed(
        api, people, expression):
    from profiling.harness import tasks as task_registry

    relu = task_registry.get("relu")
    plan = copy.deepcopy(relu.naive_plan)
    plan["launches"][0]["grid"] = [expression]
    body = {"task": "relu", "source": relu.naive_source, "plan": plan, "budget": 3, "judge": "rules"}

    response = api(people["alice"]).post("/api/runs/", body, format="json")

    _says_it_in_words(response)
    assert "longer than 400 characters" in str(response.json()["plan"]), response.json()
    assert not Run.objects.exists()
