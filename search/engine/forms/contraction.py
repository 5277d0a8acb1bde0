"""Reading a thread-per-output kernel as a (batched) contraction:

    out[batch..., row, col] = epilogue(init + sum over k of a(batch..., row, k) * b(batch..., k, col))

The output's coordinates are the index space's axes (a 2-D grid, a grid plane for the
batch), or the digits a flat index is read as (`p = idx % HW; k = (idx / HW) % K; ...`,
radix.py). The row is the fastest coordinate only the first factor reads, the column the
fastest only the second reads; every other coordinate is a batch coordinate.

The work of one output must be: statements before the loop (the accumulator's
declaration with its initial value, and anything else that writes no memory), one loop
`for (T k = 0; k < K; ++k)` whose only statement adds one product to the accumulator,
then the epilogue (which may write memory). One factor may name the row index and k but
not the column index, the other k and the column index but not the row index, and
neither may read a local of the output's own work: a tile of each can then be loaded
once for many outputs. Anything else is refused with the reason.
"""

from __future__ import annotations

from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import Kernel, declared_name, strip_parens, text, walk
from . import radix, rows
from .accumulators import _accumulation, _body
from .reading import _declaration
from .types import CONTRACTION, Axis, Form, Refusal


def lift_contraction(kernel: Kernel, space, common: dict[str, Any]) -> Form | Refusal:
    try:
        return _lift(kernel, space, common)
    except ValueError as error:
        return Refusal(str(error), family=CONTRACTION)


def _lift(kernel: Kernel, space, common: dict[str, Any]) -> Form:
    body = list(space.body)
    loops = [i for i, s in enumerate(body) if s.type in ("for_statement", "while_statement", "do_statement")]
    if len(loops) != 1 or body[loops[0]].type != "for_statement":
        raise ValueError("not one counted loop over the reduction index")
    pre, loop, post = body[:loops[0]], body[loops[0]], body[loops[0] + 1:]
    if any(rows._memory_write(n) for s in pre for n in walk(s)):
        raise ValueError(f"line {pre[0].start_point.row + 1}: writes memory before the reduction loop")
    k, k_type, bound, start = rows._head(loop)
    if start != "0":
        raise ValueError(f"the reduction loop starts at {start}, not 0")
    inner = _body(loop.child_by_field_name("body"))
    if len(inner) != 1 or (found := _accumulation(inner[0])) is None or found[1] != "sum":
        raise ValueError("the loop's body is not one sum into an accumulator")
    acc = found[0]
    declared = {d[0]: d[1] for d in (_declaration(s) for s in pre) if d}
    if declared.get(acc, "").replace("const ", "") != "float":
        raise ValueError(f"the accumulator {acc} is not a float declared before the loop")
    term = _term(inner[0], acc)
    if term.type != "binary_expression" or text(term.child_by_field_name("operator")) != "*":
        raise ValueError(f"{text(term)} is not a product of two factors")
    coords, rebuilt, flat = _coordinates(space, pre)
    factors = [strip_parens(term.child_by_field_name(side)) for side in ("left", "right")]
    named = [_names(f) for f in factors]
    locals_ = set(declared) | {declared_name(d) for s in pre for n in walk(s) if n.type == "declaration"
                               for d in n.children_by_field_name("declarator")}
    coordinate_names = [c.name for c in coords]
    for factor, names in zip(factors, named, strict=True):
        if names & flat:
            raise ValueError(f"{text(factor)} reads the flat index {', '.join(sorted(names & flat))}, "
                             "not its coordinates")
        if names & (locals_ - set(coordinate_names)):
            read = ", ".join(sorted(names & (locals_ - set(coordinate_names))))
            raise ValueError(f"{text(factor)} reads {read}, worked out per output")
    if _names(loop.child_by_field_name("condition")) & (locals_ | set(coordinate_names) | flat) - {k}:
        raise ValueError(f"the loop's bound {bound} is worked out per output")
    own = [{c for c in coordinate_names if c in names} for names in named]
    first_only, second_only = own[0] - own[1], own[1] - own[0]
    if not first_only or not second_only or k not in named[0] | named[1]:
        # one factor must follow the rows of the output, the other its columns
        raise ValueError(f"{text(term)}: one factor must follow k and an output coordinate the other "
                         "does not read, and the other factor another such coordinate")
    # The fastest-varying coordinate each factor alone reads tiles it; the rest are batch.
    row = [c for c in coords if c.name in first_only][-1]
    col = [c for c in coords if c.name in second_only][-1]
    if coordinate_names.index(row.name) > coordinate_names.index(col.name):
        row, col, factors = col, row, factors[::-1]
    batch = tuple(c for c in coords if c not in (row, col))
    if any(n.type == "identifier" and text(n) == acc for s in pre for n in walk(s)
           if not (n.parent is not None and n.parent.type == "init_declarator")):
        raise ValueError(f"the accumulator {acc} is read before the loop")
    return Form(family=CONTRACTION, body="\n".join(text(s) for s in pre),
                factors=(text(factors[0]), text(factors[1])), reduction=Axis(k, k_type, bound),
                accumulator=acc, epilogue="\n".join(text(s) for s in post),
                coordinates=(*batch, row, col), rebuild=rebuilt, covers=_covers(space, pre),
                **{key: v for key, v in common.items() if key not in ("kinds", "args")})


def _coordinates(space, pre) -> tuple[list[Axis], str, set[str]]:
    """The output's coordinates (slowest first): each axis of the space as it is, or the
    digits its work reads it as (radix.py); the statements that rebuild decomposed axes
    from their digits; and the names of the decomposed (flat) axes."""
    coords: list[Axis] = []
    rebuilt, flat = [], set()
    for axis in space.axes:
        found = radix.digits(pre, axis.name)
        if found:
            coords += radix.coordinates(axis, found)
            rebuilt.append(radix.rebuild(axis, found))
            flat.add(axis.name)
        else:
            coords.append(axis)
    return coords, "\n".join(rebuilt), flat


def _covers(space, pre) -> tuple[tuple[str, str], ...]:
    """(bound, divisor) pairs: a decomposed axis's bound must be a multiple of the product
    of its inner extents, or the outermost digit's extent would drop outputs."""
    pairs = []
    for axis in space.axes:
        found = radix.digits(pre, axis.name)
        pair = radix.divisible(axis, found) if found else None
        if pair:
            pairs.append(pair)
    return tuple(pairs)


def _term(update: Node, acc: str) -> Node:
    assignment = update.named_children[0]
    right = strip_parens(assignment.child_by_field_name("right"))
    if text(assignment.child_by_field_name("operator")) == "+=":
        return right
    sides = (right.child_by_field_name("left"), right.child_by_field_name("right"))
    return strip_parens(next(n for n in sides if text(strip_parens(n)) != acc))


def _names(node: Node) -> set[str]:
    return {text(n) for n in walk(node) if n.type == "identifier"}
