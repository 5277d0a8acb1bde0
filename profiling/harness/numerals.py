"""How a number is written wherever a person types one: a query parameter, a JSON string
where the API takes a whole number, a number inside a launch-plan, size or reference
expression. One rule, here, so that no door takes what another refuses. Pure: no Django.

A whole number is ASCII digits 0-9, with a leading '-' only where negatives are allowed:
no leading 0 (`007`: Python refuses it in an expression, so a query or a body does too),
no underscores (`1_000`), no spaces around or inside it, no other digits (`١٢`, `²`,
`１２`), no `0x`/`0o`/`0b` prefixes. Python's int() takes all of those, and ast.parse the
underscores and prefixes, which is why neither is the rule. A number inside an expression
may also have a fraction and an exponent (`0.5`, `1e-3`), in the same digits; the
expression around it is ASCII (names are ASCII identifiers: Python would otherwise read
a full-width `Ｍ` as `M`) and has no spaces around it.
"""

from __future__ import annotations

import ast
import re
import unicodedata

WHOLE_NUMBER_RULE = "ASCII digits 0-9 only (no underscores, spaces or other digits)"
LEADING_ZERO_RULE = "does not begin with 0 (7, not 007)"
NUMBER_IN_EXPRESSION_RULE = ("a number is written in ASCII digits 0-9, with a '.' and an exponent where "
                             "it has them: no underscores and no 0x, 0o or 0b")

_DIGITS = re.compile(r"[0-9]+")
_WHOLE = re.compile(r"0|[1-9][0-9]*")
_DECIMAL = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def whole_number_problem(text: str, *, negative: bool = False, max_digits: int | None = None) -> str | None:
    """What is wrong with `text` as a whole number, in words that follow "a whole number,"
    ("written in ASCII digits..."); None when it is one. The bounds of its value are the
    caller's to check."""
    digits = text[1:] if negative and text.startswith("-") else text
    if not _DIGITS.fullmatch(digits):
        sign = ", a leading '-' for a negative one" if negative else ""
        return f"written in {WHOLE_NUMBER_RULE}{sign}"
    if not _WHOLE.fullmatch(digits):
        return f"one that {LEADING_ZERO_RULE}"
    if max_digits is not None and len(digits) > max_digits:
        return f"of at most {max_digits} digits"
    return None


def expression_text_problem(source: str) -> str | None:
    """What is wrong with the text of an expression before it is parsed: a character that
    is not ASCII, or spaces around it; None when nothing is."""
    for index, char in enumerate(source):
        if not char.isascii():
            described = unicodedata.name(char, "").lower()
            shown = f"U+{ord(char):04X}" + (f" ({described})" if described else "")
            return (f"character {index + 1} is {shown}: an expression is written in ASCII, its names "
                    "in letters, digits and '_', its numbers in digits 0-9")
    if source != source.strip():
        return "an expression may not begin or end with spaces"
    return None


def syntax_words(error: SyntaxError) -> str:
    """Python's reason an expression does not parse, unless it points past this rule: for
    `007` Python suggests an 0o prefix, which the rule refuses."""
    if (error.msg or "").startswith("leading zeros"):
        return f"a whole number {LEADING_ZERO_RULE}"
    return error.msg


def literal_problem(tree: ast.AST, source: str) -> str | None:
    """What is wrong with how a number in the parsed `tree` of `source` is written (as
    the source has it, not as Python read it: `1_000` and `0x10` read as plain ints)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                and not isinstance(node.value, bool):
            written = ast.get_source_segment(source, node)
            pattern = _DIGITS if isinstance(node.value, int) else _DECIMAL
            if written is not None and not pattern.fullmatch(written):
                return f"{written!r} in {source!r}: {NUMBER_IN_EXPRESSION_RULE}"
    return None
