"""fast_math: compile with --use_fast_math when the tolerance allows and it would matter.

--use_fast_math maps expf, logf, sinf, cosf, powf (and friends) to hardware intrinsics,
makes single-precision division and square root approximate and flushes denormals to
zero (nvcc documentation, "--use_fast_math"). It is proposed only when the task's
tolerance admits that error (`tolerance_allows_fast_math`) and the kernels use one of
those operations; the rationale names which.
"""

from __future__ import annotations

from tree_sitter import Node, Tree

from profiling.harness.candidate import Candidate

from ..types import NodeContext
from .base import Rewritten
from .syntax import Kernel, find_kernels, operands, operator, strip_parens, text, walk

FLAG = "--use_fast_math"
# The functions --use_fast_math replaces by intrinsics (CUDA C++ Programming Guide,
# "Intrinsic Functions": __expf, __logf, __sinf, ...), plus sqrtf (-prec-sqrt=false).
FAST_FUNCTIONS = frozenset({
    "expf", "exp2f", "exp10f", "logf", "log2f", "log10f", "sinf", "cosf", "tanf", "sincosf", "powf",
    "sqrtf", "rsqrtf", "__fdividef", "erff", "tanhf",
})
_FLOAT_TYPES = frozenset({"float", "double"})


def _scalar_name(declarator: Node) -> str | None:
    """`x` for `float x` or `float x = ...`; None for pointers and arrays."""
    if declarator.type == "init_declarator":
        declarator = declarator.child_by_field_name("declarator") or declarator
    return text(declarator) if declarator.type == "identifier" else None


def _float_names(kernel: Kernel) -> set[str]:
    """Parameters and locals declared float: a division by one is a float division."""
    names = {p.name for p in kernel.params if p.pointer is None and p.base_type in _FLOAT_TYPES}
    for declaration in (n for n in walk(kernel.body) if n.type == "declaration"):
        kind = declaration.child_by_field_name("type")
        if kind is not None and text(kind) in _FLOAT_TYPES:
            declarators = declaration.children_by_field_name("declarator")
            names |= {name for d in declarators if (name := _scalar_name(d))}
    return names


def _is_float(node: Node, floats: set[str]) -> bool:
    node = strip_parens(node)
    if node.type == "number_literal":
        return any(c in text(node) for c in ".fFeE") and not text(node).lower().startswith("0x")
    if node.type == "identifier":
        return text(node) in floats
    if node.type == "call_expression":
        function = node.child_by_field_name("function")
        return function is not None and text(function) in FAST_FUNCTIONS
    if node.type == "cast_expression":
        kind = node.child_by_field_name("type")
        return kind is not None and text(kind) in _FLOAT_TYPES
    if node.type == "binary_expression" and operator(node) in ("+", "-", "*", "/"):
        return any(_is_float(side, floats) for side in operands(node))
    return False


def fast_math_uses(tree: Tree) -> list[str]:
    """What --use_fast_math would change, e.g. ["expf (2)", "float division (1)"]."""
    counts: dict[str, int] = {}
    for kernel in find_kernels(tree):
        floats = _float_names(kernel)
        for node in walk(kernel.body):
            function = node.child_by_field_name("function") if node.type == "call_expression" else None
            if function is not None and text(function) in FAST_FUNCTIONS:
                counts[text(function)] = counts.get(text(function), 0) + 1
            elif operator(node) in ("/", "/=") and any(_is_float(side, floats) for side in operands_of(node)):
                counts["float division"] = counts.get("float division", 0) + 1
    return [f"{name} ({count})" for name, count in sorted(counts.items())]


def operands_of(node: Node) -> tuple[Node, ...]:
    """The two sides of a binary expression or an assignment (none for anything else)."""
    if node.type not in ("binary_expression", "assignment_expression"):
        return ()
    sides = (node.child_by_field_name("left"), node.child_by_field_name("right"))
    return tuple(n for n in sides if n is not None)


class FastMath:
    name = "fast_math"
    title = "--use_fast_math"
    families = ("fast_math",)

    def precondition(self, tree: Tree, source: bytes, candidate: Candidate,
                     context: NodeContext) -> str | None:
        if not context.tolerance_allows_fast_math:
            return "the task's tolerance does not allow approximate math"
        if any(option.lstrip("-") == FLAG.lstrip("-") for option in candidate.compile_options):
            return "--use_fast_math is already on"
        if not fast_math_uses(tree):
            return "the kernels use no transcendental function, square root or float division"
        return None

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        plan = candidate.plan_dict()
        plan["compile_options"] = [*plan["compile_options"], FLAG]
        rationale = (f"The kernels use {', '.join(fast_math_uses(tree))}; --use_fast_math turns these into "
                     "hardware intrinsics and approximate division and square root, which the task's "
                     "tolerance admits.")
        return Rewritten(source.decode(), plan, rationale)
