"""Accumulator updates a row loop may hold, read from their statements:

    acc += e;   acc = acc + e;   acc *= e;   acc = acc * e;
    acc = fmaxf(acc, e);   if (e > acc) acc = e;                                   (reductions)
    if (e > best) { best = e; arg = j; }                                          (arg-reductions)

Anything else that carries a value from one iteration to the next is not a reduction
(rows.py refuses the lift then).
"""

from __future__ import annotations

from tree_sitter import Node

from ..rewrites.syntax import assigned_identifier, named_statements, strip_parens, text, walk
from .reading import condition_of

_EXTREMA = {"fmaxf": "max", "fminf": "min", "max": "max", "min": "min"}
_COMPOUND = {"+=": "sum", "*=": "prod"}
_OPERATORS = {"+": "sum", "*": "prod"}


def _body(node: Node | None) -> list[Node]:
    if node is None:
        return []
    return named_statements(node) if node.type == "compound_statement" else [node]


def _expression(statement: Node) -> Node | None:
    if statement.type != "expression_statement" or not statement.named_children:
        return None
    return statement.named_children[0]


_FLIPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">="}


def _arg_accumulation(statement: Node, counters: set[str]) -> tuple[str, str, str] | None:
    """(value, index, compare) for `if (e > best) { best = e; arg = j; }` (either order of
    the two assignments, the test either way round, >, >=, < or <=), j the loop's counter."""
    if statement.type != "if_statement" or statement.child_by_field_name("alternative") is not None:
        return None
    inner = _body(statement.child_by_field_name("consequence"))
    condition = strip_parens(condition_of(statement))
    assignments = [_expression(s) for s in inner]
    if len(inner) != 2 or condition.type != "binary_expression" or any(
            a is None or a.type != "assignment_expression" or text(a.child_by_field_name("operator")) != "="
            for a in assignments):
        return None
    targets = {assigned_identifier(a): text(strip_parens(a.child_by_field_name("right")))
               for a in assignments}
    index = next((t for t, v in targets.items() if v in counters), None)
    value = next((t for t in targets if t != index), None)
    if index is None or value is None:
        return None
    compare = text(condition.child_by_field_name("operator"))
    left = text(strip_parens(condition.child_by_field_name("left")))
    right = text(strip_parens(condition.child_by_field_name("right")))
    if (left, right) == (value, targets[value]) and compare in _FLIPPED:
        compare = _FLIPPED[compare]
    elif (left, right) != (targets[value], value) or compare not in _FLIPPED:
        return None
    element = statement.child_by_field_name("condition")
    if any(n.type == "identifier" and text(n) in (value, index)
           for a in assignments for n in walk(a.child_by_field_name("right"))) or \
            sum(1 for n in walk(element) if n.type == "identifier" and text(n) in (value, index)) != 1:
        return None
    return value, index, compare


def _accumulation(statement: Node) -> tuple[str, str] | None:
    """(acc, op) when the statement is a recognised accumulator update."""
    if statement.type == "if_statement" and statement.child_by_field_name("alternative") is None:
        inner = _body(statement.child_by_field_name("consequence"))
        condition = strip_parens(condition_of(statement))
        if len(inner) != 1 or condition.type != "binary_expression":
            return None
        target = assigned_identifier(_expression(inner[0])) if _expression(inner[0]) else None
        assignment = _expression(inner[0])
        if target is None or text(assignment.child_by_field_name("operator")) != "=":
            return None
        value = text(strip_parens(assignment.child_by_field_name("right")))
        op = text(condition.child_by_field_name("operator"))
        left = text(strip_parens(condition.child_by_field_name("left")))
        right = text(strip_parens(condition.child_by_field_name("right")))
        if any(n.type == "identifier" and text(n) == target
               for n in walk(assignment.child_by_field_name("right"))):
            return None
        if (left, right) == (value, target) and op in (">", "<"):
            return target, "max" if op == ">" else "min"
        if (left, right) == (target, value) and op in ("<", ">"):
            return target, "max" if op == "<" else "min"
        return None
    assignment = _expression(statement)
    target = assigned_identifier(assignment) if assignment is not None else None
    if target is None or assignment.type != "assignment_expression":
        return None
    op = text(assignment.child_by_field_name("operator"))
    right = strip_parens(assignment.child_by_field_name("right"))
    mentions = sum(1 for n in walk(right) if n.type == "identifier" and text(n) == target)
    if op in _COMPOUND and mentions == 0:
        return target, _COMPOUND[op]
    if op != "=":
        return None
    if right.type == "binary_expression" and text(right.child_by_field_name("operator")) in _OPERATORS:
        sides = [text(strip_parens(right.child_by_field_name(s))) for s in ("left", "right")]
        if target in sides and mentions == 1:
            return target, _OPERATORS[text(right.child_by_field_name("operator"))]
    if right.type == "call_expression":
        function = text(right.child_by_field_name("function"))
        arguments = [text(strip_parens(a)) for a in right.child_by_field_name("arguments").named_children]
        if function in _EXTREMA and len(arguments) == 2 and target in arguments and mentions == 1:
            return target, _EXTREMA[function]
    return None
