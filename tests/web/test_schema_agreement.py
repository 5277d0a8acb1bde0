"""The schema says what the service enforces (issue 34, part 10): an operation refuses a
query parameter it does not document, with a 400 naming it; every 400 an operation can
give is documented (removing a team member included); and the limits of a request's
fields are the service's, so that what the schema allows the service takes and what it
refuses the service refuses (a team's name: its length, blank, control characters)."""

from __future__ import annotations

import re

import jsonschema
import pytest

from accounts.models import Team
from search.models import Run
from tests.web.test_skills_api import card_data

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def _operations(schema: dict) -> dict[tuple[str, str], dict]:
    return {(method.upper(), path): operation for path, operations in schema["paths"].items()
            for method, operation in operations.items()}


# -- query parameters -------------------------------------------------------------------------


def test_a_query_parameter_an_operation_does_not_document_is_a_400_naming_it(api, people, relu_run):
    run = relu_run(budget=3, user=people["alice"])
    alice = api(people["alice"])
    link = alice.post(f"/api/runs/{run.pk}/shares/").json()

    for client, path, unknown in [
        (alice, "/api/runs/?stauts=running", "stauts"),  # a misspelt filter once listed every run
        (alice, "/api/runs/?status=running&sort=name", "sort"),
        (alice, "/api/me/?verbose=1", "verbose"),  # an operation with no query parameters at all
        (alice, f"/api/runs/{run.pk}/events/?after=0&limit=5", "limit"),
        (api(), f"/api/shared/{link['token']}/events/?after=0&since=1", "since"),  # signed out
    ]:
        response = client.get(path)
        assert response.status_code == 400, path
        assert list(response.json()) == [unknown] and "not a query parameter" in response.json()[unknown][0]


def test_documented_query_parameters_still_work_and_a_refused_write_writes_nothing(api, people, relu_run):
    run = relu_run(budget=3, user=people["alice"], team=people["team"])
    alice = api(people["alice"])
    exported = alice.get(f"/api/runs/{run.pk}/export/").json()

    assert alice.get("/api/runs/?status=finished&mine=1").status_code == 200
    assert alice.get(f"/api/runs/{run.pk}/events/?after=2").status_code == 200
    assert alice.get("/api/docs/?script=").status_code == 200  # not an operation: the docs page's own

    before = Run.objects.count()
    refused = alice.post(f"/api/runs/import/?team={people['team'].pk}&tema=1", exported, format="json")
    assert refused.status_code == 400 and list(refused.json()) == ["tema"]
    assert Run.objects.count() == before


def test_every_operation_documents_a_400(schema):
    for (method, path), operation in _operations(schema).items():
        assert "400" in operation["responses"], (method, path)


# -- removing a team member --------------------------------------------------------------------


@pytest.mark.parametrize("method", ["DELETE", "PATCH"])
def test_the_last_admin_leaving_is_a_documented_409_not_a_400(api, people, schema, method):
    """The request is sound (schemathesis's positive_data_acceptance: a schema-valid request
    may be refused only by a status that says so); the team's state refuses it: 409."""
    documented = _operations(schema)[(method, "/api/teams/{team_id}/members/{username}/")]["responses"]
    assert "admin" in documented["409"]["description"]

    dana, path = api(people["dana"]), f"/api/teams/{people['team'].pk}/members/dana/"
    if method == "DELETE":
        left_alone = dana.delete(path)
    else:
        left_alone = dana.patch(path, {"role": "member"}, format="json")

    assert left_alone.status_code == 409 and list(left_alone.json()) == ["role"]


# -- a field's limits are the service's --------------------------------------------------------


def _name_schema(schema: dict) -> dict:
    return schema["components"]["schemas"]["TeamCreate"]["properties"]["name"]


def test_a_team_names_length_in_the_schema_is_the_services(schema):
    assert _name_schema(schema)["maxLength"] == Team._meta.get_field("name").max_length == 100


@pytest.mark.parametrize("name", [
    "", "   ", "x" * 100, "x" * 101, " gpu  kernels ", "attention kernels", "a\u202eb", "a\tb", "équipe",
])
def test_the_schema_and_the_service_agree_on_a_team_name(api, people, schema, name):
    try:
        jsonschema.validate(name, _name_schema(schema))
        allowed = True
    except jsonschema.ValidationError:
        allowed = False

    response = api(people["carol"]).post("/api/teams/", {"name": name}, format="json")

    assert (response.status_code == 201) is allowed, (name, response.json())


@pytest.mark.parametrize(("component", "field"), [
    ("MemberAdd", "username"), ("KernelWrite", "intent"), ("SkillCommentCreate", "text"),
    ("RunCreate", "task"), ("DeclaredTaskCreate", "name"),
])
def test_text_the_service_refuses_when_blank_is_refused_by_the_schema(schema, component, field):
    property_ = schema["components"]["schemas"][component]["properties"][field]

    for blank in ("", "  ", "\n"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(blank, property_)
    jsonschema.validate("relu", property_)


# ECMA-262's \s, the dialect of JSON Schema's patterns, which a client's validator uses: it
# lacks U+001C-U+001F and U+0085, which Python's str.strip() (DRF's trimming) takes away.
ECMA_SPACES = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def _as_ecma(pattern: str) -> str:
    """`pattern` with \\s and \\S as ECMA-262 reads them (\\s only inside a class here)."""
    return pattern.replace("\\S", f"[^{ECMA_SPACES}]").replace("\\s", ECMA_SPACES)


@pytest.mark.parametrize("blank", ["\x1c", " \x1f\x85 ", "\x1d\x1e"])
def test_text_python_trims_to_blank_is_blank_to_a_clients_validator_too(api, people, schema, blank):
    pattern = schema["components"]["schemas"]["RunCreate"]["properties"]["task"]["pattern"]

    response = api(people["alice"]).post("/api/runs/", {"task": blank, "budget": 3}, format="json")

    assert response.status_code == 400 and "blank" in response.json()["task"][0]
    assert not re.search(_as_ecma(pattern), blank)
    assert re.search(_as_ecma(pattern), " relu ")


# -- setting a member's role ------------------------------------------------------------------


def test_setting_a_members_role_needs_the_role_in_the_schema_as_in_the_service(api, people, schema):
    body = _operations(schema)[("PATCH", "/api/teams/{team_id}/members/{username}/")]["requestBody"]
    assert body["required"] is True
    property_schema = body["content"]["application/json"]["schema"]
    with pytest.raises(jsonschema.ValidationError):  # drf-spectacular once made it optional
        jsonschema.validate({}, property_schema)

    path = f"/api/teams/{people['team'].pk}/members/bob/"
    for response in (api(people["dana"]).patch(path, {}, format="json"), api(people["dana"]).patch(path)):
        assert response.status_code == 400 and list(response.json()) == ["role"]


# -- a declared task's definition --------------------------------------------------------------


def _definition(**changes) -> dict:
    return {"name": "agreed", "sizes": {"n": 64}, "inputs": [{"name": "x", "shape": ["n"]}],
            "outputs": [{"name": "y", "shape": ["n"]}], "reference": {"y": "x"}, **changes}


@pytest.mark.parametrize("changes", [
    {}, {"name": "user-agreed"}, {"name": "Agreed!"}, {"name": "agreed.7"}, {"name": "user-agreed.7"},
    {"name": "-agreed"}, {"name": "a" * 48}, {"name": "a" * 49},
    {"sizes": {}}, {"sizes": {"n": 0}}, {"sizes": {"n": 2**31}}, {"sizes": {"n": 64, "m": 2**31 - 1}},
    {"sizes": {"n": 64, **{f"s{i}": 1 for i in range(8)}}}, {"sizes": {"n": 64, "1n": 2}},
    {"sizes": {"n": 64, "np": 2}}, {"sizes": {"n": 64, "floor": 2}}, {"sizes": {"n": 64, "np2": 2}},
    {"inputs": [{"name": "0", "shape": ["n"]}]}, {"inputs": [{"name": "cdiv", "shape": ["n"]}]},
    {"inputs": [{"name": "x_", "shape": ["n"]}], "reference": {"y": "x_"}},
    {"inputs": []}, {"outputs": []},
    {"inputs": [{"name": f"x{i}", "shape": ["n"]} for i in range(9)]},
])
def test_the_schema_and_the_service_agree_on_a_declared_task(api, people, schema, task_dir, changes):
    body = _definition(**changes)
    try:
        jsonschema.validate(body, {"$ref": "#/components/schemas/DeclaredTaskCreate", **schema})
        allowed = True
    except jsonschema.ValidationError:
        allowed = False

    response = api(people["alice"]).post("/api/tasks/declared/", body, format="json")

    assert (response.status_code == 201) is allowed, (changes, response.status_code, response.json())


@pytest.mark.parametrize(("field", "count", "words"), [
    ("inputs", 0, "inputs: a list of 1 to 8 tensors"), ("inputs", 9, "inputs: a list of 1 to 8 tensors"),
    ("outputs", 0, "outputs: a list of 1 to 4 tensors"), ("outputs", 5, "outputs: a list of 1 to 4 tensors"),
])
def test_a_count_of_tensors_out_of_bounds_is_refused_in_the_harness_words(api, people, task_dir, field,
                                                                          count, words):
    tensors = [{"name": f"t{i}", "shape": ["n"]} for i in range(count)]
    body = _definition(**{field: tensors})

    response = api(people["alice"]).post("/api/tasks/declared/", body, format="json")

    assert response.status_code == 400 and response.json() == {field: [words]}


# -- a skill library file ----------------------------------------------------------------------


@pytest.fixture
def reviewer(db):
    """A reviewer of the default library (staff), who may import into it."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("rita", password="rita-secret-1", is_staff=True)


def _library_file(**changes) -> dict:
    card = {"card_id": "agreed-v1", "intent": "VEC4", "status": "approved",
            "data": card_data("agreed-v1", "VEC4", 1.2, 1, ["relu"])}
    return {"format": "optiml-skill-library", "version": 1, "cards": [card], **changes}


def _card(**changes) -> dict:
    return {**_library_file()["cards"][0], **changes}


@pytest.mark.parametrize("changes", [
    {}, {"format": "optiml-trajectory"}, {"format": None}, {"version": 2}, {"cards": []},
    {"cards": [_card(card_id="../x-v1")]}, {"cards": [_card(card_id="skeleton:../x")]},
    {"cards": [_card(intent="MAGIC")]}, {"cards": [_card(data="text")]},
    {"cards": [_card(data={**_card()["data"], "sentence": " \x1c "})]},
    {"cards": [_card(data={key: value for key, value in _card()["data"].items() if key != "anchor"})]},
])
def test_the_schema_and_the_service_agree_on_a_skill_library_file(api, schema, reviewer, changes):
    """The import's body was documented as any object: a client could not learn that a file
    needs its format, version and cards (the format a single value) until the service
    refused it."""
    body = _library_file(**changes)
    for key in [key for key, value in changes.items() if value is None]:
        del body[key]
    documented = _operations(schema)[("POST", "/api/skills/import/")]["requestBody"]
    assert documented["required"] is True
    try:
        jsonschema.validate(body, documented["content"]["application/json"]["schema"])
        allowed = True
    except jsonschema.ValidationError:
        allowed = False

    response = api(reviewer).post("/api/skills/import/", body, format="json")

    assert (response.status_code == 201) is allowed, (changes, response.status_code, response.json())


def test_the_documented_library_file_names_its_one_format_and_version(schema):
    documented = _operations(schema)[("POST", "/api/skills/import/")]["requestBody"]
    file = documented["content"]["application/json"]["schema"]

    assert file["properties"]["format"]["enum"] == ["optiml-skill-library"]
    assert file["properties"]["version"]["enum"] == [1]
    assert set(file["required"]) == {"format", "version", "cards"}


# -- found by the all-checks fuzz test once it had things of its own to act on ----------------


def test_the_detail_of_a_node_no_gpu_measured_is_what_the_schema_says(api, people, relu_run, schema):
    """A pending node has no GPU and so no ceilings: its roofline's ceilings are null, which
    the schema called an object (schemathesis: response violates schema)."""
    run = relu_run(budget=2, user=people["alice"], drive=False)

    node = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/").json()

    roofline = schema["components"]["schemas"]["Roofline"]["properties"]
    assert node["roofline"]["ceilings"] is None and node["roofline"]["gpu"] is None
    assert roofline["ceilings"].get("nullable") is True and roofline["gpu"].get("nullable") is True


def test_editing_a_card_with_nothing_to_change_is_refused_by_the_schema_as_by_the_service(api, schema):
    from django.contrib.auth import get_user_model

    from lineage.models import SkillCard

    editor = get_user_model().objects.create_user("rita", password="rita-secret-1", is_staff=True)
    SkillCard.objects.create(card_id="agreed-v1", intent="VEC4", status="verified",
                             data=card_data("agreed-v1", "VEC4", 1.2, 1, ["relu"]))
    body = _operations(schema)[("PATCH", "/api/skills/{card_id}/")]["requestBody"]
    edit = {"$ref": body["content"]["application/json"]["schema"]["$ref"], **schema}

    assert body["required"] is True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({}, edit)
    jsonschema.validate({"notes": ""}, edit)
    assert api(editor).patch("/api/skills/agreed-v1/", {}, format="json").status_code == 400
    # Blank notes are schema-valid too (they clear the notes): the schema's oneOf once refused
    # "" as matching both its pattern and its blank branch.
    assert api(editor).patch("/api/skills/agreed-v1/", {"notes": "caveat"}, format="json").status_code == 200
    assert api(editor).patch("/api/skills/agreed-v1/", {"notes": ""}, format="json").status_code == 200
