"""A source pass run before a kernel is lifted (normalize.py runs it): an output element
accumulated in memory inside a loop, written as the local accumulator it stands for.

    C[row * N + col] = 0.0f;                          float optiml_acc0 = 0.0f;
    for (int k = 0; k < K; k++)               ->      for (int k = 0; k < K; k++)
        C[row * N + col] += A[...] * B[...];              optiml_acc0 += A[...] * B[...];
                                                      C[row * N + col] = optiml_acc0;

This is how many people write a matrix product, a matrix-vector product or a row sum, and
it computes the same values: the element's index does not change inside the loop, every
access to that pointer inside the loop is that element, and the gate passes distinct
buffers (no other pointer reaches it). Without an initial write just before the loop the
accumulator starts from the element's value in memory. The rewrite applies only where
the loop writes the element (a read-only operand at a fixed index stays as it is), and
only to the element types an accumulator can be (float, double, int).
"""

from __future__ import annotations

import re

from tree_sitter import Node

from ..rewrites.syntax import (
    assigned_identifier,
    declared_names,
    named_statements,
    parse,
    strip_parens,
    text,
    walk,
)

_TYPES = ("float", "double", "int")
_EXITS = ("return_statement", "break_statement", "goto_statement")


def outputs_accumulated_in_locals(source: str) -> str:
    """The source with each such loop's element kept in a local (see the module's doc)."""
    for number in range(16):
        data = source.encode()
        found = _accumulated(parse(data).root_node, source)
        if found is None:
            return source
        source = _rewritten(data, found, f"optiml_acc{number}")
    return source


def _accumulated(root: Node, source: str):
    """(the initial write or None, the loop, the pointer, the index, the element type) of
    the first loop that accumulates into one element, else None."""
    for block in (n for n in walk(root) if n.type == "compound_statement"):
        statements = named_statements(block)
        for position, loop in enumerate(statements):
            if loop.type != "for_statement" or any(n.type in _EXITS for n in walk(loop)):
                continue  # a loop left early would skip the store after it
            for pointer, index in _written_elements(loop):
                kind = _element_type(source, pointer)
                if kind is None or not _fixed_in(loop, index):
                    continue
                before = statements[position - 1] if position else None
                initial = before if before is not None and _writes_element(before, pointer, index) else None
                return initial, loop, pointer, index, kind
    return None


def _written_elements(loop: Node) -> list[tuple[str, str]]:
    """(pointer, index) of each pointer the loop writes, when every access to it inside
    the loop is that one element and at least one write combines with its old value."""
    accesses: dict[str, set[str]] = {}
    combined: set[str] = set()
    for node in walk(loop):
        if node.type == "subscript_expression":
            pointer = text(node.child_by_field_name("argument"))
            accesses.setdefault(pointer, set()).add(_compact(text(node.child_by_field_name("indices"))[1:-1]))
        if node.type == "assignment_expression":
            target = strip_parens(node.child_by_field_name("left"))
            operator = text(node.child_by_field_name("operator"))
            right = _compact(text(node.child_by_field_name("right")))
            if target.type == "subscript_expression" and (
                    operator in ("+=", "*=") or (operator == "=" and _compact(text(target)) in right)):
                combined.add(text(target.child_by_field_name("argument")))
    return [(pointer, next(iter(indices))) for pointer, indices in accesses.items()
            if pointer in combined and len(indices) == 1]


def _fixed_in(loop: Node, index: str) -> bool:
    """Whether no name of the index is declared or changed inside the loop (its counters
    included): the element is the same at every iteration."""
    if "[" in index or re.search(r"[A-Za-z_]\w*\s*\(", index):
        return False  # an element chosen by memory or by a call: not provably the same one
    changed: set[str] = set()
    for node in walk(loop):
        if node.type == "declaration":
            changed |= declared_names(node)
        name = assigned_identifier(node)
        if name:
            changed.add(name)
        if node.type == "update_expression":
            changed.add(text(node.child_by_field_name("argument")))
    return not (set(re.findall(r"[A-Za-z_]\w*", index)) & changed)


def _writes_element(statement: Node, pointer: str, index: str) -> bool:
    """`pointer[index] = value;` whose value does not read the pointer."""
    if statement.type != "expression_statement" or not statement.named_children:
        return False
    assignment = statement.named_children[0]
    if assignment.type != "assignment_expression" or text(assignment.child_by_field_name("operator")) != "=":
        return False
    target = strip_parens(assignment.child_by_field_name("left"))
    return target.type == "subscript_expression" and text(target.child_by_field_name("argument")) == pointer \
        and _compact(text(target.child_by_field_name("indices"))[1:-1]) == index \
        and not any(n.type == "identifier" and text(n) == pointer
                    for n in walk(assignment.child_by_field_name("right")))


def _rewritten(data: bytes, found, name: str) -> str:
    initial, loop, pointer, index, kind = found
    element = re.compile(rf"\b{re.escape(pointer)}\s*\[\s*{_spaced(index)}\s*\]")
    body = element.sub(name, data[loop.start_byte:loop.end_byte].decode())
    if initial is not None:
        value = text(strip_parens(initial.named_children[0].child_by_field_name("right")))
        start, first = initial.start_byte, f"{kind} {name} = {value};\n"
    else:
        start, first = loop.start_byte, f"{kind} {name} = {pointer}[{index}];\n"
    after = f"\n{pointer}[{index}] = {name};"
    return (data[:start].decode() + first + body + after + data[loop.end_byte:].decode())


def _compact(expression: str) -> str:
    return re.sub(r"\s+", "", expression)


def _spaced(compact: str) -> str:
    """A pattern matching the compact index with any spacing between its characters."""
    return r"\s*".join(re.escape(character) for character in compact)


def _element_type(source: str, pointer: str) -> str | None:
    """The pointer parameter's element type where an accumulator can be of it, else None
    (a local pointer, or another type)."""
    from .transposes import element_type

    kind = element_type(source, pointer)
    return kind if kind in _TYPES else None
