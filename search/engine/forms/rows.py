"""Reading a thread-per-row kernel as a row map-reduce: uniform statements and loops
over the row, each loop with its reductions.

A loop is `for (T j = 0; j < bound; ++j | j++ | j += 1)`, or `T j = 0; while (j < bound)
{ ...; ++j; }`, or a perfect nest of them (flattened: GroupNorm's channels x pixels is
one loop over their product). Its iterations must be independent except through
accumulators: a scalar declared before the loop and changed in it by exactly one
top-level statement of a recognised shape (`acc += e`, `acc = acc + e`, `acc =
fmaxf(acc, e)`, `if (e > acc) acc = e`, and the min forms), read nowhere else in the
loop. Every memory write in a loop lands on an index that names a loop variable, so no
two iterations write the same element.
"""

from __future__ import annotations

from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import (
    Kernel,
    assigned_identifier,
    declared_name,
    declared_names,
    strip_parens,
    text,
    walk,
)
from .accumulators import _accumulation, _arg_accumulation, _body, _expression  # noqa: F401
from .reading import INDEX_TYPES, _declaration, condition_of
from .types import ARG_OPS, ROWS, Form, LoopHole, Reduction, Refusal, Uniform


class NotRows(ValueError):
    pass


def lift_rows(kernel: Kernel, space, common: dict[str, Any]) -> Form | Refusal:
    try:
        steps = tuple(_steps(list(space.body)))
    except NotRows as error:
        return Refusal(str(error), family=ROWS)
    if not any(isinstance(s, LoopHole) for s in steps):
        return Refusal("no loop over the row at the top level", family=ROWS)
    return Form(family=ROWS, steps=steps, **{k: v for k, v in common.items() if k not in ('kinds', 'args')})


def _line(node: Node) -> str:
    return f"line {node.start_point.row + 1}"


def _steps(statements: list[Node]):
    declared: dict[str, str] = {}  # top-level scalars so far -> their type
    position = 0
    while position < len(statements):
        statement = statements[position]
        following = statements[position + 1] if position + 1 < len(statements) else None
        counter = _declaration(statement)
        if counter is not None and following is not None and following.type == "while_statement" \
                and _start(counter[2]) is not None and counter[1].replace("const ", "") in INDEX_TYPES:
            yield _loop_while(counter, following, declared, statements[position + 2:])
            position += 2
            continue
        if statement.type == "for_statement":
            yield _loop_for(statement, declared)
        elif statement.type in ("while_statement", "do_statement"):
            raise NotRows(f"{_line(statement)}: a loop that does not count over the row from 0")
        else:
            for declaration in (n for n in walk(statement) if n.type == "declaration"):
                kind = declaration.child_by_field_name("type")
                for declarator in declaration.children_by_field_name("declarator"):
                    declared[declared_name(declarator)] = text(kind) if kind is not None else ""
            writes = any(_memory_write(n) for n in walk(statement))
            if writes and (assigned := _assigned_locals(statement)):
                raise NotRows(f"{_line(statement)}: writes memory and sets {', '.join(sorted(assigned))} "
                              "in one statement")
            yield Uniform(text(statement), writes)
        position += 1


def _is_zero(node: Node) -> bool:
    return text(strip_parens(node)) in ("0", "0L", "0LL", "0u")


_START_NODES = ("identifier", "number_literal", "binary_expression", "parenthesized_expression")


def _start(node: Node) -> str | None:
    """The loop's first value when it is arithmetic on names and numbers (`0`, `1`,
    `lo + 1`), else None. Loops from 1 are how people often write a max or an argmax
    after reading element 0."""
    if _is_zero(node):
        return "0"
    named = all(n.type in _START_NODES for n in walk(node) if n.is_named)
    if named and all(text(n) in ("+", "-", "*", "(", ")") for n in walk(node) if not n.is_named):
        return text(node)
    return None


def _head(loop: Node) -> tuple[str, str, str, str]:
    """(j, its type, bound, start) of `for (T j = start; j < bound; ++j)`."""
    init, update = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
    declared = _declaration(init) if init is not None else None
    condition = condition_of(loop)
    start = _start(declared[2]) if declared is not None else None
    if declared is None or start is None or update is None or condition is None:
        raise NotRows(f"{_line(loop)}: the loop does not count from a start with a declared counter")
    name = declared[0]
    if name in {text(n) for n in walk(declared[2]) if n.type == "identifier"}:
        raise NotRows(f"{_line(loop)}: the loop's start reads its own counter")
    if _counts_down(loop):
        start, bound = _ascending(condition, name, declared[1], loop)
        return name, declared[1], f"({text(declared[2])}) + 1", start
    if text(update).replace(" ", "") not in (f"++{name}", f"{name}++", f"{name}+=1", f"{name}={name}+1"):
        raise NotRows(f"{_line(loop)}: the loop steps by {text(update)}, not by one")
    return name, declared[1], _bound(condition, name, loop), start


def _counts_down(loop: Node) -> bool:
    """Whether a for loop steps its declared counter down by one (`--j`, `j--`, `j -= 1`)."""
    init, update = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
    declared = _declaration(init) if init is not None else None
    if declared is None or update is None:
        return False
    name = declared[0]
    return text(update).replace(" ", "") in (f"--{name}", f"{name}--", f"{name}-=1", f"{name}={name}-1")


def _ascending(condition: Node, name: str, kind: str, loop: Node) -> tuple[str, str]:
    """(first, last) of the counter's values, for `j >= lo` (lo) or `j > lo` (lo + 1):
    a loop from hi down to them visits what a loop from them up to hi visits, and a row's
    reductions do not depend on the order (an arg-reduction's tie rule does: _loop flips
    it). An unsigned counter tested `>=` may never end (`i >= 0`): refused."""
    condition = strip_parens(condition)
    if condition.type != "binary_expression":
        raise NotRows(f"{_line(loop)}: the loop counts down, but its condition is not `{name} >= bound`")
    operator = text(condition.child_by_field_name("operator"))
    left, right = (strip_parens(condition.child_by_field_name(side)) for side in ("left", "right"))
    if text(right) == name and operator in ("<=", "<"):
        operator, left, right = {"<=": ">=", "<": ">"}[operator], right, left
    if operator not in (">=", ">") or text(left) != name or _start(right) is None:
        raise NotRows(f"{_line(loop)}: the loop counts down, but its condition is not `{name} >= bound`")
    if any(n.type == "identifier" and text(n) == name for n in walk(right)):
        raise NotRows(f"{_line(loop)}: the loop's bound depends on its counter")
    if operator == ">=" and kind.replace("const ", "").startswith(("unsigned", "size_t", "uint")):
        raise NotRows(f"{_line(loop)}: an unsigned counter counting down while {text(condition)}")
    low = text(right)
    return (_start(right) or low, low) if operator == ">=" else (f"({low}) + 1", low)


def _bound(condition: Node, name: str, loop: Node) -> str:
    condition = strip_parens(condition)
    left, right = condition.child_by_field_name("left"), condition.child_by_field_name("right")
    binary = condition.type == "binary_expression"
    operator = text(condition.child_by_field_name("operator")) if binary else ""
    if operator not in ("<", "<=") or text(strip_parens(left)) != name:
        raise NotRows(f"{_line(loop)}: the loop's condition is not `{name} < bound`")
    if any(n.type == "identifier" and text(n) == name for n in walk(right)):
        raise NotRows(f"{_line(loop)}: the loop's bound depends on its counter")
    return text(right) if operator == "<" else f"({text(right)}) + 1"  # j <= b: j < b + 1


def _loop_for(loop: Node, declared: dict[str, str]) -> LoopHole:
    variables, starts = [], []
    body = [loop]
    while len(body) == 1 and body[0].type == "for_statement":
        name, kind, bound, start = _head(body[0])
        variables.append((name, kind, bound))
        starts.append(start)
        body = _body(body[0].child_by_field_name("body"))
    if len(starts) > 1 and any(s != "0" for s in starts):
        raise NotRows(f"{_line(loop)}: a nest of loops that do not all count from 0")
    return _loop(variables, body, declared, loop, starts[0], down=len(variables) == 1 and _counts_down(loop))


_TIES_FLIPPED = {">": ">=", ">=": ">", "<": "<=", "<=": "<"}


def _loop_while(counter: tuple[str, str, Node], loop: Node, declared: dict[str, str],
                after: list[Node]) -> LoopHole:
    name, kind, first = counter
    body = _body(loop.child_by_field_name("body"))
    step = text(body[-1]).replace(" ", "").rstrip(";") if body else ""
    if step not in (f"++{name}", f"{name}++", f"{name}+=1", f"{name}={name}+1"):
        raise NotRows(f"{_line(loop)}: the while loop does not end by stepping {name} by one")
    if any(n.type == "identifier" and text(n) == name for s in after for n in walk(s)):
        raise NotRows(f"{_line(loop)}: {name} is read after its loop")
    if any(assigned_identifier(n) == name for s in body[:-1] for n in walk(s)):
        raise NotRows(f"{_line(loop)}: {name} changes inside its loop")
    return _loop([(name, kind, _bound(condition_of(loop), name, loop))], body[:-1], declared, loop,
                 _start(first) or "0")


def _loop(variables: list[tuple[str, str, str]], body: list[Node], declared: dict[str, str],
          loop: Node, start: str = "0", down: bool = False) -> LoopHole:
    """The loop's hole; `down`: it counts down, so an arg-reduction's test keeps its tie
    rule counted up with the strictness flipped (`>=` counted down keeps the first of
    equal values, as `>` counted up does), in the body and in its Reduction alike."""
    from .types import Axis

    names = {name for name, _, _ in variables}
    for _, _, bound in variables:
        if any(n in bound.replace("(", " ").replace(")", " ").split() for n in names):
            raise NotRows(f"{_line(loop)}: an inner loop's bound depends on an outer counter")
    if any(n.type in ("for_statement", "while_statement", "do_statement") for s in body for n in walk(s)):
        raise NotRows(f"{_line(loop)}: a loop inside the row loop that is not a perfect nest")
    inner = set().union(*(declared_names(s) for s in body)) if body else set()
    reductions, updates, owned, flipped = [], set(), {}, set()
    for statement in body:
        found = _accumulation(statement)
        arg = _arg_accumulation(statement, names) if len(variables) == 1 else None
        if arg is not None and {arg[0], arg[1]} <= set(declared) and not {arg[0], arg[1]} & inner:
            value, index, compare = arg
            kinds = declared[value].replace("const ", ""), declared[index].replace("const ", "")
            if kinds[0] != "float" or kinds[1] not in ("int", "long", "long long"):
                raise NotRows(f"{_line(statement)}: an arg-reduction of {kinds[0]} into a {kinds[1]} index "
                              "is not read here")
            compare = _TIES_FLIPPED[compare] if down else compare
            reductions.append(Reduction(value, ARG_OPS[compare][0], "float", index, kinds[1], compare))
            if down:
                flipped.add(statement.id)
            updates.add(statement.id)
            owned[statement.id] = {value, index}
        elif found is not None and found[0] in declared and found[0] not in inner:
            reductions.append(_reduction(*found, declared, statement))
            updates.add(statement.id)
            owned[statement.id] = {found[0]}
        elif (guarded := _guarded_accumulations(statement)) and \
                all(name in declared and name not in inner for name, _ in guarded):
            # `if (mask[j] > 0.5f) { s += x[j]; n += 1.0f; }`: an element the test skips adds
            # the identity, so the reductions stay reductions
            reductions += [_reduction(name, op, declared, statement) for name, op in guarded]
            updates.add(statement.id)
            owned[statement.id] = {name for name, _ in guarded}
    taken = [n for r in reductions for n in (r.name, r.index) if n]
    if len(taken) != len(set(taken)):
        raise NotRows(f"{_line(loop)}: an accumulator is updated twice in one loop")
    names_reduced = set(taken)
    for statement in body:
        if statement.id in updates:
            own = owned[statement.id]
            others = {text(n) for n in walk(statement) if n.type == "identifier"} & (names_reduced - own)
            if others:
                raise NotRows(f"{_line(statement)}: the update of {', '.join(sorted(own))} reads the "
                              f"accumulator {', '.join(sorted(others))} of the same loop")
    _same_element(body, loop)
    for statement in body:
        for node in walk(statement):
            changed = assigned_identifier(node)
            if changed is not None and changed not in inner and statement.id not in updates:
                raise NotRows(f"{_line(node)}: {changed} carries a value from one iteration to the next")
            if statement.id not in updates and node.type == "identifier" and text(node) in names_reduced:
                raise NotRows(f"{_line(node)}: the accumulator {text(node)} is read inside its loop")
            if _memory_write(node) and not _names_any(node, names):
                raise NotRows(f"{_line(node)}: every iteration writes the same element")
    if start != "0" and any(n in start.replace("(", " ").replace(")", " ").split() for n in names):
        raise NotRows(f"{_line(loop)}: the loop's start depends on a counter")
    written = "\n".join(_tie_flipped(s) if s.id in flipped else text(s) for s in body)
    return LoopHole(tuple(Axis(n, k, b) for n, k, b in variables), written,
                    tuple(reductions), any(_memory_write(n) for s in body for n in walk(s)), start)


def _tie_flipped(statement: Node) -> str:
    """`if (v >= best) {...}` as `if (v > best) {...}` (and the other three tests so)."""
    operator = strip_parens(condition_of(statement)).child_by_field_name("operator")
    source = statement.text
    start, end = operator.start_byte - statement.start_byte, operator.end_byte - statement.start_byte
    flipped = _TIES_FLIPPED[source[start:end].decode()]
    return (source[:start] + flipped.encode() + source[end:]).decode()


def _reduction(name: str, op: str, declared: dict[str, str], statement: Node) -> Reduction:
    kind = declared[name].replace("const ", "")
    if op != "sum" and kind != "float" or kind not in ("float", "double", "int"):
        raise NotRows(f"{_line(statement)}: a {op} over {kind} is not a reduction read here")
    return Reduction(name, op, kind)


def _guarded_accumulations(statement: Node) -> list[tuple[str, str]] | None:
    """(acc, op) of each update in `if (c) { acc += e; ... }` (no else) when the block
    holds nothing but accumulator updates and the test reads none of them."""
    if statement.type != "if_statement" or statement.child_by_field_name("alternative") is not None:
        return None
    inner = _body(statement.child_by_field_name("consequence"))
    found = [_accumulation(s) for s in inner]
    if not inner or any(f is None for f in found):
        return None
    names = {name for name, _ in found}
    condition = condition_of(statement)
    if len(names) != len(found) or condition is None or \
            any(n.type == "identifier" and text(n) in names for n in walk(condition)):
        return None
    return found


def _same_element(body: list[Node], loop: Node) -> None:
    """A pointer written in the loop is read in it only at the element it writes, so no
    iteration reads what another wrote (a prefix sum would)."""
    written: dict[str, set[str]] = {}
    for node in (n for s in body for n in walk(s)):
        if _memory_write(node):
            target = strip_parens(node.child_by_field_name("left") or node.child_by_field_name("argument"))
            if target.type != "subscript_expression":
                raise NotRows(f"{_line(node)}: a write that is not p[index]")
            base = text(target.child_by_field_name("argument"))
            written.setdefault(base, set()).add(_index_text(target))
    for node in (n for s in body for n in walk(s)):
        if node.type == "subscript_expression":
            base = text(node.child_by_field_name("argument"))
            if base in written and written[base] != {_index_text(node)}:
                raise NotRows(f"{_line(node)}: {base} is written and read at different elements "
                              "in one loop; iterations would depend on each other")


def _index_text(subscript: Node) -> str:
    return text(subscript.child_by_field_name("indices")).replace(" ", "")


def _memory_write(node: Node) -> bool:
    if node.type == "assignment_expression":
        target = strip_parens(node.child_by_field_name("left"))
    elif node.type == "update_expression":
        target = strip_parens(node.child_by_field_name("argument"))
    else:
        return False
    return target.type in ("subscript_expression", "pointer_expression", "field_expression")


def _names_any(write: Node, names: set[str]) -> bool:
    target = strip_parens(write.child_by_field_name("left") or write.child_by_field_name("argument"))
    return any(n.type == "identifier" and text(n) in names for n in walk(target))


def _assigned_locals(statement: Node) -> set[str]:
    return {name for n in walk(statement) if (name := assigned_identifier(n))} | {
        declared_name(d) for n in walk(statement) if n.type == "declaration"
        for d in n.children_by_field_name("declarator")}


def assigned_subscript(node: Node) -> str | None:
    """The pointer a statement (or assignment) writes as p[...], else None."""
    if node.type == "expression_statement":
        node = _expression(node) or node
    if node.type != "assignment_expression":
        return None
    target = strip_parens(node.child_by_field_name("left"))
    if target.type != "subscript_expression":
        return None
    return text(target.child_by_field_name("argument"))


def pointer_use(kernel: Kernel, body) -> tuple[set[str], set[str]]:
    """(pointer parameters read, written) through subscripts, following pointer locals
    declared from one parameter (`const float* in = x + row * N;`)."""
    params = {p.name for p in kernel.pointer_params()}
    alias = {name: name for name in params}
    for declaration in (n for s in body for n in walk(s) if n.type == "declaration"):
        for declarator in declaration.children_by_field_name("declarator"):
            if declarator.type == "init_declarator" and \
                    declarator.child_by_field_name("declarator").type == "pointer_declarator":
                value = declarator.child_by_field_name("value")
                sources = {text(n) for n in walk(value) if n.type == "identifier" and text(n) in alias}
                if len(sources) == 1:
                    alias[declared_name(declarator)] = alias[sources.pop()]
    reads, writes = set(), set()
    for node in (n for s in body for n in walk(s)):
        if node.type != "subscript_expression":
            continue
        base = text(node.child_by_field_name("argument"))
        if base not in alias:
            continue
        parent = node.parent
        written = parent is not None and (
            (parent.type == "assignment_expression" and parent.child_by_field_name("left") == node)
            or parent.type == "update_expression")
        (writes if written else reads).add(alias[base])
        if written and (parent.type == "update_expression" or
                        text(parent.child_by_field_name("operator")) != "="):
            reads.add(alias[base])  # y[i] += e and y[i]++ read y[i] first
    return reads, writes
