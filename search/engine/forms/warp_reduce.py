"""A warp's reduction through shuffles, read as the reduction it computes.

Two ways people reduce with a warp's shuffles (a halving loop from 16 down to 1, inline
or in a helper that returns its argument, with `__shfl_down_sync` or `__shfl_xor_sync`
over the full mask):

- *into an atomic*: each thread's grid-stride partial, the warp's tree of it, lane 0's
  `atomicAdd(out, acc)`. The warp's sum added once is every lane's partial added on its
  own, so the kernel computes what it computes with `atomicAdd(out, acc);` alone (a full
  reduction's partial, `lift._partial_sums`).
- *a row per warp*: `row = global thread / 32`, `lane = threadIdx.x % 32`, loops over
  the row from `lane` by 32 into partials, each partial reduced by a butterfly
  (`__shfl_xor_sync`: every lane holds the row's result). One thread walking the row
  from 0 by 1 holds that result in its partial, so the kernel computes what it computes
  with the lanes taken away: loops from 0 by 1, no shuffles, `row` the global thread
  index, launched with blocks of blockDim / 32 threads (a row map-reduce).

`warp_reduced(source, launch, tunables)` writes the kernel so, or returns None wherever
it cannot show the two compute the same: a block that is not whole warps, a lane that
reads anything but a loop's start or a lane-0 test, a shuffle that is not one of these
trees or not its value's operator (+, max, min), a sum whose partial does not start
from 0 or changes outside its strided loops, a partial read again after a reduction
that did not store into it, a `__shfl_down_sync` whose result lanes other than 0 read,
shared memory, barriers or an early return before an atomic's shuffles. Sums are
regrouped, which the task's tolerance allows of any reduction; the gate checks every
kernel made from the form.
"""

from __future__ import annotations

import re
from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import (
    Edit,
    RewriteError,
    find_kernels,
    named_statements,
    parse,
    splice,
    strip_parens,
    text,
    walk,
)
from . import strides
from .accumulators import _accumulation, _body
from .reading import _declaration, condition_of, global_axis

WARP = 32  # threads a warp (every NVIDIA GPU to date; CUDA's warpSize)
_FULL_MASKS = {"0xffffffff", "0xffffffffu", "0xFFFFFFFF", "0xFFFFFFFFu", "0xFFFFFFFFU", "-1", "~0u", "~0"}
_SHUFFLES = {"__shfl_down_sync": "down", "__shfl_xor_sync": "xor"}
_EXTREMA = {"fmaxf": "max", "max": "max", "fminf": "min", "min": "min"}
_ZERO = {"0", "0.0", "0.f", "0.0f", "0.0F", "0.F"}
_GRID = ("threadIdx", "blockDim", "gridDim")  # read only by the row and lane declarations


def warp_reduced(source: str, launch: dict[str, Any], tunables: dict[str, Any]) -> tuple[str, dict] | None:
    """(source, launch) with the warp's shuffle reduction written as what it computes,
    or None (the kernel as it is)."""
    kernel = next((k for k in find_kernels(parse(source)) if k.name == launch.get("kernel")), None)
    block = [str(d).strip() for d in launch.get("block", [])]
    if kernel is None or len(block) != 1 or "__shfl" not in source:
        return None
    threads = _number(str(tunables.get(block[0], block[0])), {})
    if threads is None or threads % WARP or any(
            word in text(kernel.body) for word in ("__shared__", "__syncthreads", "__syncwarp")):
        return None
    numbers = _numbers(source)
    sites = _sites(parse(source).root_node, kernel, numbers)
    if sites is None:
        return None
    statements = named_statements(kernel.body)
    edits = _into_atomic(statements, sites, numbers)
    new_launch = launch
    if edits is None:
        edits = _row_per_warp(statements, sites, numbers)
        new_launch = {**launch, "block": [str(threads // WARP)]}
    if edits is None:
        return None
    try:
        return splice(source.encode(), edits), new_launch
    except RewriteError:  # two rewrites of one place: a shape not read here
        return None


def _numbers(source: str) -> dict[str, int]:
    """Object-like #defines of integers (`#define WARP 32`), and warpSize."""
    found = {m.group(1): m.group(4).strip() for m in strides._DEFINE.finditer(source) if not m.group(2)}
    return {"warpSize": WARP, **{k: int(v) for k, v in found.items() if re.fullmatch(r"\d+", v)}}


def _number(value: str, numbers: dict[str, int]) -> int | None:
    """The integer an expression of numbers and #defined integers is, or None."""
    value = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(numbers.get(m.group(0), m.group(0))),
                   re.sub(r"(\d)[uU]\b", r"\1", value))
    if not re.fullmatch(r"[\d\s()+\-*/<>]+", value) or not value.strip():
        return None
    try:
        return int(eval(value.replace("/", "//"), {"__builtins__": {}}))  # digits and operators only
    except (SyntaxError, ZeroDivisionError, TypeError):
        return None


class _Site:
    """One shuffle reduction: the node to rewrite, the value reduced, its operator, the
    shuffle's kind ("down" or "xor"), and what the node becomes (`""`: deleted)."""

    def __init__(self, node: Node, value: str, op: str, kind: str, replacement: str):
        self.node, self.value, self.op, self.kind, self.replacement = node, value, op, kind, replacement


def _sites(root: Node, kernel, numbers: dict[str, int]) -> list[_Site] | None:
    """Every shuffle of the kernel as a reduction site, or None if one is not."""
    helpers = {}
    for node in root.named_children:
        if node.type == "function_definition" and node.id != kernel.definition.id:
            name = text(node.child_by_field_name("declarator")).split("(")[0].split()[-1]
            helpers[name] = _helper_tree(node, numbers)
    sites, covered = [], []
    for node in walk(kernel.body):
        if node.type == "for_statement" and (tree := _tree(node, numbers)) is not None:
            sites.append(_Site(node, *tree, ""))
            covered.append(node)
        elif node.type == "call_expression":
            name = text(node.child_by_field_name("function"))
            arguments = node.child_by_field_name("arguments").named_children
            if helpers.get(name) is not None and len(arguments) == 1 and arguments[0].type == "identifier":
                op, kind = helpers[name]
                sites.append(_Site(node, text(arguments[0]), op, kind, f"({text(arguments[0])})"))
                covered.append(node)
            elif name in helpers and _shuffles(root, name):
                return None  # a shuffling helper called otherwise than on one partial
    shuffles = [n for n in walk(kernel.body) if n.type == "call_expression"
                and text(n.child_by_field_name("function")).startswith("__shfl")]
    inside = all(any(c.start_byte <= s.start_byte and s.end_byte <= c.end_byte for c in covered)
                 for s in shuffles)
    return sites if sites and inside else None


def _shuffles(root: Node, name: str) -> bool:
    for node in root.named_children:
        if node.type == "function_definition" and \
                text(node.child_by_field_name("declarator")).split("(")[0].split()[-1] == name:
            return "__shfl" in text(node)
    return False


def _helper_tree(function: Node, numbers: dict[str, int]) -> tuple[str, str] | None:
    """(op, kind) of `float f(float v) { <tree of v>; return v; }`, else None."""
    parameters = function.child_by_field_name("declarator").child_by_field_name("parameters")
    listed = parameters.named_children if parameters is not None else []
    names = [text(p.child_by_field_name("declarator")) for p in listed]
    statements = named_statements(function.child_by_field_name("body"))
    if len(names) != 1 or len(statements) != 2 or statements[0].type != "for_statement" or \
            text(statements[1]).replace(" ", "") != f"return{names[0]};":
        return None
    tree = _tree(statements[0], numbers)
    return (tree[1], tree[2]) if tree is not None and tree[0] == names[0] else None


def _tree(loop: Node, numbers: dict[str, int]) -> tuple[str, str, str] | None:
    """(value, op, kind) of `for (int o = 16; o > 0; o >>= 1) v = op(v, shfl(FULL, v, o));`."""
    init, update = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
    declared = _declaration(init) if init is not None else None
    condition = condition_of(loop)
    body = _body(loop.child_by_field_name("body"))
    if declared is None or update is None or condition is None or len(body) != 1 or \
            _number(text(declared[2]), numbers) != WARP // 2:
        return None
    o = declared[0]
    if text(condition).replace(" ", "") not in (f"{o}>0", f"{o}>=1", f"0<{o}") or text(update).replace(
            " ", "") not in (f"{o}>>=1", f"{o}/=2", f"{o}={o}/2", f"{o}={o}>>1"):
        return None
    calls = [n for n in walk(body[0]) if n.type == "call_expression"
             and text(n.child_by_field_name("function")) in _SHUFFLES]
    if len(calls) != 1:
        return None
    arguments = [text(a).replace(" ", "") for a in calls[0].child_by_field_name("arguments").named_children]
    width_ok = len(arguments) == 3 or (len(arguments) == 4 and _number(arguments[3], numbers) == WARP)
    if not width_ok or arguments[0] not in _FULL_MASKS or arguments[2] != o:
        return None
    value, call = arguments[1], text(calls[0]).replace(" ", "")
    op = _combined(text(body[0]).replace(" ", ""), value, call)
    return None if op is None else (value, op, _SHUFFLES[text(calls[0].child_by_field_name("function"))])


def _combined(statement: str, value: str, call: str) -> str | None:
    """The operator of `v += shfl(...)`, `v = v + shfl(...)`, `v = fmaxf(v, shfl(...))`."""
    if statement in (f"{value}+={call};", f"{value}={value}+{call};", f"{value}={call}+{value};"):
        return "sum"
    for function, op in _EXTREMA.items():
        if statement in (f"{value}={function}({value},{call});", f"{value}={function}({call},{value});"):
            return op
    return None


def _lane(node: Node, numbers: dict[str, int], aliases: set[str]) -> bool:
    """Whether `node` is the thread's lane: threadIdx.x % 32, threadIdx.x & 31, an alias."""
    node = strip_parens(node)
    if node.type == "identifier":
        return text(node) in aliases
    if node.type != "binary_expression":
        return False
    operator = text(node.child_by_field_name("operator"))
    left, right = (strip_parens(node.child_by_field_name(s)) for s in ("left", "right"))
    modulus = {"%": WARP, "&": WARP - 1}.get(operator)
    return text(left).replace(" ", "") == "threadIdx.x" and modulus is not None and \
        _number(text(right), numbers) == modulus


def _lane_zero(condition: Node | None, numbers: dict[str, int], aliases: set[str]) -> bool:
    """`lane == 0` (either way round) for the lane or an alias of it."""
    condition = strip_parens(condition) if condition is not None else None
    if condition is None or condition.type != "binary_expression" or \
            text(condition.child_by_field_name("operator")) != "==":
        return False
    left, right = (strip_parens(condition.child_by_field_name(s)) for s in ("left", "right"))
    return (text(right) == "0" and _lane(left, numbers, aliases)) or \
        (text(left) == "0" and _lane(right, numbers, aliases))


def _lane_aliases(statements: list[Node], numbers: dict[str, int]) -> dict[str, Node]:
    return {d[0]: s for s in statements if (d := _declaration(s)) is not None and _lane(d[2], numbers, set())}


def _into_atomic(statements: list[Node], sites: list[_Site], numbers: dict[str, int]) -> list[Edit] | None:
    """A sum's tree, then `if (lane == 0) atomicAdd(out, v);` as the kernel's last two
    statements: the tree deleted, the atomic made every thread's."""
    aliases = _lane_aliases(statements, numbers)
    last = statements[-1] if statements else None
    if last is None or last.type != "if_statement" or last.child_by_field_name("alternative") is not None \
            or not _lane_zero(condition_of(last), numbers, set(aliases)) or len(sites) != 1:
        return None
    (site,) = sites
    inner = _body(last.child_by_field_name("consequence"))
    call = inner[0].named_children[0] if len(inner) == 1 and inner[0].type == "expression_statement" else None
    if call is None or call.type != "call_expression" or \
            text(call.child_by_field_name("function")) != "atomicAdd":
        return None
    arguments = call.child_by_field_name("arguments").named_children
    tree_statement = statements[-2] if len(statements) >= 2 else None
    if len(arguments) != 2 or text(arguments[1]) != site.value or site.op != "sum" or tree_statement is None \
            or not _is_site_statement(tree_statement, site) or \
            any(n.type == "return_statement" for s in statements for n in walk(s)):
        return None
    rest = [s for s in statements[:-2] if s.id not in {a.id for a in aliases.values()}]
    if any(_mentions(s, set(aliases)) for s in rest):
        return None
    edits = [Edit(tree_statement.start_byte, tree_statement.end_byte, ""),
             Edit(last.start_byte, last.end_byte, f"{text(call)};")]
    return edits + [Edit(a.start_byte, a.end_byte, "") for a in aliases.values()]


def _is_site_statement(statement: Node, site: _Site) -> bool:
    """The tree loop itself, or `v = helper(v);`."""
    if statement.id == site.node.id:
        return True
    compact = text(statement).replace(" ", "")
    return site.replacement != "" and compact == f"{site.value}={text(site.node).replace(' ', '')};"


def _mentions(node: Node, names: set[str]) -> bool:
    return any(n.type == "identifier" and text(n) in names for n in walk(node))


def _row_per_warp(statements: list[Node], sites: list[_Site], numbers: dict[str, int]) -> list[Edit] | None:
    """The lanes of a row per warp taken away (module docstring), or None."""
    aliases = _lane_aliases(statements, numbers)
    rows = [(s, d) for s in statements if (d := _declaration(s)) is not None and _warp_of(d[2], numbers)]
    if len(rows) != 1 or len(aliases) != 1 or any(s.kind != "xor" for s in sites):
        return None
    (row_statement, row), lane = rows[0], next(iter(aliases))
    edits = [Edit(row[2].start_byte, row[2].end_byte, "blockIdx.x * blockDim.x + threadIdx.x"),
             Edit(aliases[lane].start_byte, aliases[lane].end_byte, "")]
    top = {s.id: position for position, s in enumerate(statements)}
    strided: list[Node] = []
    for statement in statements:
        for node in walk(statement):
            if node.type == "identifier" and text(node) == lane and \
                    not _lane_use(node, numbers, lane, strided, edits):
                return None
        if statement.id not in (row_statement.id, aliases[lane].id) and any(
                text(n) in _GRID for n in walk(statement) if n.type == "identifier"):
            return None
    for site in sites:
        at = _top_position(site.node, top, statements)
        if at is None or not _partial_of(site, statements, at, strided):
            return None
    if not _partials_reduced(statements, sites, strided, top):
        return None
    for site in sites:
        statement = site.node.parent.parent if site.replacement else None
        if statement is not None and statement.type == "expression_statement" and _stores(site):
            edits.append(Edit(statement.start_byte, statement.end_byte, ""))  # `m = warp_max(m);`: gone
        else:
            edits.append(Edit(site.node.start_byte, site.node.end_byte, site.replacement))
    return edits


def _stores(site: _Site) -> bool:
    """Whether the site stores its result into its value: a tree loop, or `v = f(v)`."""
    return site.replacement == "" or text(site.node.parent).replace(" ", "") == \
        f"{site.value}={text(site.node).replace(' ', '')}"


def _warp_of(value: Node, numbers: dict[str, int]) -> bool:
    """`(blockIdx.x * blockDim.x + threadIdx.x) / 32` (or `>> 5`)."""
    value = strip_parens(value)
    if value.type != "binary_expression":
        return False
    operator = text(value.child_by_field_name("operator"))
    divisor = _number(text(value.child_by_field_name("right")), numbers)
    return global_axis(value.child_by_field_name("left"), {}) == "x" and \
        ((operator == "/" and divisor == WARP) or (operator == ">>" and divisor == 5))


def _lane_use(node: Node, numbers: dict[str, int], lane: str, strided: list[Node],
              edits: list[Edit]) -> bool:
    """A lane read as a strided loop's start (the loop then runs from 0 by 1), in a
    lane-0 test (the test then always holds), or in its own declaration; edits added."""
    parent = node.parent
    if parent is not None and parent.type == "init_declarator" and parent.parent is not None \
            and parent.parent.parent is not None and parent.parent.parent.type == "for_statement":
        loop = parent.parent.parent
        name = text(parent.child_by_field_name("declarator"))
        update = text(loop.child_by_field_name("update") or node).replace(" ", "")
        step = re.fullmatch(rf"{name}\+=(.+)|{name}={name}\+(.+)", update)
        condition = strip_parens(condition_of(loop)) if condition_of(loop) is not None else None
        if step is None or _number(step.group(1) or step.group(2), numbers) != WARP or condition is None \
                or condition.type != "binary_expression" or \
                text(condition.child_by_field_name("left")) != name or \
                text(condition.child_by_field_name("operator")) != "<":
            return False
        strided.append(loop)
        stepping = loop.child_by_field_name("update")
        edits += [Edit(node.start_byte, node.end_byte, "0"),
                  Edit(stepping.start_byte, stepping.end_byte, f"{name} += 1")]
        return True
    if parent is not None and parent.type == "init_declarator" and \
            parent.child_by_field_name("declarator").id == node.id and \
            parent.parent.parent.type != "for_statement":
        return True  # the lane's own declaration, deleted
    test = parent
    while test is not None and test.type in ("binary_expression", "parenthesized_expression",
                                             "condition_clause"):
        test = test.parent
    if test is not None and test.type == "if_statement" and test.child_by_field_name("alternative") is None \
            and _lane_zero(condition_of(test), numbers, {lane}):
        consequence = test.child_by_field_name("consequence")
        edits.append(Edit(test.start_byte, test.end_byte, text(consequence)))
        return True
    return False


def _top_position(node: Node, top: dict[int, int], statements: list[Node]) -> int | None:
    while node is not None and node.id not in top:
        node = node.parent
    return None if node is None else top[node.id]


def _partial_of(site: _Site, statements: list[Node], at: int, strided: list[Node]) -> bool:
    """Whether the site reduces a lane's partial of its operator: declared before it (a
    sum's from 0), changed before it only by updates of its operator inside strided
    loops, and, where the site does not store the result into it, not read after it."""
    declared = next((i for i, s in enumerate(statements[:at])
                     if (d := _declaration(s)) and d[0] == site.value), None)
    if declared is None or (site.op == "sum" and text(_declaration(statements[declared])[2]) not in _ZERO):
        return False
    loops = {loop.id for loop in strided}
    for statement in statements[declared + 1:at]:
        for node in walk(statement):
            if not _assigns(node, site.value):
                continue
            update = node.parent if node.parent is not None else node
            loop = update.parent
            while loop is not None and loop.type != "for_statement":
                loop = loop.parent
            if loop is None or loop.id not in loops or _accumulation(update) != (site.value, site.op):
                return False
    return _stores(site) or not any(_mentions(s, {site.value}) for s in statements[at + 1:])


def _partials_reduced(statements: list[Node], sites: list[_Site], strided: list[Node],
                      top: dict[int, int]) -> bool:
    """Whether every value a strided loop leaves behind (a lane's partial) is reduced by a
    site before anything else reads it: a lane-0 test reading a partial the warp never
    combined would read one lane's share, where one thread's walk holds the row's."""
    for loop in strided:
        at = _top_position(loop, top, statements)
        inner = {d[0] for n in walk(loop) if n.type == "declaration" and (d := _declaration(n))}
        targets = [strip_parens(n.child_by_field_name("left") or n.child_by_field_name("argument"))
                   for n in walk(loop) if n.type in ("assignment_expression", "update_expression")]
        left = {text(t) for t in targets if t.type == "identifier"} - inner
        for value in left:
            reduced = [p for site in sites if site.value == value
                       and (p := _top_position(site.node, top, statements)) is not None and p > at]
            if not reduced:
                return False
            between = statements[at + 1:min(reduced)]
            if any(_mentions(s, {value}) and not any(s.id == other.id for other in strided) for s in between):
                return False
    return True


def _assigns(node: Node, name: str) -> bool:
    if node.type == "assignment_expression":
        return text(strip_parens(node.child_by_field_name("left"))) == name
    if node.type == "update_expression":
        return text(node.child_by_field_name("argument")) == name
    return False
