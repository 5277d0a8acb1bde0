"""One flat thread index read as several coordinates, the way people write it:

    int p = idx % HW;            int rest = idx / HW;
    int k = (idx / HW) % K;  or  int k = rest % K;
    int n = idx / (HW * K);      int n = rest / K;

Each coordinate is a digit of a mixed-radix number: `(index / divisor) % extent`, the
outermost without the `% extent`. The digits are read only when they chain exactly (each
divisor the product of the extents of the digits inside it, as factor names, in any
order), so the flat index is `((n * K) + k) * HW + p` again (`rebuild`); anything else
is not a decomposition and the kernel is read as it is written.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tree_sitter import Node

from ..rewrites.syntax import strip_parens, text, walk
from .reading import _declaration
from .types import Axis


@dataclass(frozen=True)
class Digit:
    name: str
    ctype: str
    divisor: tuple[str, ...]  # the factors the flat index is divided by first (sorted)
    extent: str | None  # the modulus; None for the outermost digit


def _product(node: Node) -> list[str] | None:
    """The factors of a product of names and numbers, or None."""
    node = strip_parens(node)
    if node.type == "cast_expression":
        node = strip_parens(node.child_by_field_name("value"))
    if node.type == "binary_expression" and text(node.child_by_field_name("operator")) == "*":
        left, right = (_product(node.child_by_field_name(s)) for s in ("left", "right"))
        return None if left is None or right is None else left + right
    if node.type in ("identifier", "number_literal"):
        return [text(node)]
    return None


Read = tuple[tuple[str, ...], str | None]  # (divisor factors, extent or None)


def read_digit(value: Node, index: str, partial: dict[str, tuple[str, ...]]) -> Read | None:
    """(divisor, extent) when `value` is index / D, index % E, (index / D) % E, or one of
    those taken of a local already read as index / D (`partial`)."""
    value = strip_parens(value)
    if value.type == "cast_expression":
        value = strip_parens(value.child_by_field_name("value"))
    if value.type == "identifier":
        name = text(value)
        return ((), None) if name == index else ((partial[name], None) if name in partial else None)
    if value.type != "binary_expression":
        return None
    op = text(value.child_by_field_name("operator"))
    left, right = value.child_by_field_name("left"), value.child_by_field_name("right")
    base = read_digit(left, index, partial)
    if base is None or base[1] is not None:
        return None
    factors = _product(right)
    if factors is None:
        return None
    if op == "/":
        return tuple(sorted(base[0] + tuple(factors))), None
    if op == "%":
        return base[0], " * ".join(factors)
    return None


def partials(body, index: str) -> dict[str, tuple[str, ...]]:
    """The locals `body` declares as `index / D` (no modulus): {name: divisor}."""
    found: dict[str, tuple[str, ...]] = {}
    for statement in body:
        declared = _declaration(statement)
        read = read_digit(declared[2], index, found) if declared else None
        if read is not None and read[1] is None:
            found[declared[0]] = read[0]
    return found


def digits(body: tuple[Node, ...] | list[Node], index: str) -> list[Digit]:
    """The coordinates `body`'s leading declarations read from the flat `index`, outermost
    first, or [] when they do not chain into one mixed-radix number."""
    partial: dict[str, tuple[str, ...]] = {}
    found: dict[str, Digit] = {}
    bases: set[str] = set()
    for statement in body:
        declared = _declaration(statement)
        if declared is None:
            continue
        name, kind, value = declared
        read = read_digit(value, index, partial)
        if read is None:
            continue
        if read[1] is None:
            partial[name] = read[0]
        bases |= {text(n) for n in walk(value) if n.type == "identifier" and text(n) in partial}
        found[name] = Digit(name, kind.replace("const ", ""), read[0], read[1])
    chosen = [d for name, d in found.items() if name not in bases]
    if any(_assigned(body, d.name) for d in found.values()):
        return []
    return _chain(chosen)


def _chain(found: list[Digit]) -> list[Digit]:
    ordered, inside = [], Counter()
    left = list(found)
    while left:
        step = next((d for d in left if Counter(d.divisor) == inside), None)
        if step is None:
            return []
        ordered.append(step)
        left.remove(step)
        if step.extent is None:
            if left:
                return []
            break
        inside += Counter(step.extent.split(" * "))
    return ordered[::-1] if len(ordered) >= 2 else []


def _assigned(body, name: str) -> bool:
    for statement in body:
        for node in walk(statement):
            if node.type in ("assignment_expression", "update_expression"):
                target = node.child_by_field_name("left") or node.child_by_field_name("argument")
                if target is not None and text(target) == name:
                    return True
    return False


def coordinates(axis: Axis, found: list[Digit]) -> list[Axis]:
    """The digits as axes (outermost first), each with its extent as a kernel expression."""
    out = []
    for digit in found:
        if digit.extent is not None:
            extent = digit.extent
        else:
            extent = f"({axis.bound}) / ({' * '.join(digit.divisor)})" if digit.divisor else axis.bound
        out.append(Axis(digit.name, digit.ctype, extent))
    return out


def rebuild(axis: Axis, found: list[Digit]) -> str:
    """The flat index from its digits: `const int idx = (int)((n * (K) + k) * (HW) + p);`."""
    value = f"(long long)({found[0].name})"
    for digit in found[1:]:
        value = f"({value} * (long long)({digit.extent}) + {digit.name})"
    return f"const {axis.ctype} {axis.name} = ({axis.ctype})({value});"


def divisible(axis: Axis, found: list[Digit]) -> tuple[str, str] | None:
    """(bound, product of the inner extents) when the outermost digit's extent is the
    bound divided by them: the bound must be a multiple at every size."""
    outer = found[0]
    if outer.extent is not None or not outer.divisor:
        return None
    return axis.bound, " * ".join(outer.divisor)


def decomposed(space) -> bool:
    """Whether a one-axis space's work starts by reading its index as two or more digits."""
    return len(space.axes) == 1 and len(digits(space.body, space.axes[0].name)) >= 2
