"""grid_stride_accumulate: each thread of a block sum first adds up many elements in a register.

The textbook block sum loads one element per thread into shared memory,

    partial[threadIdx.x] = (i < n) ? x[i] : 0.0f;   (i = blockIdx.x * blockDim.x + threadIdx.x)

reduces the block's array to partial[0] and has thread 0 atomicAdd it into the output:
one block, one barrier-heavy tree and one same-address atomic per blockDim.x elements
(2**28 / 256 = 1M atomics at the reduce_sum L1 size). Here each thread first sums the
elements i, i + gridDim.x * blockDim.x, ... in a register and stores that sum instead,
and the grid shrinks to the blocks the H200 holds at once, so the tree and the atomic
run once per resident block ("Optimizing Parallel Reduction in CUDA", M. Harris, NVIDIA,
2007: algorithm cascading; "CUDA Pro Tip: Write Flexible Kernels with Grid-Stride
Loops", NVIDIA blog, 2013).

Preconditions (on the syntax tree): the kernel is exactly `__shared__ array; index = the
flat global thread index; array[tid] = (index < bound) ? p[index] : 0; __syncthreads();
a textbook + tree over the array; if (tid == 0) atomicAdd(out, array[0]);` with nothing
else, so the block's result is the sum of every slot and is only used by the atomic. A
kernel that warp_shuffle_reduce has already rewritten qualifies when undoing exactly
that rewrite gives such a kernel. Out-of-range threads load 0, the identity of +, so the
sum over all blocks is unchanged up to the order of the fp32 additions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tree_sitter import Node, Tree

from profiling.harness import expr
from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task

from ..types import NodeContext
from .base import Rewritten, SiteRewrite, task_of
from .block_reduce import is_zero_literal
from .grid_stride import grid_stride_step
from .plan import (
    H200_SMS,
    aliasing_problem,
    buffer_names,
    kernel_resolver,
    launches_of,
    plan_expression,
    size_points,
)
from .syntax import (
    INTEGER_TYPES,
    THREAD_BUILTINS,
    Edit,
    Kernel,
    assigned_identifiers,
    find_kernels,
    identifiers,
    indent_of,
    integer_literal,
    is_global_index,
    named_statements,
    operands,
    operator,
    parse,
    splice,
    strip_parens,
    text,
    walk,
)
from .warp_reduce import TreeLoop, _warp_tail, block_problem, tree_loop

# Resident threads per SM on compute capability 9.0 (CUDA C++ Programming Guide, "Compute
# Capabilities", table of technical specifications). H200_SMS * (this // block) blocks is
# one full wave: every SM busy, and one atomic per block that the H200 can hold at once.
RESIDENT_THREADS_PER_SM = 2048
ACCUMULATOR = "thread_sum"


@dataclass(frozen=True)
class AccumulateSite:
    kernel: Kernel
    declaration: Node  # `long long i = <flat index>;`
    load: Node  # `partial[tid] = (i < n) ? x[i] : 0.0f;`
    index: str
    bound: Node
    pointer: str
    array: str
    tid: str
    identity: str
    element_type: str


def _is_barrier(statement: Node) -> bool:
    call = statement.named_children[0] if statement.type == "expression_statement" else None
    function = call.child_by_field_name("function") if call and call.type == "call_expression" else None
    return function is not None and text(function) == "__syncthreads"


def _is_shared_declaration(statement: Node) -> bool:
    return statement.type == "declaration" and any(
        c.type == "type_qualifier" and text(c) == "__shared__" for c in statement.named_children)


def _index(statement: Node) -> str | None:
    """i for `T i = blockIdx.x * blockDim.x + threadIdx.x;` (T an integer type)."""
    kind = statement.child_by_field_name("type") if statement.type == "declaration" else None
    declarators = statement.children_by_field_name("declarator") if kind is not None else []
    if kind is None or text(kind) not in INTEGER_TYPES or len(declarators) != 1:
        return None
    name, value = (declarators[0].child_by_field_name(f) for f in ("declarator", "value"))
    if name is None or value is None or name.type != "identifier" or not is_global_index(value):
        return None
    return text(name)


def _subscript(node: Node) -> tuple[str, str] | None:
    """(array, index text) for `a[index]` on a plain name."""
    node = strip_parens(node)
    base, indices = node.child_by_field_name("argument"), node.child_by_field_name("indices")
    if node.type != "subscript_expression" or base is None or base.type != "identifier" or (
            indices is None or len(indices.named_children) != 1):
        return None
    return text(base), text(strip_parens(indices.named_children[0]))


def _load(statement: Node, index: str, found: TreeLoop, kernel: Kernel) -> tuple[Node, str, str] | str:
    """(bound, pointer, identity) of `array[tid] = (i < bound) ? p[i] : 0;`, or why not."""
    shape = f"`{found.array}[{found.tid}] = ({index} < n) ? p[{index}] : 0;`"
    assignment = statement.named_children[0] if statement.type == "expression_statement" else None
    if assignment is None or assignment.type != "assignment_expression" or operator(assignment) != "=":
        return f"the statement after {index}'s declaration is not {shape}"
    left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    choice = strip_parens(right) if right is not None else None
    if left is None or _subscript(left) != (found.array, found.tid) or choice is None or (
            choice.type != "conditional_expression"):
        return f"the statement after {index}'s declaration is not {shape}"
    condition, loaded, default = (choice.child_by_field_name(f)
                                  for f in ("condition", "consequence", "alternative"))
    check = strip_parens(condition) if condition is not None else None
    if check is None or check.type != "binary_expression" or operator(check) != "<" or (
            text(strip_parens(operands(check)[0])) != index):
        return f"the load is not guarded by `{index} < bound`"
    if default is None or not is_zero_literal(default):
        return "out-of-range threads do not load 0, the identity of +"
    source = _subscript(loaded) if loaded is not None else None
    param = kernel.param(source[0]) if source is not None and source[1] == index else None
    if param is None or param.pointer is None or param.base_type != found.element_type:
        return f"the loaded value is not p[{index}] for a {found.element_type} pointer parameter p"
    bound = operands(check)[1]
    if any(text(n) in THREAD_BUILTINS | assigned_identifiers(kernel.body) for n in identifiers(bound)) or (
            any(n.type == "call_expression" for n in walk(bound))):
        return f"the bound {text(bound)!r} is not a fixed value"
    return bound, param.name, text(default)


def _atomic_problem(statement: Node, found: TreeLoop, kernel: Kernel, pointer: str) -> str | None:
    """None for `if (tid == 0) { atomicAdd(out, array[0]); }` with out a fixed address."""
    shape = f"`if ({found.tid} == 0) atomicAdd(out, {found.array}[0]);`"
    clause = statement.child_by_field_name("condition") if statement.type == "if_statement" else None
    check = strip_parens(clause.child_by_field_name("value") or clause) if clause is not None else None
    then = statement.child_by_field_name("consequence")
    if check is None or then is None or statement.child_by_field_name("alternative") is not None or (
            check.type != "binary_expression" or operator(check) != "==" or
            sorted(text(strip_parens(n)) for n in operands(check)) != sorted([found.tid, "0"])):
        return f"the reduction's result is not used by {shape} alone"
    inner = named_statements(then) if then.type == "compound_statement" else [then]
    call = inner[0].named_children[0] if len(inner) == 1 and inner[0].type == "expression_statement" else None
    function = call.child_by_field_name("function") if call and call.type == "call_expression" else None
    arguments = call.child_by_field_name("arguments") if call is not None else None
    args = arguments.named_children if arguments is not None else []
    if function is None or len(args) != 2 or _subscript(args[1]) != (found.array, "0"):
        return f"the reduction's result is not used by {shape} alone"
    if text(function) != "atomicAdd":
        return f"the block's result goes to {text(function)}, not atomicAdd: blocks must combine by +"
    names = {text(n) for n in identifiers(args[0])}
    fixed = {p.name for p in kernel.params} - assigned_identifiers(kernel.body) - {pointer}
    if not names <= fixed or any(n.type == "call_expression" for n in walk(args[0])):
        return f"the atomic's address {text(args[0])!r} is not a fixed place apart from {pointer}"
    return None


def _shape_problem(kernel: Kernel, candidate: Candidate) -> AccumulateSite | str:
    """The site, or why the kernel is not exactly the textbook block sum."""
    statements = [s for s in named_statements(kernel.body) if s.type != "static_assert_declaration"]
    if ACCUMULATOR in {text(n) for n in identifiers(kernel.definition)}:
        return f"{kernel.name} already uses the name {ACCUMULATOR}"
    start = next((k for k, s in enumerate(statements) if _index(s) is not None), None)
    if start is None:
        return f"{kernel.name}: no index = blockIdx.x * blockDim.x + threadIdx.x"
    shared = statements[:start]
    if not any(_is_shared_declaration(s) for s in shared):
        return f"{kernel.name} declares no __shared__ array before its index: not a block reduction"
    if not all(_is_shared_declaration(s) for s in shared):
        return f"{kernel.name}: the statements before the index are not __shared__ array declarations"
    rest = statements[start:]
    if len(rest) != 5 or not _is_barrier(rest[2]) or rest[3].type != "for_statement":
        return (f"{kernel.name} is not `index; array[tid] = ...; __syncthreads(); tree loop; "
                "if (tid == 0) atomicAdd(...)` and nothing else")
    found = tree_loop(rest[3], kernel)
    if isinstance(found, str):
        return f"{kernel.name}: the loop is not a textbook tree reduction ({found})"
    loop, half = found
    if loop.op != "+":
        return f"{kernel.name}: the tree combines with {loop.op}, not +"
    index, declaration = _index(rest[0]) or "", rest[0]
    loaded = _load(rest[1], index, loop, kernel)
    if isinstance(loaded, str):
        return f"{kernel.name}: {loaded}"
    bound, pointer, identity = loaded
    if any(text(n) == index for n in identifiers(kernel.body) if not (
            declaration.start_byte <= n.start_byte < rest[1].end_byte)):
        return f"{kernel.name}: {index} is used outside its declaration and the load"
    _, problem = block_problem(kernel, candidate, half)
    problem = problem or _atomic_problem(rest[4], loop, kernel, pointer)
    if problem:
        return f"{kernel.name}: {problem}"
    return AccumulateSite(kernel, declaration, rest[1], index, bound, pointer, loop.array, loop.tid,
                          identity, loop.element_type)


def undo_warp_shuffle(tree: Tree, source: bytes, name: str) -> Tree | None:
    """The source before warp_shuffle_reduce, when `name` is exactly that rewrite's output.

    Its tree loop stops at `s > 32` and is followed by the warp tail it generates; the
    undone kernel has `s > 0` and no tail. The text before the loop is unchanged.
    """
    kernel = next((k for k in find_kernels(tree) if k.name == name), None)
    loops = [s for s in named_statements(kernel.body) if s.type == "for_statement"] if kernel else []
    for loop in loops:
        condition = loop.child_by_field_name("condition")
        after = [s for s in named_statements(kernel.body) if s.start_byte >= loop.end_byte][:2]
        if condition is None or operator(condition) != ">" or len(after) != 2 or not _is_barrier(after[1]):
            continue
        if integer_literal(operands(condition)[1]) != 32:
            continue
        variable = text(operands(condition)[0])
        undone = splice(source, [Edit(condition.start_byte, condition.end_byte, f"{variable} > 0"),
                                 Edit(loop.end_byte, after[1].end_byte, "")]).encode()
        undone_tree = parse(undone)
        twin = next(k for k in find_kernels(undone_tree) if k.name == name)
        twin_loop = next(n for n in walk(twin.body)
                         if n.type == "for_statement" and n.start_byte == loop.start_byte)
        found = tree_loop(twin_loop, twin)
        # _warp_tail is what warp_shuffle_reduce inserts: the tail must be exactly its output.
        tail = source[loop.end_byte:after[1].end_byte].decode()
        if not isinstance(found, str) and tail == _warp_tail(found[0], indent_of(undone, twin_loop)):
            return undone_tree
    return None


def _coverage_problem(site: AccumulateSite, candidate: Candidate, task: Task) -> str | None:
    """The plan starts a thread for every element today (else the old sum skipped some)."""
    for index, launch in launches_of(candidate, site.kernel.name):
        problem = aliasing_problem(site.kernel, launch, index)
        if problem:
            return problem
        resolve = kernel_resolver(site.kernel, launch, buffer_names(task, candidate), site.load.start_byte)
        bound = plan_expression(site.bound, resolve)
        if bound is None:
            return f"cannot express the bound {text(site.bound)!r} in the plan's sizes (launches[{index}])"
        for sizes in size_points(task):
            names = {**sizes, **candidate.tunables}
            threads = expr.evaluate_int(launch.grid[0], names) * expr.evaluate_int(launch.block[0], names)
            if threads < expr.evaluate_int(bound, names):
                return f"launches[{index}] starts fewer threads than elements at {sizes}"
    return None


def resident_grid(grid: str | int, block: str | int) -> str:
    """min(<grid>, one wave of resident blocks) as a plan expression."""
    threads = str(block).strip()
    threads = threads if threads.isidentifier() or threads.isdigit() else f"({threads})"
    return f"min({grid}, {H200_SMS} * ({RESIDENT_THREADS_PER_SM} // {threads}))"


def _gain_problem(site: AccumulateSite, candidate: Candidate, l1_sizes: dict[str, int]) -> str | None:
    names = {**l1_sizes, **candidate.tunables}
    for _, launch in launches_of(candidate, site.kernel.name):
        capped = resident_grid(launch.grid[0], launch.block[0])
        if expr.evaluate_int(capped, names) < expr.evaluate_int(launch.grid[0], names):
            return None
    return (f"{site.kernel.name}'s grid already fits in one wave of resident blocks at the L1 sizes: "
            "accumulating per thread would change nothing there")


def render_accumulation(source: bytes, site: AccumulateSite) -> str:
    """The register loop and the single store that replace the index and the one-element load."""
    indent = indent_of(source, site.declaration)
    i, acc = site.index, ACCUMULATOR
    lines = [
        f"// grid_stride_accumulate: each thread adds up elements {i}, {i} + gridDim.x * blockDim.x, ...",
        "// in a register; the block then reduces one sum per thread as before.",
        f"{site.element_type} {acc} = {site.identity};",
        f"for (long long {i} = (long long)blockIdx.x * blockDim.x + threadIdx.x; {i} < {text(site.bound)};",
        f"     {i} += {grid_stride_step('long long')}) {{",
        f"    {acc} += {site.pointer}[{i}];",
        "}",
        f"{site.array}[{site.tid}] = {acc};",
    ]
    return f"\n{indent}".join(lines)


class GridStrideAccumulate(SiteRewrite):
    name = "grid_stride_accumulate"
    title = "Grid-stride accumulation in registers before the block reduction"
    families = ("grid_stride", "parallelism")

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate,
                   context: NodeContext) -> tuple[list[AccumulateSite], list[str]]:
        task = task_of(context)
        sites, reasons = [], []
        for kernel in find_kernels(tree):
            undone = undo_warp_shuffle(tree, source, kernel.name)
            if undone is not None:
                kernel = next(k for k in find_kernels(undone) if k.name == kernel.name)
            site = _shape_problem(kernel, candidate)
            if isinstance(site, str):
                reasons.append(site)
                continue
            problem = _coverage_problem(site, candidate, task) or _gain_problem(site, candidate, task.sizes)
            if problem:
                reasons.append(f"{kernel.name}: {problem}")
            else:
                sites.append(site)
        return sites, reasons

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        # Undoing warp_shuffle_reduce only touches text after the load, so the byte ranges of
        # the index and the load are the same in the undone source and in this one.
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = [Edit(site.declaration.start_byte, site.load.end_byte, render_accumulation(source, site))
                 for site in sites]
        kernels = {site.kernel.name for site in sites}
        plan: dict[str, Any] = candidate.plan_dict()
        for launch in plan["launches"]:
            if launch["kernel"] in kernels:
                launch["grid"] = [resident_grid(launch["grid"][0], launch["block"][0]), *launch["grid"][1:]]
        rationale = (
            f"{', '.join(sorted(kernels))}: each thread first sums its elements with a grid-stride loop in "
            f"a register, and the grid shrinks to one wave of resident blocks ({H200_SMS} SMs x "
            f"{RESIDENT_THREADS_PER_SM} threads / block size). The shared-memory tree and the same-address "
            "atomicAdd then run once per resident block instead of once per block of elements: about a "
            "thousand atomics instead of one per blockDim.x elements. Out-of-range threads added 0, the "
            "identity of +, and the block's sum only feeds the atomic, so the total is the same sum in "
            "another order; the fp32 reordering is within the task's tolerance, which is relative to "
            "sum|x| for exactly this reason."
        )
        return Rewritten(splice(source, edits), plan, rationale)
