"""Reading a thread-per-output kernel over a 2-D index space as a contraction:

    out[row, col] = epilogue(init + sum over k of a(row, k) * b(k, col))

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
from . import rows
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
    k, k_type, bound = rows._head(loop)
    inner = rows._body(loop.child_by_field_name("body"))
    if len(inner) != 1 or (found := rows._accumulation(inner[0])) is None or found[1] != "sum":
        raise ValueError("the loop's body is not one sum into an accumulator")
    acc = found[0]
    declared = {d[0]: d[1] for d in (_declaration(s) for s in pre) if d}
    if declared.get(acc, "").replace("const ", "") != "float":
        raise ValueError(f"the accumulator {acc} is not a float declared before the loop")
    term = _term(inner[0], acc)
    if term.type != "binary_expression" or text(term.child_by_field_name("operator")) != "*":
        raise ValueError(f"{text(term)} is not a product of two factors")
    row, col = space.axes[0].name, space.axes[1].name
    factors = [strip_parens(term.child_by_field_name(side)) for side in ("left", "right")]
    named = [_names(f) for f in factors]
    if row in named[1] and col in named[0]:
        factors, named = factors[::-1], named[::-1]
    if col in named[0] or row in named[1] or k not in named[0] | named[1]:
        raise ValueError(f"{text(term)}: one factor must follow the row and k, the other k and the column")
    locals_ = set(declared) | {declared_name(d) for s in pre for n in walk(s) if n.type == "declaration"
                               for d in n.children_by_field_name("declarator")}
    for factor, names in zip(factors, named, strict=True):
        if names & locals_:
            read = ", ".join(sorted(names & locals_))
            raise ValueError(f"{text(factor)} reads {read}, worked out per output")
    if any(n.type == "identifier" and text(n) == acc for s in pre for n in walk(s)
           if not (n.parent is not None and n.parent.type == "init_declarator")):
        raise ValueError(f"the accumulator {acc} is read before the loop")
    return Form(family=CONTRACTION, body="\n".join(text(s) for s in pre),
                factors=(text(factors[0]), text(factors[1])), reduction=Axis(k, k_type, bound),
                accumulator=acc, epilogue="\n".join(text(s) for s in post),
                **{key: v for key, v in common.items() if key not in ("kinds", "args")})


def _term(update: Node, acc: str) -> Node:
    assignment = update.named_children[0]
    right = strip_parens(assignment.child_by_field_name("right"))
    if text(assignment.child_by_field_name("operator")) == "+=":
        return right
    sides = (right.child_by_field_name("left"), right.child_by_field_name("right"))
    return strip_parens(next(n for n in sides if text(strip_parens(n)) != acc))


def _names(node: Node) -> set[str]:
    return {text(n) for n in walk(node) if n.type == "identifier"}
