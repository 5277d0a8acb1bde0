"""vectorize_rows: float4 loads and stores in the loops a block strides over a row.

block_per_row (and many hand-written row kernels) leave loops of this shape:

    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        sum += expf(in[j] - row_max);          // straight-line work on in[j], out[j], ...
    }

Each thread then issues one 4-byte load per pointer and column. Here, where every pointer
the loop touches is 16-byte aligned (checked at run time: a row's start is aligned only
when its length is a multiple of 4), each thread takes four consecutive columns at once,
through one float4 load per pointer read and one float4 store per pointer written, and a
scalar loop handles the columns past the last multiple of four. A row that is not
aligned runs the original loop. A quarter of the memory instructions, and four times the
bytes in flight per load (CUDA C++ Best Practices Guide, "Coalesced Access to Global
Memory"; the same idea as vectorize_float4, for strided row loops with accumulators).

What this changes, and why it is safe:
- Which thread handles which column. So a pointer the loop writes must be touched nowhere
  else in the kernel (nor the parameter it was derived from), or another loop could read
  a column another thread wrote, without a barrier. Accumulators see their columns in
  another order: fp32 sums are added in another order (the task's fp32 tolerance admits
  it; max and min are exact), and whatever combines them afterwards (a block reduction)
  is unchanged.
- Nothing else. The work is straight-line code (declarations and expression statements,
  no calls that depend on the thread or reach memory behind our back), touching float
  pointers only as p[j], never j or a pointer otherwise, and the bound does not change
  inside the loop. Two pointers given one buffer are refused (the plan's aliasing check).
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node, Tree

from profiling.harness.candidate import Candidate

from ..types import NodeContext
from .base import Rewritten, SiteRewrite
from .plan import aliasing_problem, launches_of
from .rows import THREAD_SENSITIVE_CALLS
from .syntax import (
    INTEGER_TYPES,
    THREAD_BUILTINS,
    Edit,
    Kernel,
    assigned_identifiers,
    declared_name,
    defined_functions,
    find_kernels,
    identifiers,
    indent_of,
    is_builtin,
    named_statements,
    operands,
    operator,
    reblock,
    splice,
    strip_parens,
    text,
    walk,
)
from .vectorize import REFUSED_ROLES, access_role, four_lanes

_HELPERS = ("vec_c", "vec_n")


@dataclass(frozen=True)
class RowLoop:
    loop: Node  # the for_statement
    variable: str  # j
    kind: str  # its type, `int`
    bound: Node  # N in `j < N`
    statements: tuple[Node, ...]  # the work
    accesses: tuple[Node, ...]  # every p[j] in it
    loaded: tuple[str, ...]  # pointers read (or updated): one float4 load each
    stored: tuple[str, ...]  # pointers written (or updated): one float4 store each
    offsets: dict[str, str]  # pointer -> E of p[E + j] ("" for p[j])

    def row(self, pointer: str) -> str:
        """Where the pointer's row starts: `p`, or `(p + (E))`."""
        offset = self.offsets[pointer]
        return f"({pointer} + ({offset}))" if offset else pointer


@dataclass(frozen=True)
class RowVectorSite:
    kernel: Kernel
    loops: tuple[RowLoop, ...]


def float_pointers(kernel: Kernel) -> dict[str, Node | None]:
    """The kernel's float pointers the rewrite may vectorise: name -> the local declaration
    that derives it (`const float* in = x + row * N;`), or None for a parameter. Volatile
    ones (each access as written) and ones the kernel moves (alignment unknown) are left out."""
    found: dict[str, Node | None] = {p.name: None for p in kernel.pointer_params()
                                     if p.base_type == "float" and not p.volatile}
    for declaration in (n for n in walk(kernel.body) if n.type == "declaration"):
        base = declaration.child_by_field_name("type")
        qualifiers = {text(c) for c in declaration.named_children if c.type == "type_qualifier"}
        declarators = declaration.children_by_field_name("declarator")
        if base is None or text(base) != "float" or "volatile" in qualifiers or len(declarators) != 1:
            continue
        declarator = declarators[0]
        inner = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else None
        if inner is not None and inner.type == "pointer_declarator" and (
                (name := inner.child_by_field_name("declarator")) is not None and name.type == "identifier"):
            found[text(name)] = declaration
    moved = assigned_identifiers(kernel.body)
    return {name: where for name, where in found.items() if name not in moved}


def _loop_header(loop: Node) -> tuple[str, str, Node] | str:
    """(j, its type, the bound) of `for (T j = threadIdx.x; j < bound; j += blockDim.x)`."""
    init, condition, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    if init is None or condition is None or update is None or init.type != "declaration":
        return "not a loop that declares its variable, tests it and steps it"
    kind = init.child_by_field_name("type")
    declarators = init.children_by_field_name("declarator")
    if kind is None or text(kind) not in INTEGER_TYPES or len(declarators) != 1 or (
            declarators[0].type != "init_declarator"):
        return "its variable is not one integer"
    variable = declared_name(declarators[0])
    start = declarators[0].child_by_field_name("value")
    if start is None or not is_builtin(start, "threadIdx"):
        return "it does not start at threadIdx.x"
    condition = strip_parens(condition)
    if condition.type != "binary_expression" or operator(condition) != "<" or (
            text(strip_parens(operands(condition)[0])) != variable):
        return f"its test is not {variable} < bound"
    step = strip_parens(update)
    if step.type != "assignment_expression" or operator(step) != "+=" or (
            text(step.child_by_field_name("left")) != variable
            or not is_builtin(step.child_by_field_name("right"), "blockDim")):
        return f"it does not step by {variable} += blockDim.x"
    return variable, text(kind), operands(condition)[1]


def row_loop(loop: Node, pointers: set[str], functions: set[str]) -> RowLoop | str:
    """The loop as a RowLoop, or why it is not a block-strided row loop this can vectorise.
    `functions`: those the file defines (their effects are not analysed: refused)."""
    header = _loop_header(loop)
    if isinstance(header, str):
        return header
    variable, kind, bound = header
    body = loop.child_by_field_name("body")
    if body is None or body.type != "compound_statement":
        return "its body is not a block"
    statements = tuple(named_statements(body))
    changed = set().union(*(assigned_identifiers(s) for s in statements))
    in_bound = {text(n) for n in identifiers(bound)}
    if variable in in_bound or changed & in_bound:
        return f"its bound {text(bound)} changes inside the loop"
    if any(n.type in ("call_expression", "assignment_expression", "update_expression") for n in walk(bound)):
        return f"its bound {text(bound)} is not a plain expression"
    accesses: list[Node] = []
    loaded: set[str] = set()
    stored: set[str] = set()
    offsets: dict[str, str] = {}
    for statement in statements:
        problem = _statement_problem(statement, variable, pointers, functions, offsets)
        if problem:
            return f"line {statement.start_point.row + 1}: {problem}"
        for node in (n for n in walk(statement) if n.type == "subscript_expression"):
            role, name = access_role(node, statement), text(node.child_by_field_name("argument"))
            if role in ("read", "update"):
                loaded.add(name)
            if role in ("write", "update"):
                stored.add(name)
            accesses.append(node)
    if not accesses:
        return f"it touches no float pointer at [{variable}]"
    in_offsets = {text(n) for a in accesses for n in identifiers(a.child_by_field_name("indices"))}
    moving = (changed - {variable}) & in_offsets
    if moving:
        return f"the column offset's {sorted(moving)[0]} changes inside the loop"
    return RowLoop(loop, variable, kind, bound, statements, tuple(accesses), tuple(sorted(loaded)),
                   tuple(sorted(stored)), offsets)


def column_offset(index: Node, variable: str) -> str | None:
    """"" for `j`, "E" for `E + j` or `j + E` (E free of j), else None: the column's offset
    from the pointer, so p[row * N + j] reads the row that starts at p + (row * N)."""
    index = strip_parens(index)
    if index.type == "identifier":
        return "" if text(index) == variable else None
    if index.type != "binary_expression" or operator(index) != "+":
        return None
    left, right = (strip_parens(n) for n in operands(index))
    for mine, other in ((left, right), (right, left)):
        if mine.type == "identifier" and text(mine) == variable and variable not in {
                text(n) for n in identifiers(other)}:
            return text(other)
    return None


def _statement_problem(statement: Node, variable: str, pointers: set[str], functions: set[str],
                       offsets: dict[str, str]) -> str | None:
    """Why one statement of the work is not straight-line code on p[j] (or p[E + j]) alone,
    or None; each pointer's offset E goes into `offsets` (one per pointer and loop)."""
    if statement.type not in ("declaration", "expression_statement"):
        return f"the work has a {statement.type.replace('_', ' ')}, not straight-line code"
    accepted: list[Node] = []  # the subscripts' indices, checked as a whole
    bases: set[tuple[int, int]] = set()  # and their pointers
    for node in walk(statement):
        if (node.start_byte, node.end_byte) in bases and node.type == "identifier":
            continue
        if any(_inside(node, part) for part in accepted):
            if node.type == "identifier" and text(node) in pointers:
                return f"{text(node)} is used in a column's index"
            continue
        if node.type == "call_expression":
            name = text(node.child_by_field_name("function"))
            if name.startswith(THREAD_SENSITIVE_CALLS) or "::" in name or name in functions:
                return f"it calls {name}, whose effects are not analysed"
        elif node.type == "subscript_expression":
            base, indices = node.child_by_field_name("argument"), node.child_by_field_name("indices")
            inner = indices.named_children if indices is not None else []
            offset = column_offset(inner[0], variable) if len(inner) == 1 else None
            if base is None or base.type != "identifier" or text(base) not in pointers or offset is None:
                return f"{text(node)} is not <float pointer>[{variable}] or [offset + {variable}]"
            if offsets.setdefault(text(base), offset) != offset:
                return f"{text(base)} is used at two offsets: {offsets[text(base)] or '0'}, {offset or '0'}"
            role = access_role(node, statement)
            if role in REFUSED_ROLES:
                return f"{text(node)} {REFUSED_ROLES[role]}"
            accepted.append(indices)
            bases.add((base.start_byte, base.end_byte))
        elif node.type == "identifier" and text(node) in pointers | {variable}:
            return f"{text(node)} is used other than in p[{variable}]"
        elif node.type == "identifier" and text(node) in THREAD_BUILTINS:
            return f"it reads {text(node)}: its columns move to other threads"
    return None


def _inside(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _written_elsewhere(kernel: Kernel, loop: RowLoop, pointers: dict[str, Node | None]) -> str | None:
    """A pointer the loop writes, or the pointer parameter it is derived from, used outside
    the loop (its own declaration aside): the new column-to-thread mapping could then race."""
    for name in loop.stored:
        declaration = pointers[name]
        own = [declaration] if declaration is not None else []
        derived_from = set() if declaration is None else {
            text(n) for n in identifiers(declaration)
            if (param := kernel.param(text(n))) is not None and param.pointer is not None}
        for node in identifiers(kernel.body):
            if any(_inside(node, where) for where in (loop.loop, *own)):
                continue
            if text(node) == name:
                return f"{name} is written in the loop and used elsewhere in the kernel"
            if text(node) in derived_from:
                return f"{name} writes into {text(node)}, which the kernel also uses elsewhere"
    return None


def vector_rows_site(kernel: Kernel, candidate: Candidate, functions: set[str]) -> RowVectorSite | str:
    pointers = float_pointers(kernel)
    loops, reasons = [], []
    for node in (n for n in walk(kernel.body) if n.type == "for_statement"):
        found = row_loop(node, set(pointers), functions)
        problem = found if isinstance(found, str) else _written_elsewhere(kernel, found, pointers)
        if problem:
            reasons.append(f"the loop on line {node.start_point.row + 1}: {problem}")
        else:
            loops.append(found)
    if not loops:
        return f"{kernel.name}: " + ("; ".join(reasons) if reasons else "no loop strides by blockDim.x")
    taken = {text(n) for n in identifiers(kernel.definition)}
    clash = (set(_HELPERS) | {f"{p}_f4" for loop in loops for p in (*loop.loaded, *loop.stored)}) & taken
    if clash:
        return f"{kernel.name} already uses the name {sorted(clash)[0]}"
    for index, launch in launches_of(candidate, kernel.name):
        problem = aliasing_problem(kernel, launch, index)
        if problem:
            return f"{kernel.name}: {problem}"
    return RowVectorSite(kernel, tuple(loops))


def render(source: bytes, loop: RowLoop) -> str:
    indent = indent_of(source, loop.loop)
    inner, body = indent + "    ", indent + "        "
    kind, j, bound = loop.kind, loop.variable, text(loop.bound)
    touched = sorted({*loop.loaded, *loop.stored})
    aligned = f" |\n{inner}    ".join(f"reinterpret_cast<unsigned long long>({loop.row(p)})" for p in touched)
    first, last = loop.statements[0], loop.statements[-1]
    return "\n".join([
        f"// vectorize_rows: four consecutive columns per float4 while {', '.join(touched)} "
        f"{'is' if len(touched) == 1 else 'are'} 16-byte",
        f"{indent}// aligned, then the columns past the last four one by one; an unaligned row "
        "as before.",
        f"{indent}if (({aligned}) % 16 == 0) {{",
        f"{inner}const {kind} vec_n = ({bound}) / 4;",
        f"{inner}for ({kind} vec_c = threadIdx.x; vec_c < vec_n; vec_c += blockDim.x) {{",
        *four_lanes(source, (first, last), loop.accesses, loop.loaded, loop.stored, body, "vec_c", "column",
                    loop.row),
        f"{inner}}}",
        f"{inner}for ({kind} {j} = 4 * vec_n + threadIdx.x; {j} < {bound}; {j} += blockDim.x) {{",
        reblock(source, first, last, body),
        f"{inner}}}",
        f"{indent}}} else {{",
        reblock(source, loop.loop, loop.loop, inner),
        f"{indent}}}",
    ])


class VectorizeRows(SiteRewrite):
    name = "vectorize_rows"
    title = "float4 loads and stores in the block's row loops"
    families = ("vectorize",)

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate,
                   context: NodeContext) -> tuple[list[RowVectorSite], list[str]]:
        sites, reasons = [], []
        functions = defined_functions(tree.root_node)
        for kernel in find_kernels(tree):
            site = vector_rows_site(kernel, candidate, functions)
            (reasons if isinstance(site, str) else sites).append(site)
        return sites, reasons

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = [Edit(loop.loop.start_byte, loop.loop.end_byte, render(source, loop))
                 for site in sites for loop in site.loops]
        loops = sum(len(site.loops) for site in sites)
        kernels = ", ".join(site.kernel.name for site in sites)
        rationale = (
            f"{kernels}: in {loops} loop{'s' if loops != 1 else ''} that stride over a row by blockDim.x, "
            "each thread now takes four consecutive columns through one float4 load per pointer read and "
            "one float4 store per pointer written: a quarter of the memory instructions and four times the "
            "bytes in flight per load. It runs where every pointer the loop touches is 16-byte aligned "
            "(checked at run time: a row starts aligned when its length is a multiple of 4); the columns "
            "past the last four, and unaligned rows, run the original loop. Columns move between the "
            "block's threads, so fp32 sums are added in another order (the task's tolerance admits it); "
            "a pointer the loop writes is used nowhere else in the kernel."
        )
        return Rewritten(splice(source, edits), None, rationale)
