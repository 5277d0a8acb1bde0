"""How much the API takes, checked before anything is stored.

A kernel the gate would refuse for its size must not reach the database first (a 30 MB
kernel used to be stored, and only then refused by the gate). So the API checks the
gate's own limit, imported from the harness, and limits of its own for what the gate
does not bound: launch plans, intents, declared tasks, imported trajectories, and the
request body as a whole (LimitedJSONParser: DRF reads the body as a stream, which
Django's DATA_UPLOAD_MAX_MEMORY_SIZE does not cover).
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import BaseParser, JSONParser, get_encoding
from rest_framework.utils.json import strict_constant

from profiling.harness.policy import MAX_SOURCE_BYTES

__all__ = ["MAX_SOURCE_BYTES"]

# A plan is a few launches, scratch buffers, options and tunables: the suite's largest is
# under 1 KiB. 64 KiB leaves room for any real plan and none for a payload.
MAX_PLAN_BYTES = 64 * 1024
MAX_INTENT_CHARS = 4000  # a paragraph or two: what the kernel should do, in words
MAX_NAME_CHARS = 100  # profiling.Task.name's max_length
MAX_SOURCE_NAMES = 50  # proposal sources named by one run (a handful are configured)
# A declared task is sizes, a few tensors and a reference expression per output
# (profiling.harness.definition caps their counts): a few kB of JSON.
MAX_DECLARED_TASK_BYTES = 64 * 1024
# An imported trajectory: a run of the largest budget the API allows (10,000 evaluations)
# cannot be exported under the body limit anyway (tens of kB per node); a few thousand
# nodes can, and the node count bounds the work of checking the state before any write.
MAX_IMPORT_NODES = 5000
MAX_IMPORT_EVENTS = 10 * MAX_IMPORT_NODES  # node_added, node_evaluated, best_improved, ...
# How deeply a request's JSON may nest. An exported trajectory, the deepest thing the API
# takes, nests about 12 levels (state, tree, nodes, proposal, candidate, plan, launches,
# grid, ...). Deeper input would only reach Python's recursion limit somewhere later.
MAX_JSON_DEPTH = 64


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than this endpoint takes ({limit} bytes)")


class LimitedJSONParser(BaseParser):
    """JSON, read only up to the view's `max_body_bytes` (default: Django's
    DATA_UPLOAD_MAX_MEMORY_SIZE): a larger body is a 413 before it is parsed or stored.

    Not a JSONParser subclass on purpose: DRF hands those `request.body`, which Django
    caps at DATA_UPLOAD_MAX_MEMORY_SIZE for every view alike; this one gets the stream,
    so that one view (the trajectory import) may take more than the rest."""

    media_type = JSONParser.media_type
    renderer_class = JSONParser.renderer_class

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        parser_context = parser_context or {}
        limit = body_limit(parser_context.get("view"))
        request = parser_context.get("request")
        declared = request.META.get("CONTENT_LENGTH", "") if request is not None else ""
        if declared.isascii() and declared.isdigit() and int(declared) > limit:
            raise RequestTooLarge(limit)
        body = stream.read(limit + 1)  # a chunked body has no length to trust
        if len(body) > limit:
            raise RequestTooLarge(limit)
        # Decoded here, not by DRF's JSONParser, whose error would quote Python's codec
        # ("'utf-8' codec can't decode byte 0xff in position 0: invalid start byte").
        encoding = get_encoding(parser_context)
        try:
            text = body.decode(encoding)
        except UnicodeDecodeError as error:
            raise ParseError(f"JSON parse error - the body is not {encoding} text "
                             f"(byte {error.start + 1} is not)") from None
        del body
        try:
            data = json.loads(text, parse_constant=strict_constant if JSONParser.strict else None)
        except RecursionError:  # json.loads on "[[[[..."
            raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels") from None
        except ValueError as error:  # json's own words: "Expecting value: line 1 column 1 (char 0)"
            raise ParseError(f"JSON parse error - {error}") from None
        problem = unstorable(data)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return data


def body_limit(view: Any) -> int:
    return getattr(view, "max_body_bytes", None) or settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def json_bytes(value: Any) -> int:
    """The size of `value` as compact UTF-8 JSON: what storing it costs."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode())


def source_error(source: str) -> str | None:
    """Why the gate would refuse this source for its size, or None."""
    size = len(source.encode("utf-8", errors="surrogatepass"))
    if size <= MAX_SOURCE_BYTES:
        return None
    return (f"the kernel source is {size} bytes; the gate takes at most {MAX_SOURCE_BYTES} "
            "bytes (a kernel file, not a code base)")


def plan_error(plan: Any) -> str | None:
    size = json_bytes(plan)
    if size <= MAX_PLAN_BYTES:
        return None
    return f"the launch plan is {size} bytes of JSON; at most {MAX_PLAN_BYTES} are taken"


def unstorable(data: Any) -> str | None:
    """Why this JSON cannot be stored as it is, or None: nested deeper than MAX_JSON_DEPTH,
    or what the database refuses: NUL in text (PostgreSQL's text and jsonb take none),
    lone surrogates (not UTF-8; json.loads lets "\\ud800" through), and numbers too large
    for a float (1e400 reads as infinity, which jsonb does not take). Walked without
    recursion, so depth itself cannot break the walk."""
    stack: list[tuple[Any, str, int]] = [(data, "$", 1)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"nested more than {MAX_JSON_DEPTH} levels (at {where})"
        if isinstance(value, str):
            if _bad_text(value):
                return f"text with a NUL character or a lone surrogate cannot be stored (at {where})"
        elif isinstance(value, float) and not math.isfinite(value):
            return f"a number too large to store (at {where})"
        elif isinstance(value, dict):
            for key, item in value.items():
                if _bad_text(key):
                    return f"a key with a NUL character or a lone surrogate (in {where})"
                stack.append((item, f"{where}.{key[:40]}", depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value))
    return None


def _bad_text(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False

# The most evaluations a run may have under way at once (Run.parallel): a GPU worker each.
MAX_PARALLEL = 64
