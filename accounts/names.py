"""Names and text people write that other people then read: a team's name (also its skill
library's), and text of several lines (a run's intent, a declared task's description, a
card's sentence, notes, comments and reviews). Pure: no Django.

A name is shown as it is written, on pages and in lists beside other names, so it may
not hold characters that change how the text around it reads or break its line:
control characters (C0, DEL, C1: a newline, an escape), line and paragraph separators,
and the directional formatting characters that Unicode's Bidi_Control property lists
(UAX #9, section 2): marks (U+061C, U+200E, U+200F), embeddings and overrides
(U+202A-U+202E) and isolates (U+2066-U+2069). An override makes a name read as other
text than it holds ("Trojan Source", CVE-2021-42574). Joiners and accents stay: scripts
and emoji need them.

Text of several lines may hold line breaks and tabs (LF, CR, TAB and the line and
paragraph separators) and the directional marks (U+061C, U+200E, U+200F): a mark only
gives its neighbours a direction, as a letter of that script would, and a writer of
Arabic or Hebrew needs them to place a number or a Latin word. The embeddings,
overrides and isolates are refused there too: they reorder the text after them.
"""

from __future__ import annotations

import unicodedata

# Bidi_Control (Unicode's PropList.txt), by code point.
BIDI_CONTROLS = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})
_SEPARATORS = frozenset({"Zl", "Zp"})  # U+2028, U+2029

BIDI_MARKS = frozenset({0x061C, 0x200E, 0x200F})
_LINE_BREAKS = frozenset("\t\n\r")

# The same rule as a JSON Schema pattern (ECMA-262 and Python's re read it alike), for the
# API's schema: no forbidden character anywhere, and at least one that is not a space.
_FORBIDDEN_CLASS = r"\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
DISPLAY_NAME_PATTERN = rf"^[^{_FORBIDDEN_CLASS}]*[^\s{_FORBIDDEN_CLASS}][^{_FORBIDDEN_CLASS}]*$"
# And text's: tabs, line breaks and marks are allowed, so they are left out of the class.
_TEXT_FORBIDDEN_CLASS = r"\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069"
DISPLAY_TEXT_PATTERN = rf"^[^{_TEXT_FORBIDDEN_CLASS}]*$"
DISPLAY_TEXT_NOT_BLANK_PATTERN = (
    rf"^[^{_TEXT_FORBIDDEN_CLASS}]*[^\s{_TEXT_FORBIDDEN_CLASS}][^{_TEXT_FORBIDDEN_CLASS}]*$")


def display_name_problem(name: str) -> str | None:
    """What is wrong with `name` as a name others read, in words that say which character
    and where; None when nothing is."""
    return _problem(name, "a name", lines=False)


def display_text_problem(text: str) -> str | None:
    """What is wrong with `text` (of one line or several) as text others read, in the
    same words; None when nothing is."""
    return _problem(text, "text", lines=True)


def _problem(text: str, what: str, *, lines: bool) -> str | None:
    for index, char in enumerate(text):
        kind = _forbidden_kind(char, lines=lines)
        if kind:
            described = unicodedata.name(char, "").lower()
            shown = f"U+{ord(char):04X}" + (f" ({described})" if described else "")
            return f"character {index + 1} is {shown}: {what} may not hold {kind}"
    return None


def _forbidden_kind(char: str, *, lines: bool) -> str:
    if lines and (char in _LINE_BREAKS or ord(char) in BIDI_MARKS):
        return ""
    if ord(char) in BIDI_CONTROLS:
        return "text-direction controls (they make it read as other text)"
    category = unicodedata.category(char)
    if category == "Cc":
        return "control characters"
    if category in _SEPARATORS and not lines:
        return "line or paragraph separators"
    return ""
