"""A 2-D map that only ever reads and writes `p[row * W + col]` (W the column bound) is a
1-D map over the flat index, written on a 2-D grid: read that way, it is direct, and
`map.vec4` can take it (an activation over a matrix on a 2-D grid, as people write it).

The flat view replaces every such access with `p[optiml_element]` over one axis of `H * W`
elements; the row and column are not read anywhere else, so nothing else changes. A map
that reads them otherwise (`bias[col]`, a transpose's `y[col * H + row]`) keeps its two
axes.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..rewrites.syntax import named_statements, parse
from . import strides
from .types import Axis, Form

FLAT = "optiml_element"  # not a name the skeletons use for their own loops
_SUBSCRIPT = re.compile(r"\b([A-Za-z_]\w*)\s*\[([^\[\]]*)\]")


def statements(body: str) -> tuple:
    """The body's statements as syntax nodes (for lift's direct-map check)."""
    tree = parse(f"void optiml_flat_body() {{\n{body}\n}}")
    function = tree.root_node.named_children[0]
    return tuple(named_statements(function.child_by_field_name("body")))


def flattened(form: Form) -> Form | None:
    """The flat view of a 2-D map (`form.direct` measured on it), or None."""
    if len(form.space) != 2:
        return None
    row, col = form.space
    flat = f"{row.name} * ({col.bound}) + {col.name}"
    pointers = set(form.reads) | set(form.writes)
    found = False

    def swap(match: re.Match[str]) -> str:
        nonlocal found
        if match.group(1) in pointers and strides.same_index(match.group(2), flat):
            found = True
            return f"{match.group(1)}[{FLAT}]"
        return match.group(0)

    body = _SUBSCRIPT.sub(swap, form.body)
    if not found or re.search(rf"\b(?:{re.escape(row.name)}|{re.escape(col.name)})\b", body):
        return None
    axis = Axis(FLAT, "long long", f"(long long)({row.bound}) * ({col.bound})")
    return replace(form, space=(axis,), body=body,
                   notes=(*form.notes, f"a 2-D map over {row.name} x {col.name} read as one flat index"))
