"""unroll: `#pragma unroll` before loops whose trip count is known at compile time.

With a constant trip count nvcc can unroll the loop fully: no loop counter, no branch,
and the independent iterations' loads in flight together (CUDA C++ Programming Guide,
"#pragma unroll"). The pragma never changes what the loop computes. Constants are number
literals, the candidate's tunables (passed as -DNAME=value) and `#define NAME <integer>`.
"""

from __future__ import annotations

from tree_sitter import Node, Tree

from profiling.harness import expr
from profiling.harness.candidate import Candidate

from ..types import NodeContext
from .base import Rewritten, SiteRewrite
from .plan import plan_expression
from .syntax import (
    Edit,
    assigned_identifiers,
    find_kernels,
    indent_of,
    operands,
    operator,
    splice,
    starts_line,
    strip_parens,
    text,
    walk,
)

# Full unrolling past this many iterations bloats the code (instruction cache misses,
# compile time) for little gain; such loops are left to nvcc's own heuristics.
MAX_TRIP_COUNT = 64
_COMPARISONS = {"<": lambda v, b: v < b, "<=": lambda v, b: v <= b,
                ">": lambda v, b: v > b, ">=": lambda v, b: v >= b, "!=": lambda v, b: v != b}


def source_constants(tree: Tree, candidate: Candidate) -> dict[str, int]:
    """Tunables and integer #defines: the names the compiler sees as constants."""
    constants = dict(candidate.tunables)
    for node in walk(tree.root_node):
        if node.type == "preproc_def":
            name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if name is not None and value is not None and text(value).strip().isdigit():
                constants.setdefault(text(name), int(text(value).strip()))
    return constants


def _constant(node: Node | None, constants: dict[str, int]) -> int | None:
    if node is None:
        return None
    translated = plan_expression(node, lambda name: str(constants[name]) if name in constants else None)
    if translated is None:
        return None
    try:
        return expr.evaluate_int(translated, {})
    except expr.ExpressionError:
        return None


def _loop_parts(loop: Node, constants: dict[str, int]) -> tuple[str, int, str, int, int] | str:
    """(variable, start, comparison, bound, step), or why the trip count is not constant."""
    init, condition, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    if init is None or condition is None or update is None:
        return "a for loop without initializer, condition or update"
    if init.type == "declaration" and len(init.children_by_field_name("declarator")) == 1:
        declarator = init.children_by_field_name("declarator")[0]
        variable = declarator.child_by_field_name("declarator")
        start_node = declarator.child_by_field_name("value")
    elif init.type == "assignment_expression" and operator(init) == "=":
        variable, start_node = init.child_by_field_name("left"), init.child_by_field_name("right")
    else:
        return f"its initializer {text(init)!r} is not one variable set to a value"
    name = text(variable) if variable is not None else ""
    condition = strip_parens(condition)
    if condition.type != "binary_expression" or operator(condition) not in _COMPARISONS or (
            text(operands(condition)[0]) != name):
        return f"its condition {text(condition)!r} does not compare {name} with a bound"
    bound_node = operands(condition)[1]
    start, bound = _constant(start_node, constants), _constant(bound_node, constants)
    if start is None or bound is None:
        unknown = text(start_node) if start is None and start_node is not None else text(bound_node)
        return f"its bound {unknown!r} is not a compile-time constant (a literal, tunable or #define)"
    step = _step(update, name, constants)
    if step is None:
        return f"its update {text(update)!r} is not a constant step of {name}"
    return name, start, operator(condition), bound, step


def _step(update: Node, name: str, constants: dict[str, int]) -> int | None:
    update = strip_parens(update)
    if update.type == "update_expression" and text(update.child_by_field_name("argument") or update) == name:
        return 1 if "++" in text(update) else -1
    if update.type == "assignment_expression" and text(update.child_by_field_name("left") or update) == name:
        step = _constant(update.child_by_field_name("right"), constants)
        if step is not None and operator(update) in ("+=", "-="):
            return step if operator(update) == "+=" else -step
    return None


def trip_count(loop: Node, constants: dict[str, int]) -> int | str:
    """The loop's iteration count, or why it is not a compile-time constant."""
    parts = _loop_parts(loop, constants)
    if isinstance(parts, str):
        return parts
    name, value, comparison, bound, step = parts
    body = loop.child_by_field_name("body")
    if body is not None and name in assigned_identifiers(body):
        return f"its body changes {name}"
    count = 0
    while _COMPARISONS[comparison](value, bound) and step != 0:
        count += 1
        value += step
        if count > MAX_TRIP_COUNT:
            return f"it runs more than {MAX_TRIP_COUNT} iterations"
    return count if count > 0 else "it never runs"


def _has_pragma(loop: Node) -> bool:
    previous = loop.prev_named_sibling
    while previous is not None and previous.type == "comment":
        previous = previous.prev_named_sibling
    return previous is not None and previous.type == "preproc_call" and "unroll" in text(previous)


def _placement_problem(source: bytes, loop: Node) -> str | None:
    if loop.parent is None or loop.parent.type != "compound_statement":
        return "it is not a statement of a { } block, where a pragma line can go"
    if not starts_line(source, loop):
        return "it shares its line with other code"
    return "it already has an unroll pragma" if _has_pragma(loop) else None


class Unroll(SiteRewrite):
    name = "unroll"
    title = "#pragma unroll on constant-trip-count loops"
    families = ("unroll",)
    no_sites = "no for loops in the kernels"

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate,
                   context: NodeContext) -> tuple[list[tuple[Node, int]], list[str]]:
        constants = source_constants(tree, candidate)
        sites, reasons = [], []
        for kernel in find_kernels(tree):
            for loop in (n for n in walk(kernel.body) if n.type == "for_statement"):
                where = f"{kernel.name} line {loop.start_point.row + 1}"
                count = trip_count(loop, constants)
                problem = count if isinstance(count, str) else _placement_problem(source, loop)
                if problem:
                    reasons.append(f"{where}: {problem}")
                else:
                    sites.append((loop, count))
        return sites, reasons

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = [Edit(loop.start_byte, loop.start_byte, f"#pragma unroll\n{indent_of(source, loop)}")
                 for loop, _ in sites]
        loops = ", ".join(f"line {loop.start_point.row + 1} ({count} iterations)" for loop, count in sites)
        rationale = (f"Loops with a compile-time trip count, {loops}, are unrolled fully: no counter or "
                     "branch per iteration, and their independent loads can be in flight together.")
        return Rewritten(splice(source, edits), None, rationale)

