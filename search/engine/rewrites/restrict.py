"""restrict: `const ... __restrict__` on pointer parameters a kernel only reads.

A read-only, non-aliased pointer lets the compiler keep loads in registers across
stores and route them through the read-only data cache (CUDA C++ Best Practices Guide,
"Restricted pointers"). Both promises are checked: the kernel never writes through the
pointer or any pointer derived from it, never lets it escape (a call, a cast, a store),
and every launch passes distinct buffers to distinct pointer parameters.
"""

from __future__ import annotations

from tree_sitter import Node, Tree

from profiling.harness.candidate import Candidate

from ..types import NodeContext
from .base import Rewritten, SiteRewrite, task_of
from .plan import aliasing_problem, argument_problem, launches_of
from .syntax import (
    Edit,
    Kernel,
    Param,
    declared_name,
    defined_functions,
    find_kernels,
    identifiers,
    operator,
    prototyped,
    splice,
    text,
)

# Read-only load intrinsics that take a `const T*` (CUDA C++ Programming Guide, "Read-Only
# Data Cache Load Function", "Load Functions Using Cache Hints").
_LOAD_INTRINSICS = frozenset({"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"})
_COMPARISONS = frozenset({"==", "!=", "<", ">", "<=", ">="})

Use = tuple[str, str]  # ("read" | "write" | "alias" | "escape", detail)


def _line(node: Node) -> int:
    return node.start_point.row + 1


def _access(node: Node, functions: set[str]) -> Use:
    """How memory reached through a pointer (p[i], *p, p->f) is used: read or written."""
    current = node
    while current.parent is not None and (
        current.parent.type == "parenthesized_expression"
        or (current.parent.type in ("field_expression", "subscript_expression")
            and current.parent.child_by_field_name("argument") == current)
    ):
        current = current.parent
    parent = current.parent
    if parent is None:
        return "read", ""
    if (parent.type == "assignment_expression" and parent.child_by_field_name("left") == current) or (
            parent.type == "update_expression"):
        return "write", f"line {_line(parent)}: {text(parent)}"
    if parent.type == "pointer_expression" and operator(parent) == "&":
        return _pointer_use(parent, functions)
    if parent.type == "init_declarator" and (d := parent.child_by_field_name("declarator")) and (
            d.type == "reference_declarator"):
        return "escape", f"is bound to the reference {declared_name(d)} (line {_line(parent)})"
    if parent.type == "argument_list":
        callee = parent.parent.child_by_field_name("function") if parent.parent else None
        if callee is None or callee.type != "identifier" or text(callee) in functions:
            return "escape", f"is passed to {text(callee) if callee else 'a call'} (line {_line(parent)}), " \
                             "which might take it by reference"
    return "read", ""


def _is_const_reinterpret(callee: Node | None) -> bool:
    """reinterpret_cast<const T*>: a view of the same memory that still cannot write it."""
    if callee is None or callee.type != "template_function":
        return False
    name, arguments = callee.child_by_field_name("name"), callee.child_by_field_name("arguments")
    return (name is not None and text(name) == "reinterpret_cast" and arguments is not None
            and text(arguments).removeprefix("<").lstrip().startswith("const "))


def _pointer_use(node: Node, functions: set[str]) -> Use:
    """How a pointer value is used, climbing through parentheses and pointer arithmetic."""
    current = node
    while True:
        parent = current.parent
        if parent is None:
            return "escape", "is used outside any expression"
        kind, where = parent.type, f"line {_line(parent)}"
        arithmetic = kind == "binary_expression" and operator(parent) in ("+", "-")
        if kind == "parenthesized_expression" or arithmetic:
            current = parent
            continue
        if kind == "binary_expression" and operator(parent) in _COMPARISONS:
            return "read", ""
        if kind == "subscript_expression" and parent.child_by_field_name("argument") == current:
            return _access(parent, functions)
        if kind == "pointer_expression" and operator(parent) == "*":
            return _access(parent, functions)
        if kind == "field_expression" and operator(parent) == "->":
            return _access(parent, functions)
        moved = kind == "assignment_expression" and operator(parent) in ("+=", "-=")
        if kind == "update_expression" or (moved and parent.child_by_field_name("left") == current):
            return "read", ""  # the pointer itself moves; what it points to is untouched
        if kind == "init_declarator" and parent.child_by_field_name("value") == current:
            return "alias", declared_name(parent)
        if kind == "assignment_expression" and operator(parent) == "=" and (
                parent.child_by_field_name("right") == current):
            left = parent.child_by_field_name("left")
            if left is not None and left.type == "identifier":
                return "alias", text(left)
            return "escape", f"is stored in memory ({where})"
        if kind == "argument_list":
            callee = parent.parent.child_by_field_name("function") if parent.parent else None
            name = text(callee) if callee is not None else "a call"
            if _is_const_reinterpret(callee) and parent.parent is not None:
                current = parent.parent  # the same memory, viewed as another const type
                continue
            return ("read", "") if name in _LOAD_INTRINSICS else ("escape", f"is passed to {name} ({where})")
        return "escape", f"is used in a {kind.replace('_', ' ')} ({where})"


def _is_declared_here(node: Node) -> bool:
    """The identifier a declarator introduces (`p` in `const float* p = ...`), not a use."""
    parent = node.parent
    return parent is not None and parent.child_by_field_name("declarator") == node


def _non_const_alias(kernel: Kernel, name: str) -> bool:
    """A derived pointer declared without const would not compile once the parameter is const."""
    for node in identifiers(kernel.body):
        parent = node.parent
        if text(node) == name and parent is not None and _is_declared_here(node):
            declaration = parent
            while declaration is not None and declaration.type != "declaration":
                declaration = declaration.parent
            if declaration is None:
                continue
            qualifiers = {text(c) for c in declaration.named_children if c.type == "type_qualifier"}
            kind = declaration.child_by_field_name("type")
            return "const" not in qualifiers and (kind is None or text(kind) != "auto")
    return False


def read_only_problem(kernel: Kernel, param: Param, functions: set[str]) -> str | None:
    """None when nothing writes through `param` or a pointer derived from it."""
    aliases, settled = {param.name}, False
    while not settled:
        settled = True
        for node in list(identifiers(kernel.body)):
            if text(node) not in aliases or _is_declared_here(node):
                continue
            use, detail = _pointer_use(node, functions)
            if use == "write":
                return f"is written through ({detail})"
            if use == "escape":
                return detail
            if use == "alias" and detail not in aliases:
                if not param.const and _non_const_alias(kernel, detail):
                    return f"is copied into {detail}, which is not declared const"
                aliases.add(detail)
                settled = False
    return None


class Restrict(SiteRewrite):
    name = "restrict"
    title = "const __restrict__ on read-only pointers"
    families = ("restrict",)
    no_sites = "no pointer parameters"

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext
                   ) -> tuple[list[tuple[Kernel, Param]], list[str]]:
        task_of(context)  # an unknown task raises here, before any analysis
        functions = defined_functions(tree.root_node)
        sites, reasons = [], []
        for kernel in find_kernels(tree):
            launches = launches_of(candidate, kernel.name)
            plan_problem = next((p for i, launch in launches for p in (
                argument_problem(kernel, launch, i), aliasing_problem(kernel, launch, i)) if p), None)
            if prototyped(tree, kernel.name):
                plan_problem = f"{kernel.name} is also declared separately, whose signature would differ"
            if not launches or plan_problem:
                reasons.append(plan_problem or f"{kernel.name} is not launched by the plan")
                continue
            for param in kernel.pointer_params():
                problem = "is already __restrict__" if param.restrict else read_only_problem(
                    kernel, param, functions)
                if problem:
                    reasons.append(f"{kernel.name}: {param.name} {problem}")
                else:
                    sites.append((kernel, param))
        return sites, reasons

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = []
        for _, param in sites:
            if not param.const:
                edits.append(Edit(param.declaration.start_byte, param.declaration.start_byte, "const "))
            target = param.pointer.child_by_field_name("declarator") if param.pointer else None
            if target is not None:
                edits.append(Edit(target.start_byte, target.start_byte, "__restrict__ "))
        names = ", ".join(f"{kernel.name}.{param.name}" for kernel, param in sites)
        rationale = (
            f"{names} {'is' if len(sites) == 1 else 'are'} only read, so declared const __restrict__: "
            "the compiler may keep those loads in registers across stores and serve them from the "
            "read-only data cache. Checked: no write, atomic, call, cast or store reaches them or a "
            "pointer derived from them, and every launch passes distinct buffers to distinct pointers."
        )
        return Rewritten(splice(source, edits), None, rationale)
