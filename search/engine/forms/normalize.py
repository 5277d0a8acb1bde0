"""Source passes run before a kernel is lifted: each writes a construct people use as the
plainer one it is, so that every reader of loops, digits and declarations reads one kind
(`normalized` runs them all, in order). Each leaves the source as it is where its
rewrite could change what the kernel computes.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from ..rewrites.syntax import (
    assigned_identifier,
    declared_name,
    named_statements,
    parse,
    strip_parens,
    text,
    walk,
)
from . import strides
from .accumulated import outputs_accumulated_in_locals
from .peeled import peeled_digits_as_divisions
from .reading import _declaration, condition_of

_LOOPS = ("for_statement", "while_statement", "do_statement")


def normalized(source: str) -> str:
    """One declarator a declaration, peeled digits as divisions, counted whiles as fors,
    an output element accumulated in memory as a local (accumulated.py), `if (c)
    continue;` as the test it is."""
    source = accessor_macros_expanded(source)
    counted = counted_whiles_as_fors(peeled_digits_as_divisions(one_declarator_each(source)))
    return skips_as_tests(outputs_accumulated_in_locals(counted))


_ACCESSOR = re.compile(r"\s*[A-Za-z_]\w*\s*\[.*\]\s*")


def accessor_macros_expanded(source: str) -> str:
    """`A_AT(i, j)` with `#define A_AT(i, j) A[(i) * K + (j)]` written as the access it is
    (the #define kept): a macro whose body is a subscript hides a memory access from every
    reader of accesses (which pointers are read, their strides). Other macros are left to
    the readers that expand them in indices (strides.expand_macros)."""
    macros = {m.group(1): ([p.strip() for p in m.group(3).split(",")], m.group(4))
              for m in strides._DEFINE.finditer(source)
              if m.group(2) and _ACCESSOR.fullmatch(m.group(4)) and _balanced(m.group(4))}
    if not macros:
        return source
    lines = source.split("\n")
    for position, line in enumerate(lines):
        if line.lstrip().startswith("#"):
            continue
        for _ in range(8):
            expanded = strides._expand_once(line, macros, bare=frozenset(macros))
            if expanded == line:
                break
            line = expanded
        lines[position] = line
    return "\n".join(lines)


def _balanced(body: str) -> bool:
    """Whether the subscript's brackets close only at the end (`A[i] + B[j]` is no access)."""
    start = body.index("[")
    depth = 0
    for position in range(start, len(body)):
        depth += {"[": 1, "]": -1}.get(body[position], 0)
        if depth == 0:
            return not body[position + 1:].strip()
    return False


def one_declarator_each(source: str) -> str:
    """`int i = idx / N, j = idx % N;` written as two declarations (a loop header's are
    kept): every reader of the index space and the digits takes one name a statement."""
    data = source.encode()
    edits = []
    for node in walk(parse(data).root_node):
        declarators = node.children_by_field_name("declarator") if node.type == "declaration" else []
        if len(declarators) < 2 or node.parent is None or node.parent.type != "compound_statement":
            continue
        head = data[node.start_byte:declarators[0].start_byte].decode()
        split = " ".join(f"{head}{text(d)};" for d in declarators)
        edits.append((node.start_byte, node.end_byte, split))
    for start, end, replacement in sorted(edits, reverse=True):
        data = data[:start] + replacement.encode() + data[end:]
    return data.decode()


def counted_whiles_as_fors(source: str) -> str:
    """`int k = 0; while (k < K) { ...; k++; }` (or `k += stride`, a grid stride that the
    body does not change) written as the for loop it is, when the value k has after the
    loop is never read (nothing reads k before a later `k = ...;` sets it again), k is
    changed nowhere else in the loop, and no `continue` skips its step: every reader of
    loops (rows, contractions, the grid-stride map) then reads one kind. A counter set
    again for a second loop (`k = 0; while (k < K)`, k declared before in the block) is
    read the same way, its loop declaring a k of the same type; where k is still named
    after its loop, the declaration stays, without its start, so what follows still
    compiles. Statements between the start and the loop that neither read k nor change
    what its start reads (`int j = 0; float m = -INFINITY; while (j < N)`) stay where
    they are."""
    for _ in range(64):
        data = source.encode()
        found = _counted_while(parse(data).root_node)
        if found is None:
            return source
        start_statement, loop, (name, kind, start), body, named_later = found
        condition = text(strip_parens(condition_of(loop)))
        inner = "\n".join(text(s) for s in body[:-1])
        replacement = f"for ({kind} {name} = {start}; {condition}; {_step(body, name)}) {{\n{inner}\n}}"
        kept = f"{kind} {name};" if named_later and start_statement.type == "declaration" else ""
        source = (data[:start_statement.start_byte] + kept.encode()
                  + data[start_statement.end_byte:loop.start_byte]
                  + replacement.encode() + data[loop.end_byte:]).decode()
    return source


def _set_again(statement: Node, name: str) -> bool:
    """Whether a statement is `name = value;` with a value that does not read name."""
    expression = statement.named_children[0] if statement.type == "expression_statement" \
        and statement.named_children else None
    if expression is None or expression.type != "assignment_expression" or \
            text(expression.child_by_field_name("operator")) != "=":
        return False
    left, right = expression.child_by_field_name("left"), expression.child_by_field_name("right")
    return left.type == "identifier" and text(left) == name and \
        not any(n.type == "identifier" and text(n) == name for n in walk(right))


def _read_after(name: str, later: list[Node]) -> bool:
    """Whether the value name has when `later` begins is read: a statement names it before
    one at this level sets it again."""
    for statement in later:
        if _set_again(statement, name):
            return False
        if any(n.type == "identifier" and text(n) == name for n in walk(statement)):
            return True
    return False


def _declared_type(name: str, before: list[Node]) -> str | None:
    """The type of name as a declaration among `before` declares it (a plain declaration
    or a for loop's), the last one; None if none does."""
    kind = None
    for statement in before:
        declaration = statement if statement.type == "declaration" else \
            statement.child_by_field_name("initializer") if statement.type == "for_statement" else None
        if declaration is None or declaration.type != "declaration":
            continue
        if any(declared_name(d) == name for d in declaration.children_by_field_name("declarator")):
            kind = text(declaration.child_by_field_name("type"))
    return kind


def _counter(statement: Node, before: list[Node]) -> tuple[str, str, Node] | None:
    """(k, its type, its start) of `T k = start;`, or of `k = start;` with k declared in
    `before`."""
    declared = _declaration(statement)
    if declared is not None:
        return declared
    assignment = statement.named_children[0] if statement.type == "expression_statement" \
        and statement.named_children else None
    if assignment is None or assignment.type != "assignment_expression":
        return None
    name = text(assignment.child_by_field_name("left"))
    kind = _declared_type(name, before) if _set_again(statement, name) else None
    return (name, kind, assignment.child_by_field_name("right")) if kind else None


def _counted_while(root: Node):
    for block in (n for n in walk(root) if n.type == "compound_statement"):
        statements = named_statements(block)
        for position, first in enumerate(statements):
            counter = _counter(first, statements[:position])
            if counter is None:
                continue
            name = counter[0]
            reads = {text(n) for n in walk(counter[2]) if n.type == "identifier"}
            offset = next((i for i, s in enumerate(statements[position + 1:], position + 1)
                           if s.type == "while_statement"), None)
            if offset is None:
                continue
            loop, between = statements[offset], statements[position + 1:offset]
            if any(n.type == "identifier" and text(n) == name or assigned_identifier(n) in reads
                   for s in between for n in walk(s)):
                continue  # the counter read before its loop, or its start changed meanwhile
            body = named_statements(loop.child_by_field_name("body")) \
                if loop.child_by_field_name("body").type == "compound_statement" else []
            condition = strip_parens(condition_of(loop))
            if _step(body, name) is None or condition.type != "binary_expression" or \
                    text(strip_parens(condition.child_by_field_name("left"))) != name:
                continue
            later = statements[offset + 1:]
            inside = [n for s in body[:-1] for n in walk(s)]
            if _read_after(name, later) or \
                    any(assigned_identifier(n) == name or (n.type == "update_expression" and
                        text(n.child_by_field_name("argument")) == name) for n in inside) or \
                    any(n.type == "continue_statement" for n in inside):
                continue
            named_later = any(n.type == "identifier" and text(n) == name for s in later for n in walk(s))
            return first, loop, (name, counter[1], text(counter[2])), body, named_later
    return None


def _step(body: list[Node], name: str) -> str | None:
    """The for loop's update for a while body's last statement: `++k` for k++, k += 1 and
    k = k + 1; `k += s` for a stride s (a grid stride, `blockDim.x * gridDim.x`) that
    nothing in the body changes; else None."""
    if not body:
        return None
    step = text(body[-1]).replace(" ", "").rstrip(";")
    if step in (f"++{name}", f"{name}++", f"{name}+=1", f"{name}={name}+1"):
        return f"++{name}"
    stride = re.fullmatch(rf"{re.escape(name)}\+=(.+)|{re.escape(name)}={re.escape(name)}\+(.+)", step)
    if stride is None:
        return None
    value = stride.group(1) or stride.group(2)
    changed = {assigned_identifier(n) for s in body[:-1] for n in walk(s)} | {name}
    if set(re.findall(r"[A-Za-z_]\w*", value)) & changed:
        return None
    return f"{name} += {value}"


def skips_as_tests(source: str) -> str:
    """`if (c) continue;` among a loop body's statements, written as the test it is: the
    statements after it run under `if (!(c)) { ... }` (a convolution's padding written as
    skips). A `continue` anywhere else is left as it is (and refused as a hazard)."""
    for _ in range(64):
        data = source.encode()
        found = _skip(parse(data).root_node)
        if found is None:
            return source
        skip, body = found
        condition = text(strip_parens(condition_of(skip)))
        rest = data[skip.end_byte:body.end_byte - 1].decode()  # up to the body's closing brace
        replacement = f"if (!({condition})) {{{rest}}}\n"
        source = (data[:skip.start_byte] + replacement.encode() + data[body.end_byte - 1:]).decode()
    return source


def _skip(root: Node) -> tuple[Node, Node] | None:
    """The first `if (c) continue;` that is a statement of a loop's body, and that body."""
    for node in walk(root):
        if node.type != "compound_statement" or node.parent is None or node.parent.type not in _LOOPS:
            continue
        for statement in node.named_children:
            if statement.type != "if_statement" or statement.child_by_field_name("alternative") is not None:
                continue
            consequence = statement.child_by_field_name("consequence")
            compound = consequence.type == "compound_statement"
            inner = named_statements(consequence) if compound else [consequence]
            if len(inner) == 1 and inner[0].type == "continue_statement":
                return statement, node
    return None


def block_constants_as_dims(source: str, launch: dict) -> str:
    """`blockIdx.y * TILE + threadIdx.y` (TILE a number or a #define of one) written with
    `blockDim.y` when the launch's block dimension is that same number, and so is a grid
    stride `TILE * gridDim.y`: the index it computes is the same, and the readers of the
    index space read one kind."""
    block = [str(d).strip() for d in launch.get("block", [])]
    numbers = {m.group(1): m.group(4).strip() for m in strides._DEFINE.finditer(source)
               if not m.group(2) and re.fullmatch(r"\d+", m.group(4).strip())}
    for axis, dim in zip("xyz", block, strict=False):
        if not re.fullmatch(r"\d+", dim):
            continue
        names = [dim, *(name for name, value in numbers.items() if value == dim)]
        spelled = "|".join(re.escape(n) for n in names)
        source = re.sub(rf"\bblockIdx\.{axis}\s*\*\s*(?:{spelled})\b(?!\s*[\w.(])",
                        f"blockIdx.{axis} * blockDim.{axis}", source)
        source = re.sub(rf"\b(?:{spelled})\s*\*\s*blockIdx\.{axis}\b", f"blockDim.{axis} * blockIdx.{axis}",
                        source)
        # a grid stride spelt with the constant (`i += TPB * gridDim.x`)
        source = re.sub(rf"(?<![\w.])(?:{spelled})\s*\*\s*gridDim\.{axis}\b",
                        f"blockDim.{axis} * gridDim.{axis}", source)
        source = re.sub(rf"\bgridDim\.{axis}\s*\*\s*(?:{spelled})\b(?!\s*[\w.(])",
                        f"gridDim.{axis} * blockDim.{axis}", source)
    return source

