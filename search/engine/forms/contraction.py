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

A convolution written as a thread per output is the same product over a nest of loops
(implicit GEMM): `for (c) for (r) for (s) { int ih = oh + r - 1; ...; if (inside) sum +=
x[...] * w[...]; }`. The nest is one reduction index `optiml_k` over the product of its
bounds, the loop variables its digits (`s = optiml_k % S`, ...); the factors may then read
locals declared in the loop's body or before the loop, which each factor's tile load
recomputes (`setups`: what it needs, in the kernel's order), so long as what they read is
that factor's own coordinates; and a test around the sum (the padding) becomes the factor
it concerns: `(inside ? x[...] : 0.0f)`, the same sum wherever the other factor is finite.
"""

from __future__ import annotations

from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import Kernel, declared_name, parse, strip_parens, text, walk
from . import radix, rows
from .accumulators import _accumulation, _body
from .reading import _declaration, condition_of
from .types import CONTRACTION, Axis, Form, Refusal


def lift_contraction(kernel: Kernel, space, common: dict[str, Any]) -> Form | Refusal:
    try:
        return _lift(kernel, space, common)
    except ValueError as error:
        return Refusal(str(error), family=CONTRACTION)


NEST_K = "optiml_k"  # the reduction index of a flattened nest of loops


def _lift(kernel: Kernel, space, common: dict[str, Any]) -> Form:
    body = list(space.body)
    loops = [i for i, s in enumerate(body) if s.type in ("for_statement", "while_statement", "do_statement")]
    if len(loops) != 1 or body[loops[0]].type != "for_statement":
        raise ValueError("not one counted loop over the reduction index")
    pre, loop, post = body[:loops[0]], body[loops[0]], body[loops[0] + 1:]
    if any(rows._memory_write(n) for s in pre for n in walk(s)):
        raise ValueError(f"line {pre[0].start_point.row + 1}: writes memory before the reduction loop")
    nest, steps, tests, update = _nest(loop)
    guard = " && ".join(f"({t})" for t in tests) if len(tests) > 1 else (tests[0] if tests else None)
    found = _accumulation(update)
    if found is None or found[1] != "sum":
        raise ValueError("the loop's body is not one sum into an accumulator")
    acc = found[0]
    declared = {d[0]: d[1] for d in (_declaration(s) for s in pre) if d}
    if declared.get(acc, "").replace("const ", "") != "float":
        raise ValueError(f"the accumulator {acc} is not a float declared before the loop")
    term = _term(update, acc)
    if term.type != "binary_expression" or text(term.child_by_field_name("operator")) != "*":
        raise ValueError(f"{text(term)} is not a product of two factors")
    coords, rebuilt, flat = _coordinates(space, pre)
    coordinate_names = [c.name for c in coords]
    k, digits = _reduction(nest)
    locals_ = set(declared) | {declared_name(d) for s in pre for n in walk(s) if n.type == "declaration"
                               for d in n.children_by_field_name("declarator")}
    loop_names = {axis.name for axis, _ in nest}
    bounds = set().union(*(_names(axis.bound) for axis, _ in nest))
    if bounds & (locals_ | set(coordinate_names) | flat | loop_names):
        raise ValueError(f"the loop's bound {' * '.join(a.bound for a, _ in nest)} is worked out per output")
    # what a factor may recompute in its tile load: the work's own declarations (not the
    # accumulator, the coordinates or anything assigned again), the digits, the body's locals
    definitions = [*(_definition(s) for s in pre if _declaration(s) and _declaration(s)[0] not in
                     {acc, *coordinate_names, *flat}), *digits, *(_definition(s) for s in steps)]
    _assigned_once(definitions, [*pre, loop])
    factors = [strip_parens(term.child_by_field_name(side)) for side in ("left", "right")]
    texts = [text(f) for f in factors]
    setups = [_needed(t, definitions) for t in texts]
    named = [_names(t) | set().union(*(d[2] for d in needed))
             for t, needed in zip(texts, setups, strict=True)]
    if guard is not None:
        side = _guard_side(guard, definitions, named, set(coordinate_names))
        texts[side] = f"(({guard}) ? ({texts[side]}) : 0.0f)"
        setups[side] = _needed(texts[side], definitions)
        named[side] |= _names(guard) | set().union(*(d[2] for d in setups[side]))
        # a tile load works its factor's locals out before the test: none may read memory
        reading = [d[0] for d in setups[side] if d[3]]
        if reading:
            raise ValueError(f"{', '.join(reading)} read memory, under the test {guard}")
    recomputed = {d[0] for d in definitions}
    for factor, names in zip(texts, named, strict=True):
        if names & flat:
            raise ValueError(f"{factor} reads the flat index {', '.join(sorted(names & flat))}, "
                             "not its coordinates")
        if names & (locals_ - set(coordinate_names) - recomputed):
            read = ", ".join(sorted(names & (locals_ - set(coordinate_names) - recomputed)))
            raise ValueError(f"{factor} reads {read}, worked out per output")
    own = [{c for c in coordinate_names if c in names} for names in named]
    first_only, second_only = own[0] - own[1], own[1] - own[0]
    if not first_only or not second_only or not (loop_names & (named[0] | named[1])):
        # one factor must follow the rows of the output, the other its columns
        raise ValueError(f"{text(term)}: one factor must follow k and an output coordinate the other "
                         "does not read, and the other factor another such coordinate")
    # The coordinates each factor alone reads tile it (merged into one index when there
    # are several: a convolution's images and pixels); the ones both read are batch.
    firsts = [c for c in coords if c.name in first_only]
    seconds = [c for c in coords if c.name in second_only]
    setup_texts = ["\n".join(d[1] for d in needed) for needed in setups]
    if coordinate_names.index(firsts[-1].name) > coordinate_names.index(seconds[-1].name):
        firsts, seconds, texts, setup_texts = seconds, firsts, texts[::-1], setup_texts[::-1]
    row, col = _merged(firsts, MERGED_ROW), _merged(seconds, MERGED_COLUMN)
    merged = tuple((axis.name, tuple(group)) for axis, group in ((row, firsts), (col, seconds))
                   if len(group) > 1)
    batch = tuple(c for c in coords if c not in firsts and c not in seconds)
    if any(n.type == "identifier" and text(n) == acc for s in pre for n in walk(s)
           if not (n.parent is not None and n.parent.type == "init_declarator")):
        raise ValueError(f"the accumulator {acc} is read before the loop")
    return Form(family=CONTRACTION, body="\n".join(text(s) for s in pre),
                factors=tuple(texts), reduction=k, setups=tuple(setup_texts) if any(setup_texts) else (),
                accumulator=acc, epilogue="\n".join(text(s) for s in post),
                coordinates=(*batch, row, col), merged=merged, rebuild=rebuilt, covers=_covers(space, pre),
                **{key: v for key, v in common.items() if key not in ("kinds", "args")})


MERGED_ROW, MERGED_COLUMN = "optiml_row", "optiml_col"


def _merged(group: list[Axis], name: str) -> Axis:
    """One coordinate as it is; several as one index over the product of their extents."""
    if len(group) == 1:
        return group[0]
    return Axis(name, "long long", " * ".join(f"({c.bound})" for c in group))


def unmerge(form: Form, name: str, ctype: str = "long long") -> str:
    """The statements declaring the coordinates merged into `name` (none if it is one):
    its mixed-radix digits, the slowest first, divided in `ctype` (a 64-bit division
    costs a GPU several times a 32-bit one: the tile divides in int where it can)."""
    parts = dict(form.merged).get(name, ())
    lines = []
    for position, part in enumerate(parts):
        inner = " * ".join(f"({ctype})({c.bound})" for c in parts[position + 1:])
        value = f"{name} / ({inner})" if inner else name
        if position > 0:
            value = f"({value}) % ({ctype})({part.bound})"
        lines.append(f"const {part.ctype} {part.name} = ({part.ctype})({value});")
    return "\n".join(lines)


# (name, the statement declaring it, the names it reads, whether it reads memory)
Definition = tuple[str, str, set[str], bool]


def _nest(loop: Node) -> tuple[list[tuple[Axis, str]], list[Node], list[str], Node]:
    """The loops of a nest (each with its count of iterations and its start), outermost
    first; the declarations of their bodies, in
    order; the tests met on the way (`if (h >= 0 && h < H) { ... }`, no else), which guard
    the sum; and the sum itself. A body holds declarations, then one loop, test or sum."""
    nest, steps, tests = [], [], []
    statement = loop
    while statement.type in ("for_statement", "if_statement"):
        if statement.type == "for_statement":
            name, ctype, bound, start = rows._head(statement)  # NotRows is a ValueError
            # a loop from elsewhere (taps from -1 to 1) is bound - start iterations from 0
            nest.append((Axis(name, ctype, bound if start == "0" else f"({bound}) - ({start})"), start))
            inner = _body(statement.child_by_field_name("body"))
        elif statement.child_by_field_name("alternative") is None:
            tests.append(text(strip_parens(condition_of(statement))))
            inner = _body(statement.child_by_field_name("consequence"))
        else:
            raise ValueError(f"line {statement.start_point.row + 1}: a test with an else around the sum")
        if not inner:
            raise ValueError("the loop's body is empty")
        *declarations, statement = inner
        if any(_declaration(s) is None or any(rows._memory_write(n) for n in walk(s)) for s in declarations):
            raise ValueError("the loop's body is not declarations and then one sum into an accumulator")
        steps += declarations
    if any(n.type in ("for_statement", "while_statement", "do_statement") for n in walk(statement)):
        raise ValueError("the loops around the sum are not one nest")
    return nest, steps, tests, statement


def _reduction(nest: list[tuple[Axis, str]]) -> tuple[Axis, list[Definition]]:
    """The reduction axis: the loop's own for one loop from 0; else NEST_K over the product
    of the counts, with each loop variable its start plus a digit (the innermost fastest)."""
    if len(nest) == 1 and nest[0][1] == "0":
        return nest[0][0], []
    k = Axis(NEST_K, "int", " * ".join(f"({axis.bound})" for axis, _ in nest))
    digits = []
    for position, (axis, start) in enumerate(nest):
        inner = " * ".join(f"({a.bound})" for a, _ in nest[position + 1:])
        value = f"{NEST_K} / ({inner})" if inner else NEST_K
        if position > 0:
            value = f"({value}) % ({axis.bound})"
        if start != "0":
            value = f"({start}) + {value}"
        digits.append((axis.name, f"const {axis.ctype} {axis.name} = ({axis.ctype})({value});",
                       {NEST_K} | _names(axis.bound), False))
    return k, digits


def _definition(statement: Node) -> Definition:
    name, _, value = _declaration(statement)
    reads = any(n.type == "subscript_expression" or
                (n.type == "pointer_expression" and text(n).startswith("*")) for n in walk(value))
    return name, text(statement), _names(text(value)), reads


def _assigned_once(definitions: list[Definition], statements: list[Node]) -> None:
    """A local a factor recomputes must keep the value it was declared with."""
    names = {d[0] for d in definitions}
    for statement in statements:
        for node in walk(statement):
            if node.parent is not None and node.parent.type == "for_statement" and \
                    node == node.parent.child_by_field_name("update"):
                continue  # the loop's own step (`++c`): its counter is a digit
            target = node.child_by_field_name("left") if node.type == "assignment_expression" else \
                node.child_by_field_name("argument") if node.type == "update_expression" else None
            if target is not None and text(strip_parens(target)) in names:
                raise ValueError(f"line {node.start_point.row + 1}: {text(target)} changes after "
                                 "its declaration")


def _needed(expression: str, definitions: list[Definition]) -> list[Definition]:
    """The definitions an expression reads, directly or through others, in their order."""
    wanted = _names(expression)
    needed = []
    for definition in reversed(definitions):
        if definition[0] in wanted:
            needed.append(definition)
            wanted |= definition[2]
    return needed[::-1]


def _guard_side(guard: str, definitions: list[Definition], named: list[set[str]],
                coordinates: set[str]) -> int:
    """The factor a test around the sum belongs to: the one whose coordinates it reads."""
    reads = _names(guard) | set().union(*(d[2] for d in _needed(guard, definitions)))
    wanted = reads & coordinates
    owns = [wanted <= (names & coordinates) for names in named]
    if not any(owns):
        raise ValueError(f"the test {guard} reads coordinates of both factors")
    return 0 if owns[0] else 1


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


def _names(node: Node | str) -> set[str]:
    if isinstance(node, str):
        node = parse(f"void optiml_f() {{ optiml_v = {node}; }}").root_node
    return {text(n) for n in walk(node) if n.type == "identifier"}
