"""Names people give things that other people then read: a team's name (also its skill
library's). Pure: no Django.

A name is shown as it is written, on pages and in lists beside other names, so it may
not hold characters that change how the text around it reads or break its line:
control characters (C0, DEL, C1: a newline, an escape), line and paragraph separators,
and the directional formatting characters that Unicode's Bidi_Control property lists
(UAX #9, section 2): marks (U+061C, U+200E, U+200F), embeddings and overrides
(U+202A-U+202E) and isolates (U+2066-U+2069). An override makes a name read as other
text than it holds ("Trojan Source", CVE-2021-42574). Joiners and accents stay: scripts
and emoji need them.
"""

from __future__ import annotations

import unicodedata

# Bidi_Control (Unicode's PropList.txt), by code point.
BIDI_CONTROLS = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})
_SEPARATORS = frozenset({"Zl", "Zp"})  # U+2028, U+2029

# The same rule as a JSON Schema pattern (ECMA-262 and Python's re read it alike), for the
# API's schema: no forbidden character anywhere, and at least one that is not a space.
_FORBIDDEN_CLASS = r"\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
DISPLAY_NAME_PATTERN = rf"^[^{_FORBIDDEN_CLASS}]*[^\s{_FORBIDDEN_CLASS}][^{_FORBIDDEN_CLASS}]*$"


def display_name_problem(name: str) -> str | None:
    """What is wrong with `name` as a name others read, in words that say which character
    and where; None when nothing is."""
    for index, char in enumerate(name):
        kind = _forbidden_kind(char)
        if kind:
            described = unicodedata.name(char, "").lower()
            shown = f"U+{ord(char):04X}" + (f" ({described})" if described else "")
            return f"character {index + 1} is {shown}: a name may not hold {kind}"
    return None


def _forbidden_kind(char: str) -> str:
    if ord(char) in BIDI_CONTROLS:
        return "text-direction controls (they make it read as other text)"
    category = unicodedata.category(char)
    if category == "Cc":
        return "control characters"
    if category in _SEPARATORS:
        return "line or paragraph separators"
    return ""
