"""Where a step acts, in the code it acted on: the lines of the before-state's source that
its unified diff removes or changes (or, for a pure insertion, the line it inserts
after), and a short excerpt around them. A skill card's page shows its anchor this way,
in each lineage's own code (pure: no Django)."""

from __future__ import annotations

import re
from typing import Any

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def anchor_lines(diff: str) -> list[int]:
    """The 1-based lines of the diff's old side that it removes; where lines are only
    added, the old line they follow (line 1 at the top of the file)."""
    marked: set[int] = set()
    old = 0  # the next old line's number; 0 outside a hunk
    previous = ""  # the kind of the hunk's line before: "-", "+" or " "
    for line in diff.splitlines():
        hunk = _HUNK.match(line)
        if hunk:
            old, previous = int(hunk.group(1)), " "
            if hunk.group(2) == "0":  # an empty old side: additions after line N
                old += 1
            continue
        if not old or line.startswith(("---", "+++")):
            continue
        kind = line[:1] if line[:1] in "-+" else " "
        if kind == "-":
            marked.add(old)
            old += 1
        elif kind == "+":
            if previous == " ":  # an insertion, not a replacement: anchored where it goes
                marked.add(max(old - 1, 1))
        else:
            old += 1
        if kind != "+" or previous != "-":
            previous = kind
    return sorted(marked)


def excerpt(source: str, marked: list[int], context: int = 4, max_lines: int = 60) -> dict[str, Any]:
    """{first_line, text, marked}: the source's lines from `context` before the first
    marked line to `context` after the last (at most `max_lines`), and the marked lines
    that fall in it."""
    lines = source.splitlines()
    if not lines or not marked:
        return {"first_line": 1, "text": "", "marked": []}
    first = max(1, min(marked) - context)
    last = min(len(lines), max(marked) + context, first + max_lines - 1)
    return {"first_line": first, "text": "\n".join(lines[first - 1:last]) + "\n",
            "marked": [m for m in marked if first <= m <= last]}
