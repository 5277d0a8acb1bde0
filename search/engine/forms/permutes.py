"""Permutations: an elementwise map whose reads walk memory along one coordinate and
whose write walks it along another, the way people write a transpose:

    y[c * R + r] = x[r * C + c];                       a 2-D grid (r, c)
    int r = i / W;  int c = i % W;  y[c * H + r] = x[i];   one flat index read as digits
    y[((n * H + h) * W + w) * C + c] = x[i];           NCHW -> NHWC, digits (n, c, h, w)

A thread per element puts a warp's neighbouring threads on neighbouring values of one
coordinate: one side, the reads or the write, then touches a new 32-byte sector with
every thread. A permutation is the map whose write has stride 1 along a coordinate B
while every read has stride 0 or 1 along another coordinate A (and one of them 1), and
the write jumps along A: staging a tile of (A, B) through shared memory lets both sides
walk their own contiguous coordinate (permutation.smem_tile, transposes.py).

The strides are measured (strides.stride), after every local of the element's work is
read through to the coordinates and, on a flat index, the index itself is written as
its digits (radix.py). The form keeps every coordinate with its extent (slowest first),
`along` = (A, B), the element's declarations (`body`), the value written (`value`, into
`into`) and the write's index in coordinates and parameters alone (`written_at`): the
skeleton computes the value where the reads are coalesced and stores it where the
write is. Anything else, a write under a test, two writes, a write whose index reads
memory (a scatter), is not a permutation and stays a map.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import text, walk
from . import emit, radix, strides
from .reading import _declaration
from .types import PERMUTATION, Axis, Form

_SUBSCRIPT = "subscript_expression"


def lift_permutation(space, common: dict[str, Any]) -> Form | None:
    """The permutation form of a map's index space and work, or None (a map as it is)."""
    found = _coordinates(space, emit.uniform_locals(common["prelude"]))
    if found is None:
        return None
    coordinates, declarations, rebuild = found
    work = [s for s in space.body if s not in declarations]
    offsets = _pointer_offsets(work[:-1], common)
    write = _single_write(work, common, offsets)
    if write is None:
        return None
    lets, (pointer, index, value) = work[:-1], write
    names = {c.name for c in coordinates}
    if _assigns(work, names | {space.axes[0].name}):
        return None
    locals_ = {}
    for statement in lets:
        declared = _declaration(statement)
        if declared is None:
            return None
        locals_[declared[0]] = text(declared[2])
    flat = _flat_value(coordinates) if rebuild else None
    fixed = strides.literal_arguments_of(common["params"], common["args"])

    def closed(index_text: str) -> str:
        index_text = strides.through(strides.expand_macros(index_text, common["helpers"]), locals_, "")
        if flat is None:
            return index_text
        return re.sub(rf"\b{re.escape(space.axes[0].name)}\b", f"({flat})", index_text)

    def steps(index_text: str) -> dict[str, int] | None:
        measured = {c.name: strides.stride(closed(index_text), c.name, fixed) for c in coordinates}
        return None if any(v is None for v in measured.values()) else measured

    written = steps(index)
    reads = [steps(i) for i in _read_indices(work, common, offsets)]
    if written is None or not reads or any(r is None for r in reads):
        return None
    along_write = [c.name for c in coordinates if written[c.name] == 1]
    along_read = [c.name for c in coordinates if c.name not in along_write
                  and all(r[c.name] in (0, 1) for r in reads) and any(r[c.name] == 1 for r in reads)]
    if len(along_write) != 1 or len(along_read) != 1 or written[along_read[0]] in (0, 1, -1):
        return None
    at = closed(index)
    if "[" in at or _calls(at):  # a scatter: the write's place is read from memory or a call
        return None
    from .lift import form_fields

    return Form(family=PERMUTATION, body="\n".join(text(s) for s in lets), coordinates=tuple(coordinates),
                rebuild=rebuild, along=(along_read[0], along_write[0]), value=value, into=pointer,
                written_at=at, notes=(f"reads along {along_read[0]}, writes along {along_write[0]}",),
                **form_fields(common))


def _calls(expression: str) -> int:
    """How many calls (`name(`) an index expression holds: a scatter through a function."""
    return len(re.findall(r"\b[A-Za-z_]\w*\s*\(", expression))


def _coordinates(space, uniform: dict[str, str]) -> tuple[list[Axis], list[Node], str] | None:
    """(coordinates slowest first, the statements declaring them, the flat index's
    declaration from them or "") of a grid's axes or of a flat index's digits."""
    if len(space.axes) >= 2:
        return list(space.axes), [], ""
    axis = space.axes[0]
    digits = radix.digits(space.body, axis.name)
    if len(digits) < 2:
        return None
    names = {d.name for d in digits}
    declarations = [s for s in space.body if (_declaration(s) or ("",))[0] in names]
    coordinates = radix.coordinates(axis, digits)
    outer = digits[0]
    exact = _exact_extent(strides.through(axis.bound, uniform, ""), outer.divisor)
    if exact is not None:  # N * C * H * W over C * H * W: N, no division
        coordinates[0] = Axis(outer.name, outer.ctype, exact)
    elif outer.divisor:  # the outermost's extent rounded up: the bound need not be a multiple
        inner = " * ".join(f"(long long)({d})" for d in outer.divisor)
        rounded_up = f"(((long long)({axis.bound}) + {inner} - 1) / ({inner}))"
        coordinates[0] = Axis(outer.name, outer.ctype, rounded_up)
    return coordinates, declarations, radix.rebuild(axis, digits)


def _exact_extent(bound: str, divisor: tuple[str, ...]) -> str | None:
    """The bound over the divisor when the bound is written as a product holding the
    divisor's factors (`N * C * H * W` over C, H, W: `N`), else None."""
    factors = [f.strip().strip("()").strip() for f in bound.replace("(", " ").replace(")", " ").split("*")]
    if not divisor or any(not re.fullmatch(r"\w+", f) for f in factors):
        return None
    rest = Counter(factors) - Counter(divisor)
    if Counter(factors) - rest != Counter(divisor) or not rest:
        return None
    return " * ".join(sorted(rest.elements(), key=factors.index))


def _flat_value(coordinates: list[Axis]) -> str:
    value = coordinates[0].name
    for c in coordinates[1:]:
        value = f"({value}) * ({c.bound}) + {c.name}"
    return value


def _pointer_offsets(lets: list[Node], common: dict[str, Any]) -> dict[str, str]:
    """{local: offset} for `const float* src = a + b * M * N;` (a a pointer parameter, in
    either order): `src[e]` is a[(offset) + (e)]."""
    found = {}
    pointers = set(common["reads"]) | set(common["writes"])
    for statement in lets:
        declared = _declaration(statement)
        if declared is None or "*" not in text(statement).split("=")[0]:
            continue
        sides = [t.strip() for t in text(declared[2]).split("+", 1)]
        if len(sides) == 2 and sides[0] in pointers and sides[0] in common["params"]:
            found[declared[0]] = sides[1]
        elif len(sides) == 2 and sides[1] in pointers and sides[1] in common["params"]:
            found[declared[0]] = sides[0]
    return found


def _single_write(work: list[Node], common: dict[str, Any],
                  offsets: dict[str, str]) -> tuple[str, str, str] | None:
    """(pointer, index, value) when the work's last statement is `p[index] = value;` and
    it is the only write (the declarations before it write nothing); a write through a
    pointer offset is the parameter's, at the offset plus the index."""
    if not work or work[-1].type != "expression_statement" or len(common["writes"]) != 1:
        return None
    assignment = work[-1].named_children[0] if work[-1].named_children else None
    if assignment is None or assignment.type != "assignment_expression" or \
            text(assignment.child_by_field_name("operator")) != "=":
        return None
    left = assignment.child_by_field_name("left")
    if left.type != _SUBSCRIPT:
        return None
    base = text(left.child_by_field_name("argument"))
    index = text(left.child_by_field_name("indices"))[1:-1].strip()
    if base in offsets:
        index = f"({offsets[base]}) + ({index})"
    elif base != common["writes"][0]:
        return None
    return common["writes"][0], index, text(assignment.child_by_field_name("right"))


def _read_indices(work: list[Node], common: dict[str, Any], offsets: dict[str, str]) -> list[str]:
    """The index of every subscript of a parameter pointer (or of an offset from one) the
    work reads."""
    pointers = set(common["reads"]) | set(common["writes"])
    found = []
    target = work[-1].named_children[0].child_by_field_name("left")
    for node in (n for s in work for n in walk(s)):
        if node.type != _SUBSCRIPT or node == target:
            continue
        base = text(node.child_by_field_name("argument"))
        index = text(node.child_by_field_name("indices"))[1:-1].strip()
        if base in offsets:
            found.append(f"({offsets[base]}) + ({index})")
        elif base in pointers:
            found.append(index)
    return found


def _assigns(work: list[Node], names: set[str]) -> bool:
    for node in (n for s in work for n in walk(s)):
        if node.type in ("assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            if target is not None and text(target) in names:
                return True
    return False

