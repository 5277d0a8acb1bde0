"""A skill library as one JSON file, so teams can share what their searches know (pure:
no Django). `library_dict` writes the cards as stored; `parse_library` reads a file from
anyone, which is untrusted: every card is checked for the fields the search and the
pages read, and a file that fails says which card and which field, whole or not at all.

    {"format": "optiml-skill-library", "version": 1, "exported_at": "...",
     "cards": [{"card_id": "vec4-v1", "intent": "VEC4", "status": "approved",
                "data": {...the card...}}]}
"""

from __future__ import annotations

import re
from typing import Any

from .vocabulary import INTENTS

LIBRARY_FORMAT = "optiml-skill-library"
LIBRARY_VERSION = 1
MAX_CARDS = 1000
CARD_ID = re.compile(r"[a-z0-9_]{1,90}-v[0-9]{1,6}")
SKELETON_CARD_ID = re.compile(r"skeleton:([a-z0-9_]{1,40}\.[a-z0-9_]{1,40})")  # skeleton_cards.py's ids


def request_schema(*, not_blank: str) -> dict[str, Any]:
    """What parse_library requires of a file, as OpenAPI 3.0 JSON Schema for the import's
    documented request body, from the same constants, so the schema never allows less or
    more at the top than the service: the one format and version, 1 to MAX_CARDS cards,
    each with an id of either shape, an intent of the vocabulary, and its data's fields.
    What no schema can say (a skeleton's family, measured steps) stays parse_library's.
    `not_blank`: the pattern of text that str.strip() leaves non-empty (optiml_web.schema)."""
    text = {"type": "string", "pattern": not_blank}
    card_data = {"type": "object", "required": ["sentence", "effects", "evidence", "scope", "anchor"],
                 "properties": {"sentence": text, "effects": {"type": "object"},
                                "evidence": {"type": "object"}, "scope": {"type": "object"},
                                "anchor": {"type": "object"}}}
    card = {"type": "object", "required": ["card_id", "intent", "data"],
            "properties": {"card_id": {"type": "string",
                                       "pattern": f"^(?:{CARD_ID.pattern}|{SKELETON_CARD_ID.pattern})$"},
                           "intent": {"type": "string", "enum": sorted(INTENTS)},
                           "status": {"type": "string"}, "data": card_data}}
    return {"type": "object", "required": ["format", "version", "cards"],
            "properties": {"format": {"type": "string", "enum": [LIBRARY_FORMAT]},
                           "version": {"type": "integer", "enum": [LIBRARY_VERSION]},
                           "exported_at": {"type": "string"},
                           "cards": {"type": "array", "minItems": 1, "maxItems": MAX_CARDS, "items": card}}}


class LibraryError(ValueError):
    """A library file that cannot be imported; `where` names the card and field."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where, self.message = where, message


def library_dict(cards: list[dict[str, Any]], exported_at: str) -> dict[str, Any]:
    return {"format": LIBRARY_FORMAT, "version": LIBRARY_VERSION, "exported_at": exported_at,
            "cards": cards}


def parse_library(data: Any) -> list[dict[str, Any]]:
    """The cards of a library file, each {card_id, intent, status, data}, checked."""
    if not isinstance(data, dict) or data.get("format") != LIBRARY_FORMAT:
        raise LibraryError("format", f"not a skill library file (expected format {LIBRARY_FORMAT!r})")
    if data.get("version") != LIBRARY_VERSION:
        raise LibraryError("version", f"version {data.get('version')!r} is not {LIBRARY_VERSION}")
    cards = data.get("cards")
    if not isinstance(cards, list) or not cards:
        raise LibraryError("cards", "a non-empty list of cards is required")
    if len(cards) > MAX_CARDS:
        raise LibraryError("cards", f"at most {MAX_CARDS} cards")
    seen, parsed = set(), []
    for index, card in enumerate(cards):
        where = f"cards[{index}]"
        if not isinstance(card, dict):
            raise LibraryError(where, "a card is an object")
        card_id = card.get("card_id")
        if not isinstance(card_id, str) or not (CARD_ID.fullmatch(card_id)
                                                or SKELETON_CARD_ID.fullmatch(card_id)):
            raise LibraryError(f"{where}.card_id",
                               "an id such as vec4-v1 or skeleton:rows.block_per_row is required")
        if card_id in seen:
            raise LibraryError(f"{where}.card_id", f"{card_id} appears twice")
        seen.add(card_id)
        parsed.append({"card_id": card_id, "intent": _intent(card, where),
                       "status": card.get("status") if isinstance(card.get("status"), str) else "",
                       "data": _card_data(card.get("data"), f"{where}.data")})
        _skeleton(card_id, parsed[-1]["data"], f"{where}.data")
    return parsed


def _intent(card: dict[str, Any], where: str) -> str:
    intent = card.get("intent")
    if intent not in INTENTS:
        raise LibraryError(f"{where}.intent", f"{intent!r} is not in the vocabulary")
    data = card.get("data")
    if isinstance(data, dict) and data.get("intent", intent) != intent:
        raise LibraryError(f"{where}.data.intent", "differs from the card's intent")
    return intent


def _card_data(data: Any, where: str) -> dict[str, Any]:
    """The fields the library's pages and the skills source read, with their types."""
    if not isinstance(data, dict):
        raise LibraryError(where, "the card's data is an object")
    if not isinstance(data.get("sentence"), str) or not data["sentence"].strip():
        raise LibraryError(f"{where}.sentence", "a sentence is required")
    speed = (data.get("effects") or {}).get("speedup") if isinstance(data.get("effects"), dict) else None
    if not isinstance(speed, dict) or not _number_or_none(speed.get("median")):
        raise LibraryError(f"{where}.effects.speedup", "{n, min, median, max} is required")
    evidence = data.get("evidence")
    if not isinstance(evidence, dict) or not all(isinstance(evidence.get(k), int) and evidence[k] >= 0
                                                 for k in ("lineages", "transitions")):
        raise LibraryError(f"{where}.evidence", "lineages and transitions (counts) are required")
    for key in ("scope", "anchor"):
        if not isinstance(data.get(key), dict):
            raise LibraryError(f"{where}.{key}", "an object is required")
    tasks = data["scope"].get("tasks", [])
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise LibraryError(f"{where}.scope.tasks", "a list of task names is required")
    for key in ("rewrites", "steps"):
        if not isinstance(data["anchor"].get(key, []), list):
            raise LibraryError(f"{where}.anchor.{key}", "a list is required")
    return data


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _skeleton(card_id: str, data: dict[str, Any], where: str) -> None:
    """A skeleton card (lineage/engine/skeleton_cards.py) names a skeleton of this project
    (search/engine/forms/skeletons.py; the file brings no code) of the family it says, and
    the measured steps it expects from; a token card is no skeleton."""
    from search.engine.forms import skeletons

    match = SKELETON_CARD_ID.fullmatch(card_id)
    if (data.get("kind") == "skeleton") != bool(match):
        raise LibraryError(f"{where}.kind",
                           "a card is a skeleton card exactly when its id is skeleton:<name>")
    if not match:
        return
    try:
        skeleton = skeletons.by_name(match.group(1))
    except StopIteration:
        raise LibraryError(f"{where}.skeleton",
                           f"{match.group(1)!r} is no skeleton of this project") from None
    if data.get("skeleton") != skeleton.name or data.get("family") != skeleton.family:
        raise LibraryError(f"{where}.skeleton",
                           f"the skeleton and family must be {skeleton.name}, {skeleton.family}")
    if list(data.get("intents") or []) != list(skeleton.intents) or not isinstance(data.get("tasks"), list) \
            or not all(isinstance(t, str) for t in data["tasks"]):
        raise LibraryError(f"{where}.intents",
                           f"the intents must be {list(skeleton.intents)}, and tasks a list of names")
    steps = data["evidence"].get("steps")
    if not isinstance(steps, list) or not all(_step(step, skeleton.intents) for step in steps):
        raise LibraryError(f"{where}.evidence.steps",
                           "a list of {task, intent (one of the skeleton's), speedup (a positive number)}")


def _step(step: Any, intents: tuple[str, ...]) -> bool:
    """A measured step a skeleton card expects from (its speed-up's log is taken)."""
    if not isinstance(step, dict) or not isinstance(step.get("task"), str):
        return False
    if step.get("intent") not in intents:
        return False
    speedup = step.get("speedup")
    return isinstance(speedup, int | float) and not isinstance(speedup, bool) and 0 < speedup < float("inf")
