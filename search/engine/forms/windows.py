"""Window reductions: a thread per output that reads a small window of the input around
its coordinates (pooling, a depthwise or direct stencil), the way people write it:

    int col = i % W;  int row = (i / W) % H;  int plane = i / (W * H);   (or a 2-D/3-D grid)
    float acc = init;
    for (int dr = -1; dr <= 1; dr++)            // taps: counted loops of a fixed length
        for (int dc = -1; dc <= 1; dc++) {
            int r = row + dr, c = col + dc;     // an output coordinate plus a tap
            if (r >= 0 && r < H && ...) acc += x[...] * w[...];
        }
    y[i] = acc;

The form names the output's two fastest coordinates (`coordinates`: row, then column,
each with its extent), what the slower ones are worked out from (`setups`: declarations
over `optiml_rest`, the flat index of the planes), and the work as the kernel's own text
(`body`, without the coordinates' declarations), so a skeleton can hand several outputs
of a column to one thread with the index arithmetic done once. What makes it a window,
and not a row reduction read through digits: every loop of the work counts taps, a
number of them (at most MAX_TAPS) or a size from 0 (`kh < kernel_size`), and taps are
added to a coordinate (`row + dr`, `oh * stride - pad + kh * dilation`): some tap where
all are numbers, every tap bounded by a size. An addition that flattens two indices
(`b * K + k`, `k * J + j`) is not a window's: a loop over channels or down a column is
rows' or a contraction's.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import Any

from tree_sitter import Node

from ..rewrites.syntax import Kernel, strip_parens, text, walk
from .radix import Digit, read_digit
from .reading import _declaration, condition_of
from .types import WINDOW, Axis, Form, Refusal

MAX_TAPS = 32  # a loop of more iterations is a row, not a window's side
REST = "optiml_rest"  # the skeletons' name for the flat index of the planes


class NotWindow(ValueError):
    pass


def lift_window(kernel: Kernel, space, common: dict[str, Any]) -> Form | Refusal:
    from .lift import _text, form_fields

    try:
        coordinates, setups, declarations, rebuild = _coordinates(space)
        work = [s for s in space.body if s not in declarations]
        taps = _taps(work)
        extents = {c.name: c.bound for c in coordinates} | dict.fromkeys(_derived(work, coordinates), "")
        _window_access(work, taps, extents)
    except NotWindow as error:
        return Refusal(str(error), family=WINDOW)
    return Form(family=WINDOW, body=_text(work), coordinates=tuple(coordinates), setups=tuple(setups),
                rebuild=rebuild, notes=(f"taps: {' x '.join(taps.values())}",), **form_fields(common))


def _coordinates(space) -> tuple[list[Axis], list[str], list[Node], str]:
    """(row and column axes, declarations of the slower digits over optiml_rest, the
    statements those replace, the flat index's declaration or "")."""
    if len(space.axes) >= 2:  # a grid: its axes are the coordinates; a z plane is the rest
        if len(space.axes) > 3:
            raise NotWindow("more than three grid axes")
        setups = [f"const {a.ctype} {a.name} = ({a.ctype}){REST};" for a in space.axes[:-2]]
        return list(space.axes[-2:]), setups, [], ""
    axis = space.axes[0]
    found: list[tuple[Node, Digit]] = []
    partial: dict[str, tuple[str, ...]] = {}
    for statement in space.body:
        declared = _declaration(statement)
        read = read_digit(declared[2], axis.name, partial) if declared else None
        if read is None:
            continue
        if read[1] is None:
            partial[declared[0]] = read[0]
        found.append((statement, Digit(declared[0], declared[1].replace("const ", ""), read[0], read[1])))
    column = [d for _, d in found if not d.divisor and d.extent]
    if len(column) != 1:
        raise NotWindow("the flat index is not read as a column (`i % W`) and the coordinates above it")
    width = column[0].extent.split(" * ")
    row = [d for _, d in found if Counter(d.divisor) == Counter(width) and d.extent]
    if len(row) != 1:
        raise NotWindow(f"no row coordinate (`(i / {column[0].extent}) % H`) read from the flat index")
    plane = Counter(width) + Counter(row[0].extent.split(" * "))
    setups = []
    for _, digit in found:
        if digit in (column[0], row[0]):
            continue
        above = Counter(digit.divisor) - plane
        if Counter(digit.divisor) - above != plane:
            raise NotWindow(f"{digit.name} is read from the flat index other than through its planes")
        value = f"{REST} / ({' * '.join(sorted(above.elements()))})" if above else REST
        if digit.extent:
            value = f"({value}) % ({digit.extent})"
        setups.append(f"const {digit.ctype} {digit.name} = ({digit.ctype})({value});")
    if _assigned(space.body, {d.name for _, d in found} | {axis.name}):
        raise NotWindow("a coordinate or the flat index is assigned after it is read")
    rows = Axis(row[0].name, row[0].ctype, row[0].extent)
    columns = Axis(column[0].name, column[0].ctype, column[0].extent)
    rebuild = (f"const {axis.ctype} {axis.name} = ({axis.ctype})(({REST} * (long long)({rows.bound}) + "
               f"{rows.name}) * (long long)({columns.bound}) + {columns.name});")
    return [rows, columns], setups, [s for s, _ in found], rebuild


def _taps(work: list[Node]) -> dict[str, str]:
    """{counter: its number of taps (a number, or a kernel expression)}, outermost first."""
    taps = {}
    for node in (n for statement in work for n in walk(statement)):
        if node.type in ("while_statement", "do_statement"):
            raise NotWindow(f"line {node.start_point.row + 1}: a while loop in a window's work")
        if node.type == "for_statement":
            name, count = _count(node)
            taps[name] = count
    if not taps:
        raise NotWindow("no loop over a window")
    return taps


def _count(loop: Node) -> tuple[str, str]:
    where = f"line {loop.start_point.row + 1}"
    init, update = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
    declared = _declaration(init) if init is not None else None
    condition = strip_parens(condition_of(loop)) if condition_of(loop) is not None else None
    if declared is None or update is None or condition is None or condition.type != "binary_expression":
        raise NotWindow(f"{where}: a loop without a declared counter and a bound")
    name, start = declared[0], _number(declared[2])
    operator = text(condition.child_by_field_name("operator"))
    right = condition.child_by_field_name("right")
    if text(strip_parens(condition.child_by_field_name("left"))) != name or operator not in ("<", "<="):
        raise NotWindow(f"{where}: the loop's condition is not `{name} < bound`")
    if text(update).replace(" ", "") not in (f"++{name}", f"{name}++", f"{name}+=1"):
        raise NotWindow(f"{where}: the loop steps by {text(update)}, not by one")
    bound = _number(right)
    if start is None:
        raise NotWindow(f"{where}: the loop does not start at a number")
    if bound is None:  # a size: a window's side passed to the kernel (`k < kernel_size`)
        if start != 0 or operator != "<" or _names(right) & {name}:
            raise NotWindow(f"{where}: a loop bounded by a size must count from 0 to it")
        return name, text(right)
    count = bound - start + (operator == "<=")
    if not 1 <= count <= MAX_TAPS:
        raise NotWindow(f"{where}: {count} iterations, not a window's side (1..{MAX_TAPS})")
    return name, str(count)


def _number(node: Node) -> int | None:
    node = strip_parens(node)
    sign = 1
    if node.type == "unary_expression" and text(node.child_by_field_name("operator")) == "-":
        sign, node = -1, strip_parens(node.child_by_field_name("argument"))
    if node.type != "number_literal":
        return None
    try:
        return sign * int(text(node).rstrip("uUlL"), 0)
    except ValueError:
        return None


def _derived(work: list[Node], coordinates: list[Axis]) -> set[str]:
    """Locals declared from the coordinates before the loops (`int h0 = oh * 2 - 1;`)."""
    names = {c.name for c in coordinates}
    for statement in work:
        declared = _declaration(statement)
        if declared and _names(declared[2]) & names:
            names.add(declared[0])
    return names - {c.name for c in coordinates}


def _window_access(work: list[Node], taps: dict[str, str], extents: dict[str, str]) -> None:
    """A tap added to a coordinate (or to a local worked out from one) inside the loops,
    for every loop bounded by a size, and for some loop where all are numbers. An addition
    that flattens two indices is no window: `b * K + k` (the coordinate scaled by the
    loop's own bound: a row read through digits) or `k * J + j` (the counter scaled by
    the coordinate's extent: a column walked down)."""
    windowed = set()
    for node in (n for statement in work for n in walk(statement)):
        if node.type != "binary_expression" or text(node.child_by_field_name("operator")) not in ("+", "-"):
            continue
        terms = [(term, _names(term)) for term in _terms(node)]
        for (tap, tap_names), (_, at_names) in itertools.permutations(terms, 2):
            counters, coordinates = tap_names & set(taps), at_names & set(extents)
            if not counters or not coordinates or tap_names & set(extents) or at_names & set(taps) \
                    or not _product(tap):  # a tap's own term: the counter, scaled at most
                continue
            scaled_by_bound = any(not taps[t].isdigit() and _names_of(taps[t]) <= at_names for t in counters)
            walks_down = any(extents[c] and _names_of(extents[c]) <= tap_names for c in coordinates)
            if not scaled_by_bound and not walks_down:
                windowed |= counters
    sized = {t for t, count in taps.items() if not count.isdigit()}
    if not windowed:
        raise NotWindow("no tap is added to an output coordinate: the loops do not walk a window")
    if sized - windowed:
        raise NotWindow(f"the loop over {', '.join(sorted(sized - windowed))} is bounded by a size and walks "
                        "no window: a reduction (rows), not taps")


def _product(node: Node) -> bool:
    """Whether a term is names and numbers multiplied (`kh`, `kh * dilation`)."""
    return all(n.type in ("identifier", "number_literal", "parenthesized_expression", "binary_expression")
               and (n.type != "binary_expression" or text(n.child_by_field_name("operator")) == "*")
               for n in walk(node) if n.is_named)


def _terms(node: Node) -> list[Node]:
    """The terms of a sum (`a * s + b - c` -> a * s, b, c), through parentheses."""
    node = strip_parens(node)
    if node.type == "binary_expression" and text(node.child_by_field_name("operator")) in ("+", "-"):
        return _terms(node.child_by_field_name("left")) + _terms(node.child_by_field_name("right"))
    return [node]


def _names_of(c_text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", c_text))


def _names(node: Node) -> set[str]:
    return {text(n) for n in walk(node) if n.type == "identifier"}


def _assigned(body, names: set[str]) -> bool:
    for statement in body:
        for node in walk(statement):
            if node.type in ("assignment_expression", "update_expression"):
                target = node.child_by_field_name("left") or node.child_by_field_name("argument")
                if target is not None and text(target) in names:
                    return True
    return False
