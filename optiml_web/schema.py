"""The OpenAPI schema documents every answer an operation can give, errors included.

drf-spectacular documents what a view returns on success, and what @extend_schema adds.
The error answers follow from how the API is built, so they are added here by rule,
once, rather than view by view (where the next view would forget them):

- 400 on every operation: a query parameter it does not document is refused
  (optiml_web.query_guard), and a body or a documented parameter may be wrong;
- 401 where a session is required (accounts.authentication: signed out is 401);
- 403 on writes of signed-in views (Django's CSRF check), and where a view says so;
- 404 where the path names something (a run, a node, a share token);
- 413 and 415 where there is a request body (optiml_web.limits, JSON only);
- 429 where a view is throttled.

Error bodies are DRF's: {"detail": "..."}, or for a 400 on input also
{"field": ["message", ...], ...}.

Request bodies say what the serializers refuse, also by rule: a text field that refuses
blank text (DRF's CharField unless allow_blank, after trimming the spaces) is at least
one character long and holds one that is not a space, so that a client, or a fuzzer,
never sends as valid what the service then refuses.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.authentication import SessionScheme
from drf_spectacular.openapi import AutoSchema
from rest_framework import permissions, serializers

from optiml_web.params import MAX_DB_INT, IdConverter


class ApiSessionScheme(SessionScheme):
    """accounts.authentication.SessionAuthentication is DRF's, documented the same way: the
    session cookie."""

    target_class = "accounts.authentication.SessionAuthentication"
    priority = 0


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="what went wrong, in words")


# A 400 is {"detail": ...} (the body is not JSON) or messages by field, the way DRF's
# serializers give them: a list of texts, or for a nested field its own such object.
BAD_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": 'messages by field ({"team": ["a whole number ..."]}), or {"detail": "..."}',
    "additionalProperties": {},
}

DESCRIPTIONS = {
    "400": "the input is not valid; the body says which field or parameter and why",
    "401": "not signed in (sign in at /accounts/login/)",
    "403": "signed in, but not allowed (or the CSRF token is missing)",
    "404": "no such thing here, or not yours to see",
    "409": "not in this state (resuming a running run, say); the body says why",
    "413": "the request body is larger than this endpoint takes",
    "415": "the request body is not JSON",
    "429": "too many requests; try again later",
}
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


# What optiml_web.params takes for an id in a path (`<id:...>`) and, unless a view says
# otherwise, for a whole number in a query: documented, so that a client (or a fuzzer)
# knows the bounds and their edges get tried.
WHOLE_NUMBER = {"type": "integer", "minimum": 0, "maximum": MAX_DB_INT}
ID_PATTERNS = {IdConverter.regex, f"^{IdConverter.regex}$"}


class ApiSchema(AutoSchema):
    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        for parameter in operation.get("parameters", []):
            _bound_whole_numbers(parameter)
        responses = operation.setdefault("responses", {})
        for code in self._error_codes(operation):
            if code not in responses:
                body = BAD_REQUEST_SCHEMA if code == "400" else ErrorSerializer
                responses[code] = self._get_response_for_code(body, code)
        for code, response in responses.items():
            if not response.get("description") and code in DESCRIPTIONS:
                response["description"] = DESCRIPTIONS[code]
        return operation

    def _error_codes(self, operation: dict) -> list[str]:
        has_body = "requestBody" in operation
        signed_in = self._needs_sign_in()
        codes = ["400"]  # every operation refuses a query parameter it does not document
        if signed_in:
            codes.append("401")
            if self.method in UNSAFE:
                codes.append("403")
        if "{" in self.path:
            codes.append("404")
        if has_body:
            codes += ["413", "415"]
        # A throttle may limit some methods only (search.throttles: the POST of a list).
        throttles = getattr(self.view, "throttle_classes", None) or []
        if any(self.method in getattr(throttle, "methods", {self.method}) for throttle in throttles):
            codes.append("429")
        return codes

    def _get_request_body(self, direction="request"):
        body = super()._get_request_body(direction)
        # A body given as a raw schema that requires a field (accounts.apis MEMBER_ROLE_BODY)
        # is itself required: drf-spectacular marks only serializers' bodies so.
        if body and all(media.get("schema", {}).get("required") for media in body["content"].values()):
            body["required"] = True
        # So is the body of a serializer that needs some of its optional fields (below).
        if body and getattr(self.get_request_serializer(), "fields_at_least", None):
            body["required"] = True
        return body

    def _map_serializer(self, serializer, direction, bypass_extensions=False):
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        # A body whose fields are each optional but not all at once (SkillCardEditSerializer:
        # a sentence, notes, or both) says how many it needs: its validate() refuses fewer.
        least = getattr(serializer, "fields_at_least", None)
        if direction == "request" and least and isinstance(schema, dict):
            schema["minProperties"] = least
        return schema

    def _insert_field_validators(self, field, schema):
        super()._insert_field_validators(field, schema)
        # A text that may be blank is drf-spectacular's oneOf [its pattern, a string of length 0];
        # a pattern that admits "" too (DisplayTextField's) makes "" match both, which oneOf
        # refuses: the schema then refused the blank text the service takes. anyOf says it.
        if BLANK_TEXT in schema.get("oneOf", []):
            schema["anyOf"] = schema.pop("oneOf")

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, serializers.ListSerializer) and isinstance(schema, dict):
            # A nested serializer's many=True list: its bounds, which drf-spectacular leaves out.
            for bound, key in (("min_length", "minItems"), ("max_length", "maxItems")):
                if getattr(field, bound, None) is not None:
                    schema[key] = getattr(field, bound)
        if direction == "request" and _refuses_blank(field) and isinstance(schema, dict) \
                and schema.get("type") == "string":
            schema.setdefault("minLength", 1)
            # A regex validator's pattern (a RegexField's, a DisplayTextField's) is added after
            # this, and says more.
            if field.trim_whitespace and not {"pattern", "format", "enum"} & set(schema) \
                    and not any(isinstance(v, RegexValidator) for v in field.validators):
                schema["pattern"] = NOT_BLANK_PATTERN
        return schema

    def _needs_sign_in(self) -> bool:
        return not all(isinstance(permission, permissions.AllowAny)
                       for permission in self.view.get_permissions())


# Holds a character that is not a space: what DRF's CharField takes once it has trimmed
# the spaces around it (JSON Schema patterns are not anchored). Python's str.strip()
# also trims U+001C-U+001F and U+0085, which ECMA-262's \s (the dialect JSON Schema
# names) does not count as spaces: they are left out by name, so that a client's
# validator and the service agree that "\x1c" is blank.
NOT_BLANK_PATTERN = r"[^\s\u001c-\u001f\u0085]"
BLANK_TEXT = {"type": "string", "maxLength": 0}  # drf-spectacular's branch for allow_blank


def _refuses_blank(field) -> bool:
    return isinstance(field, serializers.CharField) and not field.allow_blank and not field.read_only


def _bound_whole_numbers(parameter: dict) -> None:
    schema = parameter.get("schema", {})
    if parameter.get("in") == "path" and schema.get("pattern") in ID_PATTERNS:
        parameter["schema"] = dict(WHOLE_NUMBER)
    elif parameter.get("in") == "query" and schema.get("type") == "integer":
        parameter["schema"] = {**WHOLE_NUMBER, **schema}
