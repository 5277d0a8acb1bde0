"""Text fields take text only, at every door (optiml_web.params.TextField): each string a
JSON request body may hold, read from the API's own schema so that a new field is checked
without anyone adding it here, is refused with a 400 on that field when a JSON number
stands in its place. DRF's CharField turned 443 into "443" (a team named 443, a task
named 7, a shape of ["1024"]) where the schema says a string; its ChoiceField looked the
number's digits up among the choices."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

TEXT_REQUIRED = "Text is required, not"


def _schema() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def _resolve(node: dict, components: dict) -> dict:
    while "$ref" in node or ("allOf" in node and len(node["allOf"]) == 1):
        node = components[node["$ref"].split("/")[-1]] if "$ref" in node else node["allOf"][0]
    return node


def _is_text(node: dict) -> bool:
    options = node.get("oneOf", [node])  # DRF's allow_blank is a oneOf of two strings
    return all(option.get("type") == "string" or "enum" in option for option in options)


def _text_paths(node: dict, components: dict, path: tuple = ()) -> list[tuple]:
    """The path of every string the body `node` may hold: keys, "[]" for an array's
    items, "*" for an object's free keys."""
    node = _resolve(node, components)
    if node.get("readOnly"):
        return []
    if _is_text(node):
        return [path]
    if node.get("type") == "array":
        return _text_paths(node["items"], components, (*path, "[]"))
    found = [found for key, child in node.get("properties", {}).items()
             for found in _text_paths(child, components, (*path, key))]
    if isinstance(node.get("additionalProperties"), dict):
        found += _text_paths(node["additionalProperties"], components, (*path, "*"))
    return found


def _text_fields() -> list[tuple[str, str, tuple]]:
    """(method, path, field path) of every string in every JSON request body."""
    spec = _schema()
    fields = []
    for url, operations in spec["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                fields += [(method.upper(), url, found)
                           for found in _text_paths(body["schema"], spec["components"]["schemas"])]
    return fields


# Bodies that are files, read whole by their own parser (lineage.engine.library.parse_library),
# which checks the format before any card and names the first field at fault in its own
# words: a body holding one field alone is refused at `format`, whatever that field holds.
# tests/web/test_schema_agreement.py checks that file's schema and the service agree.
FILE_BODIES = {("POST", "/api/skills/import/")}

TEXT_FIELDS = [(method, path, field) for method, path, field in _text_fields()
               if (method, path) not in FILE_BODIES]


def _holding(path: tuple, value) -> object:
    """A body whose only content is `value` at `path`."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if head == "[]":
        return [_holding(rest, value)]
    return {"y" if head == "*" else head: _holding(rest, value)}


def _error_at(errors, path: tuple) -> str:
    """What the 400 says at `path` (DRF answers a list's item under its index, as a key
    for a ListField's child and as a position for a nested serializer's)."""
    for head in path:
        if isinstance(errors, list) and head == "[]" and errors and isinstance(errors[0], dict | list):
            errors = errors[0]
        elif isinstance(errors, dict):
            errors = errors.get("0" if head == "[]" else "y" if head == "*" else head, {})
        else:
            return ""
    return str(errors)


@pytest.fixture
def doors(people, api):
    """url(path) -> the path with real ids, and a client allowed through the door before
    the body is read: the team's admin for teams, a project admin for the default skill
    library (its reviewers), alice elsewhere."""
    from django.contrib.auth import get_user_model

    from lineage.models import SkillCard

    SkillCard.objects.create(card_id="vec4-v1", intent="VEC4", status="verified", data={
        "sentence": "float4", "effects": {}, "evidence": {}, "scope": {"tasks": ["relu"], "arch": "sm_90"},
        "anchor": {"rewrites": [], "steps": []}})
    admin = get_user_model().objects.create_superuser("root", password="root-secret-1")
    ids = {"team_id": people["team"].pk, "username": "bob", "card_id": "vec4-v1"}

    def door(path: str):
        user = (people["dana"] if path.startswith("/api/teams/") else
                admin if path.startswith("/api/skills/") else people["alice"])
        return path.format(**ids), api(user)

    return door


@pytest.mark.parametrize("number", [443, 0.5])
@pytest.mark.parametrize(("method", "path", "field"), TEXT_FIELDS,
                         ids=[f"{m} {p} {'.'.join(f)}" for m, p, f in TEXT_FIELDS])
def test_a_number_where_the_schema_says_text_is_refused_on_that_field(doors, method, path, field, number):
    url, client = doors(path)

    response = client.generic(method, url, _json(_holding(field, number)), content_type="application/json")

    assert response.status_code == 400, (response.status_code, response.content)
    said = _error_at(response.json(), field)
    assert f"{TEXT_REQUIRED} {type(number).__name__}" in said, response.json()


def test_the_schema_has_text_fields_to_check():
    # Guards the reading of the schema above: were it to find nothing, nothing is tested.
    found = {(method, path, ".".join(field)) for method, path, field in TEXT_FIELDS}
    assert {("POST", "/api/teams/", "name"), ("POST", "/api/runs/", "task"),
            ("POST", "/api/tasks/declared/", "inputs.[].shape.[]"),
            ("POST", "/api/tasks/declared/", "reference.*"),
            ("PATCH", "/api/teams/{team_id}/members/{username}/", "role")} <= found


def _json(body) -> str:
    import json

    return json.dumps(body)
