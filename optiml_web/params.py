"""Query and path parameters, parsed in one place.

Every view and the websocket consumer read their parameters through these functions, so
that bad input always gets the same answer: a ParameterError naming the parameter, which
the API turns into a 400 ({"name": ["message"]}) and the consumer into a 4400 close.

Why not `str.isdigit()` and `int()`: `"²".isdigit()` is true and `int("²")` fails, and
`int("9" * 30)` succeeds but no database column holds it (SQLite raises OverflowError,
PostgreSQL "out of range"). So a whole number here is written as profiling.harness.numerals
says (ASCII digits only: the rule plan expressions follow too), within bounds that
default to what a 64-bit database integer holds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from profiling.harness import numerals

if TYPE_CHECKING:
    from channels.generic.websocket import AsyncWebsocketConsumer

# The largest value of a signed 64-bit integer: PostgreSQL's bigint, SQLite's INTEGER,
# Django's BigAutoField (DEFAULT_AUTO_FIELD). Ids and sequence numbers never exceed it.
MAX_DB_INT = 2**63 - 1
MAX_DIGITS = len(str(MAX_DB_INT))  # 19: longer input is refused before int() sees it
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class ParameterError(ValueError):
    """A parameter that cannot be understood; `name` says which, `message` why."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def parse_int(raw: str, name: str, *, minimum: int = 0, maximum: int = MAX_DB_INT) -> int:
    """A whole number written in ASCII digits (a leading '-' where `minimum` allows it)."""
    expected = f"a whole number from {minimum} to {maximum}"
    problem = numerals.whole_number_problem(raw, negative=minimum < 0, max_digits=MAX_DIGITS)
    if problem:
        raise ParameterError(name, f"{expected}, {problem}, not {_shown(raw)}")
    value = int(raw)
    if not minimum <= value <= maximum:
        raise ParameterError(name, f"{expected}, not {value}")
    return value


def parse_bool(raw: str, name: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ParameterError(name, f"true or false (or 1 or 0), not {_shown(raw)}")


def parse_choice(raw: str, name: str, choices: Collection[str]) -> str:
    if raw not in choices:
        raise ParameterError(name, f"one of {', '.join(sorted(choices))}, not {_shown(raw)}")
    return raw


def parse_text(raw: str, name: str, *, max_length: int) -> str:
    if len(raw) > max_length or "\x00" in raw:
        raise ParameterError(name, f"text of at most {max_length} characters, without NUL")
    return raw


def _shown(raw: str) -> str:
    # Echo enough to recognise the input, never a wall of it.
    return repr(raw if len(raw) <= 40 else f"{raw[:40]}...")


# -- the API's side: a ParameterError becomes a 400 on the parameter -------------------


def query_int(params: Mapping[str, str], name: str, *, default: int | None = None,
              minimum: int = 0, maximum: int = MAX_DB_INT) -> int | None:
    raw = params.get(name)
    if raw is None:
        return default
    return _api(parse_int, raw, name, minimum=minimum, maximum=maximum)


# Absent is the default; present but empty ("?mine=") is not a value of any of these kinds,
# and is refused like any other bad value, as the schema says (optiml_web.schema).


def query_bool(params: Mapping[str, str], name: str, *, default: bool = False) -> bool:
    raw = params.get(name)
    if raw is None:
        return default
    return _api(parse_bool, raw, name)


def query_choice(params: Mapping[str, str], name: str, choices: Collection[str], *,
                 default: str = "") -> str:
    raw = params.get(name)
    if raw is None:
        return default
    return _api(parse_choice, raw, name, choices)


def query_text(params: Mapping[str, str], name: str, *, max_length: int, default: str = "") -> str:
    raw = params.get(name)
    if raw is None:
        return default
    return _api(parse_text, raw, name, max_length=max_length)


def _api(parse, raw: str, name: str, *args, **kwargs):
    try:
        return parse(raw, name, *args, **kwargs)
    except ParameterError as error:
        raise ValidationError({error.name: [error.message]}) from None


# -- websockets ---------------------------------------------------------------------------

BAD_REQUEST_CLOSE = 4400  # application close code: a query parameter that cannot be understood
MAX_CLOSE_REASON_BYTES = 123  # RFC 6455 5.5: a control frame's payload is at most 125 bytes


async def close_bad_request(consumer: AsyncWebsocketConsumer, error: ParameterError) -> None:
    """A consumer's answer to a bad parameter: accept the socket, then close it with 4400
    and the error as the reason (a socket refused before it is accepted would tell the
    client nothing), cut to what a close frame holds without splitting a character."""
    await consumer.accept()
    reason = str(error).encode()[:MAX_CLOSE_REASON_BYTES].decode(errors="ignore")
    await consumer.close(code=BAD_REQUEST_CLOSE, reason=reason)


# -- path parameters --------------------------------------------------------------------


class IdConverter:
    """`<id:run_id>`: like Django's `int`, but only values a database id can take, so a
    path with a 30-digit id is a 404 like any id that does not exist, not a 500; written
    as every whole number is (numerals: /api/runs/007/ names nothing)."""

    regex = f"0|[1-9][0-9]{{0,{MAX_DIGITS - 1}}}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > MAX_DB_INT:
            raise ValueError("larger than a database id")  # no match: Django answers 404
        return number

    def to_url(self, value: int) -> str:
        return str(value)


class TokenConverter:
    """`<token:token>`: a share token as search.sharing_services.share_create makes them
    (secrets.token_urlsafe: letters, digits, '-' and '_'). Anything else cannot be one, and
    is a 404 before a lookup."""

    regex = "[A-Za-z0-9_-]{1,128}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class TaskNameConverter(TokenConverter):
    """`<task:name>`: a task's name (suite names such as reduce_sum, declared ones such as
    user-my-softmax), at most profiling.Task.name's 100 characters."""

    regex = "[A-Za-z0-9_.-]{1,100}"


class CardIdConverter(TokenConverter):
    """`<card:card_id>`: a skill card's id as lineage/engine/cards.py makes them (the
    intent in lower case and its version: `restrict-v1`), at most 100 characters. The
    version is a whole number written as every whole number is (`restrict-v01` names nothing).
    Or a skeleton card's, as lineage/engine/skeleton_cards.py makes them
    (`skeleton:rows.block_per_row`)."""

    regex = r"[a-z0-9_]{1,90}-v(?:0|[1-9][0-9]{0,5})|skeleton:[a-z0-9_]{1,40}\.[a-z0-9_]{1,40}"


class UsernameConverter(TokenConverter):
    """`<username:username>`: what Django's username validator allows (letters, digits and
    @ . + - _), at most its 150 characters."""

    regex = r"[\w.@+-]{1,150}"


def register_converters() -> None:
    """Called by each URL module that uses them, before its routes; once is enough."""
    from django.urls import register_converter
    from django.urls.converters import get_converters

    registered = get_converters()
    for name, converter in (("id", IdConverter), ("token", TokenConverter), ("task", TaskNameConverter),
                            ("card", CardIdConverter), ("username", UsernameConverter)):
        if name not in registered:
            register_converter(converter, name)


# -- text in request bodies ---------------------------------------------------------------
# Every text field of a request body is one of these three (tests/web/test_text_only.py
# posts a number to each string the schema documents). Named at the field rather than
# swapped in by a base serializer: the field's class is what a reader, the schema and a
# review see, and a list's or a dict's child is a field like any other.


class TextOnly:
    """Takes a JSON string only. DRF's CharField turns a JSON number into its digits (a
    team named 443, a shape of ["1024"]) and its ChoiceField looks the digits up among the
    choices, where the schema says a string; a number is refused in words instead."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            kind = "true or false" if isinstance(data, bool) else type(data).__name__
            raise serializers.ValidationError(f"Text is required, not {kind}: a JSON string, in quotes",
                                              code="invalid")
        return super().to_internal_value(data)


class TextField(TextOnly, serializers.CharField):
    """DRF's CharField for text, taking text only."""


class TextChoiceField(TextOnly, serializers.ChoiceField):
    """DRF's ChoiceField of text choices, taking text only."""


class TextRegexField(TextOnly, serializers.RegexField):
    """DRF's RegexField, taking text only."""


class WholeNumberField(serializers.IntegerField):
    """DRF's IntegerField under the query parameters' rule for text: a JSON number, or a
    string of ASCII digits (a leading '-' where the field allows negatives). DRF's own
    takes whatever int() takes: '١٢', '1_000', ' 5 '. One rule for bodies and queries."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            negative = self.min_value is None or self.min_value < 0
            problem = numerals.whole_number_problem(data, negative=negative, max_digits=MAX_DIGITS)
            if problem:
                message = f"A valid integer is required, {problem}, not {_shown(data)}"
                raise serializers.ValidationError(message, code="invalid")
        return super().to_internal_value(data)
