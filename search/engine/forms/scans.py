"""Reading a thread-per-row kernel as a scan: one loop over the row whose running value
is read inside the loop (a prefix sum, a cumulative product or maximum).

    float s = 0.0f;                               // the running value, before the loop
    for (int j = 0; j < N; ++j) {                 // or from N - 1 down to 0 (a reverse scan)
        s += x[row * N + j];                      // its one update: the term combined in
        y[row * N + j] = s;                       // read after the update: inclusive,
    }                                             // before it: exclusive

A row map-reduce (rows.py) refuses such a loop: its accumulator is read inside it, so
the iterations depend on each other. Here they depend on each other through that one
value only, and its operator (sum, product, max, min) is associative, so a block can
compute every element's running value at once (a block-wide scan of the terms) and run
the loop's own body for each element with the running value it would have had.

The newcomer's form that keeps the running value in memory is read too:

    y[row * N] = x[row * N];
    for (int j = 1; j < N; ++j) y[row * N + j] = y[row * N + j - 1] + x[row * N + j];

is the loop above with the running value first read from the element written before
the loop (`recurrence`).

What the scan's term needs is computed again for each element (`body`: the statements
before the update that neither write memory nor read the running value). Everything
else that carries a value between iterations, writes an element no iteration owns, or
makes the term depend on the running value refuses the lift.
"""

from __future__ import annotations

import re
from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import (
    Kernel,
    assigned_identifier,
    declared_names,
    named_statements,
    parse,
    strip_parens,
    text,
    walk,
)
from . import rows, strides
from .accumulators import _accumulation, _body, _expression
from .reading import INDEX_TYPES, _declaration, condition_of
from .types import IDENTITIES, SCAN, Axis, Form, LoopHole, Reduction, Refusal, Uniform

_OPS = ("sum", "prod", "max", "min")


class NotScan(ValueError):
    pass


def lift_scan(kernel: Kernel, space, common: dict[str, Any]) -> Form | Refusal:
    """The scan form of a row kernel, or why it is not one."""
    if len(space.axes) != 1:
        return Refusal("a scan is read from a thread per row on a one-axis space", family=SCAN)
    statements = list(space.body)
    try:
        statements = _recurrence(statements, common)
        return _scan(statements, common)
    except NotScan as error:
        return Refusal(str(error), family=SCAN)


def _line(node: Node) -> str:
    return f"line {node.start_point.row + 1}"


def _scan(statements: list[Node], common: dict[str, Any]) -> Form:
    loops = [s for s in statements if s.type in ("for_statement", "while_statement", "do_statement")]
    if len(loops) != 1 or loops[0].type != "for_statement":
        raise NotScan("a scan is one for loop over the row")
    loop = loops[0]
    declared: dict[str, str] = {}
    steps: list[Uniform | LoopHole] = []
    for statement in statements:
        if statement is loop:
            continue
        writes = any(rows._memory_write(n) for n in walk(statement))
        if writes and (assigned := rows._assigned_locals(statement)):
            raise NotScan(f"{_line(statement)}: writes memory and sets {', '.join(sorted(assigned))} "
                          "in one statement")
        if statement.start_byte < loop.start_byte:
            for declaration in (n for n in walk(statement) if n.type == "declaration"):
                kind = declaration.child_by_field_name("type")
                for name in declared_names(declaration):
                    declared[name] = text(kind).replace("const ", "") if kind is not None else ""
    variable, start, reverse = _head(loop)
    body = _body(loop.child_by_field_name("body"))
    scanned, update, term = _the_update(body, declared, variable)
    prelude_of_term = _term_prelude(body, update, scanned, term)
    _iterations_independent(body, update, scanned, variable, loop)
    hole = LoopHole((variable,), "\n".join(text(s) for s in body), (scanned,),
                    any(rows._memory_write(n) for s in body for n in walk(s)), start)
    for statement in statements:
        if statement is loop:
            steps.append(hole)
        else:
            steps.append(Uniform(text(statement), any(rows._memory_write(n) for n in walk(statement))))
    return Form(family=SCAN, steps=tuple(steps), body=prelude_of_term, total=term, reverse=reverse,
                **{k: v for k, v in common.items() if k not in ("kinds", "args")})


def _head(loop: Node) -> tuple[Axis, str, bool]:
    """(the counter with its count as bound, the first value, reversed) of `for (T j = s;
    j < b; ++j)` (b - s iterations from s) or `for (T j = b - 1; j >= 0; --j)`."""
    init, update = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
    declared = _declaration(init) if init is not None else None
    condition = condition_of(loop)
    if declared is None or update is None or condition is None:
        raise NotScan(f"{_line(loop)}: the loop does not count with a declared counter")
    name, kind, first = declared[0], declared[1].replace("const ", ""), declared[2]
    if kind not in INDEX_TYPES:
        raise NotScan(f"{_line(loop)}: the counter {name} is a {kind}, not an integer")
    step = text(update).replace(" ", "")
    if step in (f"--{name}", f"{name}--", f"{name}-=1", f"{name}={name}-1"):
        compact = text(strip_parens(condition)).replace(" ", "")
        top = re.fullmatch(r"\((.+)\)-1|(.+)-1", text(first).replace(" ", ""))
        if compact not in (f"{name}>=0", f"{name}>-1", f"0<={name}") or top is None or \
                kind.startswith(("unsigned", "size_t", "uint")):
            raise NotScan(f"{_line(loop)}: a loop counting down that is not `{name} = n - 1; "
                          f"{name} >= 0` over a signed counter")
        count = top.group(1) or top.group(2)
        return Axis(name, kind, count), "0", True
    try:
        _, _, bound, start = rows._head(loop)
    except rows.NotRows as error:
        raise NotScan(str(error)) from None
    count = bound if start == "0" else f"({bound}) - ({start})"
    return Axis(name, kind, count), start, False


def _the_update(body: list[Node], declared: dict[str, str], counter: Axis) -> tuple[Reduction, Node, str]:
    """The one accumulator update of the loop whose accumulator is declared before it, its
    statement, and its term (`(c) ? (e) : identity` for `if (c) acc += e;`)."""
    found = []
    for statement in body:
        update = _accumulation(statement)
        if update is None:
            guarded = rows._guarded_accumulations(statement)
            update = guarded[0] if guarded and len(guarded) == 1 else None
        if update is not None and update[0] in declared:
            found.append((statement, *update))
    if len(found) != 1:
        raise NotScan(f"{len(found)} running values updated in the loop; a scan reads one")
    statement, name, op = found[0]
    kind = declared[name]
    if op not in _OPS or (op, kind) not in IDENTITIES:
        raise NotScan(f"{_line(statement)}: a {op} over {kind} is not a scan read here")
    reduction = Reduction(name, op, kind)
    term = _term(statement, name, reduction)
    if term is None:
        raise NotScan(f"{_line(statement)}: the term of {name}'s update is not read")
    if re.search(rf"\b{re.escape(name)}\b", term):
        raise NotScan(f"{_line(statement)}: the term reads the running value {name}")
    return reduction, statement, term


def _term(statement: Node, name: str, reduction: Reduction) -> str | None:
    """What the update combines into `name`: e in `name += e`, `name = name * e`,
    `name = fmaxf(name, e)`, `if (e > name) name = e`; under `if (c)`, (c) ? (e) : identity."""
    if statement.type == "if_statement":
        inner = _body(statement.child_by_field_name("consequence"))
        condition = text(condition_of(statement))
        if _accumulation(statement) is not None:  # if (e > acc) acc = e: the value assigned
            assignment = _expression(inner[0])
            return text(strip_parens(assignment.child_by_field_name("right")))
        term = _term(inner[0], name, reduction) if len(inner) == 1 else None
        return None if term is None else f"(({condition}) ? ({term}) : {reduction.identity})"
    assignment = _expression(statement)
    right = strip_parens(assignment.child_by_field_name("right"))
    if text(assignment.child_by_field_name("operator")) in ("+=", "*="):
        return text(right)
    if right.type == "binary_expression":
        sides = [strip_parens(right.child_by_field_name(s)) for s in ("left", "right")]
        others = [s for s in sides if text(s) != name]
        return text(others[0]) if len(others) == 1 else None
    if right.type == "call_expression":
        arguments = [strip_parens(a) for a in right.child_by_field_name("arguments").named_children]
        others = [a for a in arguments if text(a) != name]
        return text(others[0]) if len(others) == 1 else None
    return None


def _term_prelude(body: list[Node], update: Node, scanned: Reduction, term: str) -> str:
    """The statements before the update that the term needs, run again for each element
    when the terms are scanned: those that neither write memory nor read the running
    value. The term may read no local that another statement sets."""
    kept, skipped = [], set()
    for statement in body:
        if statement is update:
            break
        reads_value = any(n.type == "identifier" and text(n) == scanned.name for n in walk(statement))
        if reads_value or any(rows._memory_write(n) for n in walk(statement)):
            skipped |= declared_names(statement) | {name for n in walk(statement)
                                                    if (name := assigned_identifier(n))}
        else:
            kept.append(text(statement))
    later = set().union(*(declared_names(s) for s in body[body.index(update) + 1:])) if body else set()
    used = {text(n) for n in walk(parse(f"void f() {{ {term}; }}").root_node) if n.type == "identifier"}
    if used & (skipped | later):
        raise NotScan(f"the term {term} reads {', '.join(sorted(used & (skipped | later)))}, set where "
                      "the running value is read or memory written")
    return "\n".join(kept)


def _iterations_independent(body: list[Node], update: Node, scanned: Reduction, counter: Axis,
                            loop: Node) -> None:
    """Nothing but the running value carries from one iteration to the next, and every
    write lands on an element of the iteration's own."""
    inner = set().union(*(declared_names(s) for s in body)) if body else set()
    # index locals that name the counter (`int idx = r * cols + c;`), never changed after
    locals_ = _index_locals(body)
    through = {name for name, value in locals_.items()
               if re.search(rf"\b{re.escape(counter.name)}\b", strides.through(value, locals_, keep=""))
               and not any(assigned_identifier(n) == name for s in body for n in walk(s))}
    for statement in body:
        for node in walk(statement):
            changed = assigned_identifier(node)
            if changed is not None and changed not in inner and statement is not update:
                raise NotScan(f"{_line(node)}: {changed} carries a value from one iteration to the next")
            if rows._memory_write(node) and not rows._names_any(node, {counter.name} | through):
                raise NotScan(f"{_line(node)}: every iteration writes the same element")
    try:
        rows._same_element(body, loop)
    except rows.NotRows as error:
        raise NotScan(str(error)) from None


_CALLS = ("fmaxf", "fminf", "max", "min")


def _sides(value: Node) -> tuple[str, list[Node]] | None:
    """(the operator, its two operands) of `a + b`, `a * b` or `fmaxf(a, b)` (and fminf,
    max, min), else None."""
    value = strip_parens(value)
    if value.type == "binary_expression" and text(value.child_by_field_name("operator")) in ("+", "*"):
        return (text(value.child_by_field_name("operator")),
                [strip_parens(value.child_by_field_name(s)) for s in ("left", "right")])
    if value.type == "call_expression" and text(value.child_by_field_name("function")) in _CALLS:
        arguments = [strip_parens(a) for a in value.child_by_field_name("arguments").named_children]
        if len(arguments) == 2:
            return text(value.child_by_field_name("function")), arguments
    return None


def _recurrence(statements: list[Node], common: dict[str, Any]) -> list[Node]:
    """A loop whose running value lives in memory (`y[I(j)] = y[I(j - 1)] + e;`, y[I(s -
    1)] written before the loop) rewritten to keep it in a local first read from that
    element: `T optiml_run = y[I(s - 1)];` before the loop, and in it `optiml_run =
    optiml_run + (e); y[I(j)] = optiml_run;`. Anything else comes back unchanged."""
    for position, loop in enumerate(statements):
        if loop.type != "for_statement":
            continue
        try:
            variable, start, reverse = _head(loop)
        except NotScan:
            return statements
        if reverse:
            return statements
        body = _body(loop.child_by_field_name("body"))
        for statement in body:
            assignment = _expression(statement)
            if assignment is None or assignment.type != "assignment_expression" or \
                    text(assignment.child_by_field_name("operator")) != "=":
                continue
            target = strip_parens(assignment.child_by_field_name("left"))
            found = _sides(assignment.child_by_field_name("right"))
            if target.type != "subscript_expression" or found is None:
                continue
            op, sides = found
            base = text(target.child_by_field_name("argument"))
            locals_ = _index_locals(body[:body.index(statement)])
            index = _subscript(target, locals_)
            earlier = _shifted(index, variable.name)
            matching = [side for side in sides if side.type == "subscript_expression"
                        and text(side.child_by_field_name("argument")) == base
                        and strides.same_index(_subscript(side, locals_), earlier)]
            if len(matching) != 1:
                continue
            other = text(next(side for side in sides if side is not matching[0]))
            mentions = [n for s in body for n in walk(s) if n.type == "identifier" and text(n) == base]
            if len(mentions) != 2:
                return statements  # y read elsewhere in the loop: not this shape
            kind = _element_type(common.get("signature", ""), base)
            if kind is None:
                return statements
            run = "optiml_run"
            new = f"{run} = {op}({run}, {other});" if op in _CALLS else f"{run} = {run} {op} ({other});"
            first = re.sub(rf"\b{variable.name}\b", f"({start})", earlier)
            source = "\n".join(
                [*(text(s) for s in statements[:position]),
                 f"{kind} {run} = {base}[{first}];",
                 _rewritten_loop(loop, body, statement,
                                 f"{new}\n{text(target)} = {run};"),
                 *(text(s) for s in statements[position + 1:])])
            return rows_statements(parse(f"void optiml_scan() {{\n{source}\n}}"))
        return statements
    return statements


def _element_type(signature: str, pointer: str) -> str | None:
    from .transposes import element_type

    kind = element_type(signature, pointer)
    return kind if kind in ("float", "double", "int") else None


def rows_statements(tree) -> list[Node]:
    function = next(n for n in walk(tree.root_node) if n.type == "function_definition")
    return list(named_statements(function.child_by_field_name("body")))


def _rewritten_loop(loop: Node, body: list[Node], replaced: Node, new: str) -> str:
    head = text(loop)[:loop.child_by_field_name("body").start_byte - loop.start_byte]
    lines = [new if s is replaced else text(s) for s in body]
    return head + "{\n" + "\n".join(lines) + "\n}"


def _shifted(index: str, counter: str) -> str:
    """The index with the counter one back: `row * N + j` -> `row * N + (j - 1)`."""
    return re.sub(rf"\b{re.escape(counter)}\b", f"({counter} - 1)", index)


def _index_locals(statements: list[Node]) -> dict[str, str]:
    """`int idx = r * cols + c;` -> {"idx": "r * cols + c"}: the integer locals an index
    may be written through."""
    found = {}
    for statement in statements:
        declared = _declaration(statement)
        if declared is not None and declared[1].replace("const ", "") in INDEX_TYPES:
            found[declared[0]] = text(declared[2])
    return found


def _subscript(node: Node, locals_: dict[str, str]) -> str:
    """p[i]'s index, its index locals read through to their definitions."""
    return strides.through(text(node.child_by_field_name("indices"))[1:-1], locals_, keep="")
