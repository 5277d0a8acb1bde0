"""Reading a kernel's thread-index space: which variables index the threads, and the
bounds that guard them, in the ways people write it.

    int idx = blockIdx.x * blockDim.x + threadIdx.x;   (any order, casts, via locals)
    int plane = blockIdx.z;                             (a plane: the plan's grid bounds it)
    if (idx >= n) return;   |   if (idx < n) { ... }   |   if (row < M && col < N) ...
    for (long i = <index>; i < n; i += blockDim.x * gridDim.x) { ... }       (grid-stride)

`read_space` returns the uniform prelude, the axes (slowest first) and the statements
one index point runs, or the reason the kernel is not read that way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from ..rewrites.syntax import (
    THREAD_BUILTINS,
    Kernel,
    assigned_identifier,
    declared_name,
    named_statements,
    strip_parens,
    text,
    walk,
)
from .types import Axis

INDEX_TYPES = frozenset({"int", "long", "long long", "unsigned", "unsigned int", "size_t", "int64_t",
                         "long int", "unsigned long", "unsigned long long", "uint64_t", "int32_t"})


@dataclass(frozen=True)
class Space:
    prelude: tuple[Node, ...]  # uniform declarations before the index space
    axes: tuple[Axis, ...]  # slowest first
    body: tuple[Node, ...]  # what one index point runs
    thread_names: frozenset[str]  # locals that hold thread indices (index helpers)
    after: tuple[Node, ...] = ()  # statements after a grid-stride loop (a partial's atomic)


class NotRead(ValueError):
    """The kernel's index space is not one of the shapes read here."""


def _factors(node: Node, env: dict[str, Node]) -> list[str] | None:
    node = _unwrap(node, env)
    if node.type == "binary_expression" and text(node.child_by_field_name("operator")) == "*":
        left = _factors(node.child_by_field_name("left"), env)
        right = _factors(node.child_by_field_name("right"), env)
        return None if left is None or right is None else left + right
    if node.type == "field_expression":
        return [text(node).replace(" ", "")]
    return None


def _unwrap(node: Node, env: dict[str, Node]) -> Node:
    """Through parentheses, casts and locals that name an index expression."""
    while True:
        node = strip_parens(node)
        if node.type == "cast_expression":
            node = node.child_by_field_name("value")
        elif node.type == "identifier" and text(node) in env:
            node = env[text(node)]
        else:
            return node


def global_axis(node: Node, env: dict[str, Node]) -> str | None:
    """'x', 'y' or 'z' when `node` is blockIdx.a * blockDim.a + threadIdx.a, else None."""
    node = _unwrap(node, env)
    if node.type != "binary_expression" or text(node.child_by_field_name("operator")) != "+":
        return None
    terms = [_factors(node.child_by_field_name(side), env) for side in ("left", "right")]
    if any(t is None for t in terms):
        return None
    for axis in "xyz":
        shapes = sorted(sorted(t) for t in terms)  # type: ignore[arg-type]
        if shapes == sorted([sorted([f"blockDim.{axis}", f"blockIdx.{axis}"]), [f"threadIdx.{axis}"]]):
            return axis
    return None


def reads_thread(node: Node, names: frozenset[str] | set[str] = frozenset()) -> bool:
    return any(n.type == "identifier" and (text(n) in THREAD_BUILTINS or text(n) in names)
               for n in walk(node))


def mentions(node: Node, names: set[str]) -> bool:
    return any(n.type == "identifier" and text(n) in names for n in walk(node))


def _declaration(statement: Node) -> tuple[str, str, Node] | None:
    """(name, type, init) of a one-variable declaration with an initialiser."""
    if statement.type != "declaration":
        return None
    declarators = statement.children_by_field_name("declarator")
    kind = statement.child_by_field_name("type")
    if len(declarators) != 1 or kind is None or declarators[0].type != "init_declarator":
        return None
    value = declarators[0].child_by_field_name("value")
    name = declared_name(declarators[0])
    return (name, text(kind), value) if value is not None else None


def condition_of(statement: Node) -> Node | None:
    """The tested expression of an if/while (inside its condition_clause) or a for."""
    condition = statement.child_by_field_name("condition")
    if condition is not None and condition.type == "condition_clause":
        condition = condition.child_by_field_name("value")
    return condition


def _bounds(condition: Node, axes: dict[str, tuple[str, str]], upper: bool) -> dict[str, str] | None:
    """{index: bound} from `i < n && j < m` (upper) or `i >= n || j >= m` (not upper)."""
    condition = strip_parens(condition)
    joiner, compare, flipped = ("&&", "<", ">") if upper else ("||", ">=", "<=")
    if condition.type == "binary_expression" and text(condition.child_by_field_name("operator")) == joiner:
        left = _bounds(condition.child_by_field_name("left"), axes, upper)
        right = _bounds(condition.child_by_field_name("right"), axes, upper)
        if left is None or right is None or set(left) & set(right):
            return None
        return {**left, **right}
    if condition.type != "binary_expression":
        return None
    op = text(condition.child_by_field_name("operator"))
    left, right = (strip_parens(condition.child_by_field_name(s)) for s in ("left", "right"))
    if op == compare and left.type == "identifier" and text(left) in axes:
        return {text(left): text(right)}
    if op == flipped and right.type == "identifier" and text(right) in axes:
        return {text(right): text(left)}
    return None


def _is_return(statement: Node) -> bool:
    if statement.type == "return_statement":
        return True
    inner = named_statements(statement) if statement.type == "compound_statement" else []
    return len(inner) == 1 and inner[0].type == "return_statement"


def plane_axis(node: Node, env: dict[str, Node], letters: str = "yz") -> str | None:
    """'y' or 'z' (or 'x', where `letters` has it) when `node` is blockIdx.y or blockIdx.z
    alone (a plane of the grid)."""
    node = _unwrap(node, env)
    found = text(node).replace(" ", "") if node.type == "field_expression" else ""
    return found[-1] if found in {f"blockIdx.{letter}" for letter in letters} else None


def single_threads(block: list | None) -> bool:
    """Whether a launch's blocks are one thread each (`block: [1]`): blockIdx.x alone then
    indexes the threads as blockIdx.x * blockDim.x + threadIdx.x would."""
    return bool(block) and all(str(d).strip() == "1" for d in block)


def plane_bounds(grid: list, args: list, params: list[str], block: list | None = None) -> dict[str, str]:
    """{letter: bound} of the grid's y and z dimensions (and x, for blocks of one thread)
    as kernel expressions: each size the plan's expression names must be passed to the
    kernel (`N * C` with arguments N and C). A dimension that cannot be written so is left
    out (its plane then does not read)."""
    passed = {str(arg): param for arg, param in zip(args, params, strict=False)}
    found = {}
    whole = {arg.replace(" ", ""): param for arg, param in passed.items()}
    letters = "xyz" if single_threads(block) else "yz"
    for letter, dim in zip("xyz", [str(d) for d in grid], strict=False):
        names = set(re.findall(r"[A-Za-z_]\w*", dim))
        if letter in letters and dim.replace(" ", "") in whole:  # the extent passed as one argument
            found[letter] = whole[dim.replace(" ", "")]
        elif letter in letters and names <= set(passed):
            found[letter] = re.sub(r"[A-Za-z_]\w*", lambda m: passed[m.group(0)], dim)
    return found


def read_space(kernel: Kernel, planes: dict[str, str] | None = None) -> Space:
    """The index space; `planes` gives the bounds of grid planes (`int b = blockIdx.z;`)
    that the kernel does not check (plane_bounds)."""
    statements = named_statements(kernel.body)
    planes = planes or {}
    env: dict[str, Node] = {}
    axes: dict[str, tuple[str, str]] = {}  # index name -> (type, axis letter)
    thread_names: set[str] = set()
    prelude: list[Node] = []
    bounded: dict[str, str] = {}  # planes: bounded by the grid, not by a check
    early: list[Node] = []  # digits of an index read before its bounds check (radix.py)
    firsts: dict[str, Node] = {}  # index locals -> their thread-index expression
    for position, statement in enumerate(statements):
        declared = _declaration(statement)
        if declared is not None:
            name, kind, value = declared
            axis = global_axis(value, env)
            if axis is not None and kind.replace("const ", "") in INDEX_TYPES:
                axes[name] = (kind.replace("const ", ""), axis)
                firsts[name] = value  # a grid-stride loop may start from it (`for (i = tid; ...)`)
                continue
            plane = plane_axis(value, env, "yz" + ("x" if "x" in planes else ""))
            if plane is not None and kind.replace("const ", "") in INDEX_TYPES:
                if plane not in planes:
                    raise NotRead(f"line {statement.start_point.row + 1}: {name} is a plane of the grid "
                                  "whose extent is not a size passed to the kernel")
                axes[name] = (kind.replace("const ", ""), plane)
                bounded[name] = planes[plane]
                continue
            if reads_thread(value, thread_names | set(axes)):
                if not mentions(value, set(axes)):
                    env[name] = value
                    thread_names.add(name)
                    continue
                if _is_digit(statement, axes, early):
                    early.append(statement)  # `int row = idx / N;` before `if (row < M ...)`
                    continue
                raise NotRead(f"line {statement.start_point.row + 1}: {name} is worked out from "
                              "the thread index before the bounds check")
            prelude.append(statement)
            continue
        rest = statements[position + 1:]
        if "x" in planes and axes and set(axes) == set(bounded) and not early and \
                statement.type != "if_statement":
            # blocks of one thread, every index a plane the grid bounds (`int row =
            # blockIdx.x;` launched <<<R, 1>>>): no check, the rest is one point's work
            return _planes_only(statements, position, axes, prelude, frozenset(thread_names), bounded)
        if statement.type == "if_statement":
            return _guarded(statement, rest, axes, tuple(prelude), frozenset(thread_names), bounded,
                            tuple(early))
        if statement.type == "for_statement" and not early:
            space = _grid_stride(statement, {**env, **firsts}, tuple(prelude), frozenset(thread_names))
            if any(mentions(s, set(firsts)) for s in (*space.body, *rest)):
                raise NotRead(f"line {statement.start_point.row + 1}: the work reads the thread's first "
                              f"index ({', '.join(sorted(firsts))}) besides the grid-stride loop's own")
            return Space(space.prelude, space.axes, space.body, space.thread_names, tuple(rest))
        if any(n.type == "type_qualifier" and text(n) == "__shared__" for n in walk(statement)):
            raise NotRead(f"line {statement.start_point.row + 1}: __shared__ memory: threads cooperate, "
                          "which a family form does not read")
        raise NotRead(f"line {statement.start_point.row + 1}: expected the bounds check "
                      "of the thread index, found another statement")
    raise NotRead("the kernel has no bounds check on a thread index")


def _planes_only(statements: list[Node], position: int, axes: dict[str, tuple[str, str]],
                 prelude: list[Node], thread_names: frozenset[str], planes: dict[str, str]) -> Space:
    """A space of grid planes alone: the declarations after the last plane's are the
    point's own (its accumulators), with every statement from `position` on."""
    last = max(i for i, s in enumerate(statements[:position])
               if (d := _declaration(s)) is not None and d[0] in axes)
    own = list(statements[last + 1:position])
    kept = tuple(s for s in prelude if all(s.id != o.id for o in own))
    return Space(kept, _ordered(axes, {}, planes), tuple(own) + tuple(statements[position:]), thread_names)


def _ordered(axes: dict[str, tuple[str, str]], bounds: dict[str, str],
             planes: dict[str, str] | None = None) -> tuple[Axis, ...]:
    bounds = {**(planes or {}), **bounds}
    if set(bounds) != set(axes) or len({letter for _, letter in axes.values()}) != len(axes):
        raise NotRead("the bounds check does not bound every thread index exactly once")
    order = sorted(axes, key=lambda name: "zyx".index(axes[name][1]))
    return tuple(Axis(name, axes[name][0], bounds[name]) for name in order)


def _guarded(statement: Node, rest: list[Node], axes: dict[str, tuple[str, str]],
             prelude: tuple[Node, ...], thread_names: frozenset[str], planes: dict[str, str],
             early: tuple[Node, ...] = ()) -> Space:
    named = {**axes, **{d[0]: ("int", "") for d in map(_declaration, early) if d}}
    bounds, body, returned = _one_guard(statement, rest, named)
    # successive or nested checks, one index each: `if (row >= R) return; if (col >= C)
    # return;` or `if (row < R) { if (col < C) { ... } }`. The next check must be the
    # first statement the outer one lets through (and, inside a wrapping check, the only
    # one): any other statement would run for threads the next check leaves out.
    # Indices read as digits are bounded together (_through_digits): one check only.
    while not early and body and body[0].type == "if_statement" and (returned or len(body) == 1) \
            and set(axes) - set(bounds) - set(planes):
        try:
            more, inner, inner_returned = _one_guard(body[0], list(body[1:]), named)
        except NotRead:
            break
        if not set(more) <= set(axes) - set(bounds) - set(planes):
            break
        bounds, body, returned = {**bounds, **more}, inner, inner_returned
    bounds = _through_digits(bounds, axes, early, statement)
    return Space(prelude, _ordered(axes, bounds, planes), early + tuple(body), thread_names)


def _one_guard(statement: Node, rest: list[Node],
               named: dict[str, tuple[str, str]]) -> tuple[dict[str, str], list[Node], bool]:
    """({index: bound}, the statements it lets through, whether it is an early return) of
    one bounds check: `if (i >= n) return;` before `rest`, or `if (i < n) { ... }` with
    nothing after it."""
    condition = condition_of(statement)
    consequence = statement.child_by_field_name("consequence")
    if statement.child_by_field_name("alternative") is not None or condition is None or consequence is None:
        raise NotRead("the bounds check has an else branch")
    if _is_return(consequence):
        bounds = _bounds(condition, named, upper=False)
        if bounds is None:
            raise NotRead(f"line {statement.start_point.row + 1}: the early return's condition "
                          "is not `index >= bound` for the thread indices")
        return bounds, list(rest), True
    bounds = _bounds(condition, named, upper=True)
    if bounds is None or rest:
        raise NotRead(f"line {statement.start_point.row + 1}: the guard is not `index < bound` "
                      "around the rest of the kernel")
    body = named_statements(consequence) if consequence.type == "compound_statement" else [consequence]
    return bounds, body, False


def _is_digit(statement: Node, axes: dict[str, tuple[str, str]], early: list[Node]) -> bool:
    """Whether a declaration reads an index as a digit (`idx / N`, `idx % N`, ...)."""
    from .radix import partials, read_digit

    declared = _declaration(statement)
    return declared is not None and declared[1].replace("const ", "") in INDEX_TYPES and any(
        read_digit(declared[2], axis, partials(early, axis)) is not None for axis in axes)


def _through_digits(bounds: dict[str, str], axes: dict[str, tuple[str, str]], early: tuple[Node, ...],
                    statement: Node) -> dict[str, str]:
    """Bounds on the digits an index was read as (`row < M && col < N` with row = idx / N,
    col = idx % N) as a bound on the index itself (`idx < (M) * (N)`): the outermost digit
    bounded by the check, every other one by its modulus (a check may repeat it)."""
    if not early:
        return bounds
    from .radix import digits

    out = {name: bound for name, bound in bounds.items() if name in axes}
    where = f"line {statement.start_point.row + 1}"
    used: set[str] = set()
    for axis in axes:
        found = digits(early, axis)
        if not found:
            continue
        outer, inner = found[0], found[1:]
        if outer.extent is not None or outer.name not in bounds or axis in bounds:
            raise NotRead(f"{where}: the bounds check does not bound {axis} through its outermost digit")
        for digit in inner:
            checked = bounds.get(digit.name, digit.extent or "")
            if checked.replace(" ", "") != (digit.extent or "").replace(" ", ""):
                raise NotRead(f"{where}: {digit.name} < {bounds[digit.name]} leaves some of {axis}'s "
                              "threads out")
        out[axis] = f"({bounds[outer.name]}) * ({' * '.join(outer.divisor)})"
        used |= {d.name for d in found}
    if set(bounds) - set(axes) - used:
        raise NotRead(f"{where}: the bounds check names {', '.join(sorted(set(bounds) - set(axes) - used))}, "
                      "which is no digit of a thread index")
    return out


def _steps_by_grid(update: Node, name: str, env: dict[str, Node]) -> bool:
    """`i += blockDim.x * gridDim.x` (either order, or through a local such as `stride`)."""
    update = strip_parens(update)
    if update.type != "assignment_expression" or text(update.child_by_field_name("left")) != name:
        return False
    right = strip_parens(update.child_by_field_name("right"))
    if text(update.child_by_field_name("operator")) == "=":
        if right.type != "binary_expression" or text(right.child_by_field_name("operator")) != "+":
            return False
        sides = [strip_parens(right.child_by_field_name(s)) for s in ("left", "right")]
        if text(sides[0]) == name:
            right = sides[1]
        elif text(sides[1]) == name:
            right = sides[0]
        else:
            return False
    elif text(update.child_by_field_name("operator")) != "+=":
        return False
    return sorted(_factors(right, env) or []) == ["blockDim.x", "gridDim.x"]


def _grid_stride(loop: Node, env: dict[str, Node], prelude: tuple[Node, ...],
                 thread_names: frozenset[str]) -> Space:
    init = loop.child_by_field_name("initializer")
    declared = _declaration(init) if init is not None else None
    update = loop.child_by_field_name("update")
    condition = loop.child_by_field_name("condition")
    if declared is None or update is None or condition is None or global_axis(declared[2], env) != "x":
        raise NotRead("the kernel's loop is not a grid-stride loop over the thread index")
    name, kind = declared[0], declared[1]
    if not _steps_by_grid(update, name, env):
        raise NotRead(f"the grid-stride loop steps by {text(update)}, not blockDim.x * gridDim.x")
    bounds = _bounds(condition, {name: (kind, "x")}, upper=True)
    body_node = loop.child_by_field_name("body")
    if bounds is None or body_node is None:
        raise NotRead("the grid-stride loop's condition is not `index < bound`")
    body = named_statements(body_node) if body_node.type == "compound_statement" else [body_node]
    # the bound and the index are the loop's: a body that changes either (`n = n - 1;`,
    # `i += 2;`) walks other elements than the grid stride over 0..bound
    fixed = {name, *(text(n) for n in walk(condition) if n.type == "identifier")}
    for statement in body:
        for node in walk(statement):
            changed = assigned_identifier(node) or (
                text(node.child_by_field_name("argument")) if node.type == "update_expression" else None)
            if changed in fixed:
                raise NotRead(f"line {node.start_point.row + 1}: the grid-stride loop's body changes "
                              f"{changed}")
    return Space(prelude, (Axis(name, kind, bounds[name]),), tuple(body), thread_names)
