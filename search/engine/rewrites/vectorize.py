"""vectorize_float4: four elements per thread through float4 loads and stores.

For an elementwise kernel (one thread per element, or a grid-stride loop) whose work is
straight-line code touching float pointers only as p[i], each thread handles elements
4v .. 4v+3 with one 16-byte load per input and one 16-byte store per output: a quarter of
the memory instructions. A scalar loop then handles the last n % 4 elements, so every n
works (the L0 sizes include n = 1, 1000, 4099, 65537).

float4 accesses need 16-byte alignment: the plan must pass the harness's own buffers,
which sit 4096 bytes (a multiple of 256) into their allocations
(profiling/harness/checks.py, GUARD_BYTES), and the kernel must not move the pointers.
Distinct buffers per pointer keep each element's reads and writes in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node, Tree

from profiling.harness.candidate import Candidate

from ..types import NodeContext
from .base import Rewritten, SiteRewrite, task_of
from .elementwise import IndexedBody, body_hazard, bound_expression, coverage_problem, find_indexed_body
from .plan import GRID_CAP, aliasing_problem, float32_buffers, launches_of, pointer_arguments
from .syntax import (
    Edit,
    Kernel,
    assigned_identifiers,
    find_kernels,
    identifiers,
    indent_at,
    operator,
    reblock,
    splice,
    text,
    walk,
)

LANES = "xyzw"
_HELPERS = ("vec_i", "vec_count", "vec_stride")


@dataclass(frozen=True)
class VectorSite:
    shape: IndexedBody
    accesses: tuple[Node, ...]  # every p[i] in the work
    loaded: tuple[str, ...]  # pointers read: loaded as float4 before the four elements
    stored: tuple[str, ...]  # pointers written: stored as float4 after them
    grids: dict[int, str]  # launch index -> its new grid


def access_role(access: Node, statement: Node) -> str:
    """"read", "write" (p[i] = ...), "update" (p[i] += ..., p[i]++), "nested" (an assignment
    inside a larger expression) or "address" (&p[i], or a reference bound to it)."""
    parent = access.parent
    if parent is None:
        return "read"
    if parent.type == "assignment_expression" and parent.child_by_field_name("left") == access:
        if parent.parent != statement:
            return "nested"
        return "write" if parent.child_by_field_name("operator").type == "=" else "update"
    if parent.type == "update_expression":
        return "update" if parent.parent == statement else "nested"
    # An address or a reference would reach the float4 copy, not memory: never vectorised.
    if parent.type == "pointer_expression" and operator(parent) == "&":
        return "address"
    declarator = parent.child_by_field_name("declarator") if parent.type == "init_declarator" else None
    return "address" if declarator is not None and declarator.type == "reference_declarator" else "read"


def _is_access(node: Node, index: str, pointers: set[str]) -> bool:
    base, indices = node.child_by_field_name("argument"), node.child_by_field_name("indices")
    inner = indices.named_children if indices is not None else []
    return (base is not None and base.type == "identifier" and text(base) in pointers
            and len(inner) == 1 and inner[0].type == "identifier" and text(inner[0]) == index)


REFUSED_ROLES = {"nested": "is assigned inside a larger expression", "address": "has its address taken"}


def _subscripts(statement: Node) -> list[Node]:
    return [n for n in walk(statement) if n.type == "subscript_expression"]


def _statement_problem(statement: Node, shape: IndexedBody, floats: set[str],
                       pointers: set[str]) -> str | None:
    """Why one statement of the work is not elementwise straight-line code, or None."""
    where = f"{shape.kernel.name} line {statement.start_point.row + 1}"
    if statement.type not in ("declaration", "expression_statement"):
        return f"{where}: the work has a {statement.type.replace('_', ' ')}, not straight-line code"
    for node in _subscripts(statement):
        if not _is_access(node, shape.index, floats):
            return f"{where}: {text(node)} is not <float pointer>[{shape.index}]"
        role = access_role(node, statement)
        if role in REFUSED_ROLES:
            return f"{where}: {text(node)} {REFUSED_ROLES[role]}"
    for node in identifiers(statement):
        parent = node.parent
        in_access = parent is not None and (parent.type == "subscript_argument_list" or (
            parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node))
        if text(node) in (pointers | {shape.index}) and not in_access:
            return f"{where}: {text(node)} is used other than in p[{shape.index}]"
    return None


def _accesses(shape: IndexedBody) -> tuple[list[Node], set[str], set[str]] | str:
    """Every p[i] in the work with the pointers read and written, or why the work is not elementwise."""
    # volatile accesses must happen one by one, as written: not vectorised.
    floats = {p.name for p in shape.kernel.pointer_params() if p.base_type == "float" and not p.volatile}
    pointers = {p.name for p in shape.kernel.pointer_params()}
    accesses, reads, writes = [], set(), set()
    for statement in (s for s in shape.statements if s.type != "comment"):
        problem = _statement_problem(statement, shape, floats, pointers)
        if problem:
            return problem
        for node in _subscripts(statement):
            role, name = access_role(node, statement), text(node.child_by_field_name("argument"))
            if role in ("read", "update"):
                reads.add(name)
            if role in ("write", "update"):
                writes.add(name)
            accesses.append(node)
    if not accesses:
        return f"{shape.kernel.name}: the work touches no p[{shape.index}]"
    return accesses, reads, writes


def _plan_problem(kernel: Kernel, pointers: set[str], candidate: Candidate,
                  context: NodeContext) -> str | None:
    aligned = float32_buffers(task_of(context), candidate)
    for index, launch in launches_of(candidate, kernel.name):
        problem = aliasing_problem(kernel, launch, index)
        if problem:
            return problem
        for param, buffer in pointer_arguments(kernel, launch).items():
            if param in pointers and buffer not in aligned:
                return f"launches[{index}] passes {buffer!r} to {param}: not a float32 buffer of the harness"
    moved = sorted(pointers & assigned_identifiers(kernel.body))
    return f"{kernel.name} moves the pointer {moved[0]}, so its alignment is unknown" if moved else None


def _names_problem(kernel: Kernel, pointers: set[str]) -> str | None:
    taken = {text(n) for n in identifiers(kernel.definition)}
    clash = (set(_HELPERS) | {f"{p}_f4" for p in pointers}) & taken
    return f"{kernel.name} already uses the name {sorted(clash)[0]}" if clash else None


def _grids(shape: IndexedBody, candidate: Candidate, context: NodeContext) -> dict[int, str] | str:
    grids = {}
    for index, launch in launches_of(candidate, shape.kernel.name):
        bound = bound_expression(shape, launch, task_of(context), candidate)
        block = str(launch.block[0]).strip()
        if bound is None:
            return f"cannot express the bound {text(shape.bound)!r} in the plan's sizes"
        block = block if block.isidentifier() or block.isdigit() else f"({block})"
        grid = f"cdiv({bound}, 4 * {block})"
        grids[index] = _within(launch.grid[0], grid) if shape.form == "grid_stride" else grid
    return grids


def _within(old: str | int, grid: str) -> str:
    """A grid-stride loop's grid, now needing a quarter of the threads: keep its cap."""
    cap = f", {GRID_CAP})"
    if isinstance(old, str) and old.startswith("min(") and old.endswith(cap):
        return f"min({grid}{cap}"
    return f"min({old}, {grid})"


def vector_site(kernel: Kernel, candidate: Candidate, context: NodeContext) -> VectorSite | str:
    shape = find_indexed_body(kernel)
    if isinstance(shape, str):
        return shape
    found = _accesses(shape)
    if isinstance(found, str):
        return found
    accesses, reads, writes = found
    pointers = reads | writes
    problem = (body_hazard(shape) or coverage_problem(shape, candidate, task_of(context))
               or _plan_problem(kernel, pointers, candidate, context) or _names_problem(kernel, pointers))
    if problem:
        return problem
    grids = _grids(shape, candidate, context)
    if isinstance(grids, str):
        return grids
    return VectorSite(shape, tuple(accesses), tuple(sorted(reads)), tuple(sorted(writes)), grids)


def four_lanes(source: bytes, work: tuple[Node, Node], accesses: tuple[Node, ...], loaded: tuple[str, ...],
               stored: tuple[str, ...], indent: str, index: str, unit: str,
               row: Callable[[str], str] = str) -> list[str]:
    """The lines of one step of four: a float4 load per pointer read, the work's statements
    (first..last) four times, each in its own block with p[...] read from or written to
    lane x, y, z or w of p_f4, and a float4 store per pointer written. `row(p)` is where
    pointer p's float4s start (p itself, or p plus an offset); `index` counts float4s."""
    first, last = work
    const = {p: "" if p in stored else "const " for p in loaded}
    lines = [f"{indent}{const[p]}float4 {p}_f4 = reinterpret_cast<{const[p]}float4*>({row(p)})[{index}];"
             for p in loaded]
    lines += [f"{indent}float4 {p}_f4;" for p in stored if p not in loaded]
    for number, lane in enumerate(LANES):
        edits = [Edit(a.start_byte, a.end_byte, f"{text(a.child_by_field_name('argument'))}_f4.{lane}")
                 for a in accesses]
        lines += [f"{indent}{{  // {unit} 4 * {index} + {number}",
                  reblock(source, first, last, indent + "    ", edits), f"{indent}}}"]
    lines += [f"{indent}reinterpret_cast<float4*>({row(p)})[{index}] = {p}_f4;" for p in stored]
    return lines


def render(source: bytes, site: VectorSite) -> str:
    shape = site.shape
    first, last = shape.statements[0], shape.statements[-1]
    indent, inner = indent_at(source, shape.start), indent_at(source, shape.start) + "    "
    kind, init, bound = shape.index_type, text(shape.init), text(shape.bound)
    return "\n".join([
        "// vectorize_float4: elements 4 * vec_i .. 4 * vec_i + 3 through one float4 per pointer",
        f"{indent}// (the harness's buffers are 256-byte aligned), then the last {bound} % 4 one by one.",
        f"{indent}const {kind} vec_count = ({bound}) / 4;",
        f"{indent}const {kind} vec_stride = ({kind})blockDim.x * gridDim.x;",
        f"{indent}for ({kind} vec_i = {init}; vec_i < vec_count; vec_i += vec_stride) {{",
        *four_lanes(source, (first, last), site.accesses, site.loaded, site.stored, inner, "vec_i",
                    "element"),
        f"{indent}}}",
        f"{indent}for ({kind} {shape.index} = 4 * vec_count + {init}; {shape.index} < {bound}; "
        f"{shape.index} += vec_stride) {{",
        reblock(source, first, last, inner),
        f"{indent}}}",
    ])


class VectorizeFloat4(SiteRewrite):
    name = "vectorize_float4"
    title = "float4 loads and stores, four elements per thread"
    families = ("vectorize",)

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate,
                   context: NodeContext) -> tuple[list[VectorSite], list[str]]:
        sites, reasons = [], []
        for kernel in find_kernels(tree):
            site = vector_site(kernel, candidate, context)
            (reasons if isinstance(site, str) else sites).append(site)
        return sites, reasons

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = [Edit(site.shape.start, site.shape.end, render(source, site)) for site in sites]
        plan: dict[str, Any] = candidate.plan_dict()
        for site in sites:
            for index, grid in site.grids.items():
                plan["launches"][index]["grid"] = [grid]
        kernels = ", ".join(site.shape.kernel.name for site in sites)
        rationale = (
            f"{kernels}: each thread loads and stores four consecutive floats as one float4, a quarter "
            "of the memory instructions, and a scalar loop handles the last n % 4 elements. The work is "
            "straight-line code touching each float pointer only at the element's index, the buffers are "
            "the harness's (256-byte aligned) and distinct, and the grid becomes cdiv(n, 4 * block)."
        )
        return Rewritten(splice(source, edits), plan, rationale)
