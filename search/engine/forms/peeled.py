"""A flat index peeled digit by digit through one local, written as the divisions it is:

    long long rest = t;                         int o1 = (int)(t % O1);
    int o1 = (int)(rest % O1);                  int o0 = (int)((t / O1) % O0);
    rest /= O1;                       ->        int c = (int)((t / O1 / O0) % C);
    int o0 = (int)(rest % O0);                  int n = (int)((t / O1 / O0) / C);
    rest /= O0;
    int c = (int)(rest % C);
    int n = (int)(rest / C);

so that the readers of mixed-radix digits (radix.py, windows.py) see each coordinate as
a function of the index. Done only where it is exactly that: the local is declared with
its value, every change of it is `rest /= D;` (or `rest = rest / D;`) as a statement of
the same block, nothing else writes it or the names its value and divisors read, and
nothing takes its address.
"""

from __future__ import annotations

from tree_sitter import Node

from ..rewrites.syntax import assigned_identifier, named_statements, parse, strip_parens, text, walk
from .reading import _declaration

_INTEGRAL = ("int", "long", "size_t", "unsigned", "int64_t", "int32_t", "uint32_t", "uint64_t")


def peeled_digits_as_divisions(source: str) -> str:
    for _ in range(16):
        data = source.encode()
        edits = _first_peeling(parse(data).root_node)
        if edits is None:
            return source
        for start, end, replacement in sorted(edits, reverse=True):
            data = data[:start] + replacement.encode() + data[end:]
        source = data.decode()
    return source


def _first_peeling(root: Node) -> list[tuple[int, int, str]] | None:
    for block in (n for n in walk(root) if n.type == "compound_statement"):
        statements = named_statements(block)
        for position, first in enumerate(statements):
            edits = _peeling(first, statements[position + 1:])
            if edits is not None:
                return edits
    return None


def _divisor(statement: Node, name: str) -> str | None:
    """D when the statement is `name /= D;` or `name = name / D;`."""
    if statement.type != "expression_statement" or not statement.named_children:
        return None
    expression = statement.named_children[0]
    if expression.type != "assignment_expression" or \
            text(strip_parens(expression.child_by_field_name("left"))) != name:
        return None
    operator = text(expression.child_by_field_name("operator"))
    right = expression.child_by_field_name("right")
    if operator == "/=":
        return text(right)
    value = strip_parens(right)
    if operator == "=" and value.type == "binary_expression" and \
            text(value.child_by_field_name("operator")) == "/" and \
            text(strip_parens(value.child_by_field_name("left"))) == name:
        return text(value.child_by_field_name("right"))
    return None


def _writes(node: Node, names: set[str]) -> bool:
    for n in walk(node):
        if assigned_identifier(n) in names:
            return True
        if n.type == "update_expression" and text(strip_parens(n.child_by_field_name("argument"))) in names:
            return True
        if n.type == "pointer_expression" and text(n).startswith("&") and \
                text(strip_parens(n.child_by_field_name("argument"))) in names:
            return True
    return False


def _names(node: Node) -> set[str]:
    return {text(n) for n in walk(node) if n.type == "identifier"}


def _peeling(first: Node, later: list[Node]) -> list[tuple[int, int, str]] | None:
    declared = _declaration(first)
    if declared is None or not any(word in declared[1] for word in _INTEGRAL):
        return None
    name, value = declared[0], declared[2]
    divisors = {s.id: d for s in later if (d := _divisor(s, name)) is not None}
    if not divisors:
        return None
    read = _names(value) | {n for s in later if s.id in divisors
                             for n in _names(s.named_children[0].child_by_field_name("right"))}
    for statement in later:
        if statement.id in divisors:  # `rest /= D`: D itself writes nothing
            if _writes(statement.named_children[0].child_by_field_name("right"), read | {name}):
                return None
        elif _writes(statement, read | {name}):
            return None
    edits = [(first.start_byte, first.end_byte, "")]
    chain = [f"({text(value)})"]
    for statement in later:
        if statement.id in divisors:
            chain.append(f"({divisors[statement.id]})")
            edits.append((statement.start_byte, statement.end_byte, ""))
            continue
        current = "(" + " / ".join(chain) + ")"
        edits += [(n.start_byte, n.end_byte, current) for n in walk(statement)
                  if n.type == "identifier" and text(n) == name]
    return edits
