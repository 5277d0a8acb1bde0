"""warp_shuffle_reduce: the last five steps of a shared-memory tree become warp shuffles.

The textbook block reduction

    for (s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) a[tid] += a[tid + s]; __syncthreads(); }

spends its last five steps (s = 16 .. 1) with one warp working and the whole block
waiting at barriers. Stopping the loop at s = 64 and letting warp 0 finish with
`__shfl_down_sync` removes five barriers and their shared-memory round trips ("Using CUDA
Warp-Level Primitives", NVIDIA blog, 2018). Lane t adds lane t + offset's value exactly
where the tree added a[t + s], so the result is the same, bit for bit.

Preconditions: the op is + (or fmaxf), the block is one-dimensional with a power-of-two
size of at least 64 (tid + 32 must exist), and after the loop only a[0] is read. When the
block size is a tunable, a static_assert keeps a later tuning step from breaking that.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node, Tree

from profiling.harness import expr
from profiling.harness.candidate import Candidate

from ..types import NodeContext
from .base import Rewritten, SiteRewrite
from .plan import launches_of, one_dimensional
from .syntax import (
    Edit,
    Kernel,
    assigned_identifiers,
    find_kernels,
    identifiers,
    indent_of,
    integer_literal,
    is_builtin,
    named_statements,
    operands,
    operator,
    splice,
    strip,
    strip_parens,
    text,
    walk,
)

SHUFFLE_TYPES = frozenset({"float", "double", "int", "unsigned", "unsigned int"})
MIN_BLOCK = 64  # warp 0 reads a[t + 32] for t < 32


@dataclass(frozen=True)
class TreeLoop:
    loop: Node
    condition: Node
    variable: str
    array: str
    tid: str
    op: str  # "+" or "fmaxf"
    element_type: str


def _halved_block(node: Node | None) -> str | None:
    """`blockDim.x` or NAME for `blockDim.x / 2`, `NAME >> 1`, ...; None otherwise."""
    node = strip(node) if node is not None else None
    if node is None or node.type != "binary_expression":
        return None
    left, right = operands(node)
    if (operator(node), integer_literal(right)) not in (("/", 2), (">>", 1)):
        return None
    left = strip_parens(left)
    if is_builtin(left, "blockDim"):
        return "blockDim.x"
    return text(left) if left.type == "identifier" else None


def _halves(update: Node, variable: str) -> bool:
    update = strip_parens(update)
    target = update.child_by_field_name("left")
    if update.type != "assignment_expression" or target is None or text(target) != variable:
        return False
    right = update.child_by_field_name("right")
    if operator(update) in (">>=", "/="):
        return integer_literal(right) == (1 if operator(update) == ">>=" else 2) if right else False
    return operator(update) == "=" and right is not None and _halved_block(right) == variable


def _subscript(node: Node | None) -> tuple[str, Node] | None:
    node = strip_parens(node) if node is not None else None
    if node is None or node.type != "subscript_expression":
        return None
    base, indices = node.child_by_field_name("argument"), node.child_by_field_name("indices")
    if base is None or base.type != "identifier" or indices is None or len(indices.named_children) != 1:
        return None
    return text(base), strip_parens(indices.named_children[0])


def _is_element(node: Node | None, array: str, tid: str) -> bool:
    found = _subscript(node)
    return found is not None and found[0] == array and text(found[1]) == tid


def _is_partner(node: Node | None, array: str, tid: str, variable: str) -> bool:
    """a[tid + s] (or a[s + tid])."""
    found = _subscript(node)
    if found is None or found[0] != array or operator(found[1]) != "+":
        return False
    return sorted(text(strip_parens(n)) for n in operands(found[1])) == sorted((tid, variable))


def _combine(statement: Node, tid: str, variable: str) -> tuple[str, str] | None:
    """(array, op) when the statement is a[t] += a[t + s], a[t] = a[t] + a[t + s] or fmaxf."""
    if statement.type == "compound_statement" and len(named_statements(statement)) == 1:
        statement = named_statements(statement)[0]
    expression = statement.type == "expression_statement" and statement.named_children
    assignment = statement.named_children[0] if expression else None
    if assignment is None or assignment.type != "assignment_expression":
        return None
    left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    array = _subscript(left)[0] if _subscript(left) else ""
    if not _is_element(left, array, tid) or right is None:
        return None
    right = strip_parens(right)
    if operator(assignment) == "+=":
        return (array, "+") if _is_partner(right, array, tid, variable) else None
    if operator(assignment) != "=":
        return None
    if right.type == "binary_expression" and operator(right) == "+":
        first, second = operands(right)
        ok = _is_element(first, array, tid) and _is_partner(second, array, tid, variable)
        return (array, "+") if ok else None
    function, arguments = right.child_by_field_name("function"), right.child_by_field_name("arguments")
    if right.type != "call_expression" or function is None or arguments is None or text(function) != "fmaxf":
        return None
    args = arguments.named_children
    ok = len(args) == 2 and _is_element(args[0], array, tid) and _is_partner(args[1], array, tid, variable)
    return (array, "fmaxf") if ok else None


def _thread_index(node: Node, kernel: Kernel) -> str | None:
    """`threadIdx.x`, or a local that holds it and is never changed."""
    node = strip_parens(node)
    if is_builtin(node, "threadIdx"):
        return text(node)
    if node.type != "identifier" or text(node) in assigned_identifiers(kernel.body):
        return None
    for declarator in (n for n in walk(kernel.body) if n.type == "init_declarator"):
        name, value = (declarator.child_by_field_name(f) for f in ("declarator", "value"))
        same = name is not None and text(name) == text(node)
        if same and value is not None and is_builtin(value, "threadIdx"):
            return text(node)
    return None


def _shared_array_type(kernel: Kernel, array: str) -> str | None:
    for declaration in (n for n in walk(kernel.body) if n.type == "declaration"):
        qualifiers = {text(c) for c in declaration.named_children if c.type == "type_qualifier"}
        declarators = declaration.children_by_field_name("declarator")
        kind = declaration.child_by_field_name("type")
        if "__shared__" in qualifiers and kind is not None and any(
                d.type == "array_declarator" and text(d.child_by_field_name("declarator") or d) == array
                for d in declarators):
            return text(kind)
    return None


def _is_barrier(statement: Node) -> bool:
    if statement.type != "expression_statement" or not statement.named_children:
        return False
    call = statement.named_children[0]
    function = call.child_by_field_name("function") if call.type == "call_expression" else None
    return function is not None and text(function) == "__syncthreads"


def _loop_head(loop: Node) -> tuple[str, str] | str:
    """(s, what s starts at half of) for `for (int s = <block> / 2; s > 0; s >>= 1)`."""
    init, condition, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    is_declaration = init is not None and init.type == "declaration"
    declarators = init.children_by_field_name("declarator") if init is not None and is_declaration else []
    half = _halved_block(declarators[0].child_by_field_name("value")) if len(declarators) == 1 else None
    if half is None:
        return "the loop does not start at half the block size"
    variable = text(declarators[0].child_by_field_name("declarator") or declarators[0])
    condition = strip_parens(condition) if condition is not None else None
    if condition is None or condition.type != "binary_expression" or operator(condition) != ">" or (
            text(operands(condition)[0]) != variable or integer_literal(operands(condition)[1]) != 0):
        return f"the loop does not run while {variable} > 0"
    if update is None or not _halves(update, variable):
        return f"the loop does not halve {variable}"
    return variable, half


def tree_loop(loop: Node, kernel: Kernel) -> tuple[TreeLoop, str] | str:
    """The textbook tree reduction and the block size its start names, or why this is not one."""
    head = _loop_head(loop)
    if isinstance(head, str):
        return head
    variable, half = head
    body = loop.child_by_field_name("body")
    statements = named_statements(body) if body is not None and body.type == "compound_statement" else []
    if len(statements) != 2 or statements[0].type != "if_statement" or not _is_barrier(statements[1]):
        return f"its body is not `if (tid < {variable}) ...; __syncthreads();`"
    branch = statements[0]
    clause = branch.child_by_field_name("condition")
    value = clause.child_by_field_name("value") if clause is not None else None
    check = strip_parens(value) if value is not None else branch
    then = branch.child_by_field_name("consequence")
    if branch.child_by_field_name("alternative") is not None or then is None or operator(check) != "<" or (
            check.type != "binary_expression" or text(operands(check)[1]) != variable):
        return f"its branch is not `if (tid < {variable})` without else"
    tid = _thread_index(operands(check)[0], kernel)
    combined = _combine(then, tid, variable) if tid is not None else None
    if combined is None:
        return f"its step is not a[tid] += a[tid + {variable}] (or = a[tid] + ..., or fmaxf) on threadIdx.x"
    array, op = combined
    element = _shared_array_type(kernel, array)
    if element not in SHUFFLE_TYPES or (op == "fmaxf" and element != "float"):
        return f"{array} is not a __shared__ array of a type __shfl_down_sync moves ({element or 'unknown'})"
    condition = loop.child_by_field_name("condition")
    return TreeLoop(loop, condition, variable, array, tid, op, element), half


def _later_use_problem(kernel: Kernel, found: TreeLoop) -> str | None:
    """After the loop only a[0] may be read: the other slots now hold different partials."""
    for node in identifiers(kernel.body):
        if node.start_byte < found.loop.end_byte or text(node) != found.array:
            continue
        access = _subscript(node.parent)
        if access is None or integer_literal(access[1]) != 0:
            line = node.start_point.row + 1
            return f"{found.array} is used after the loop other than as {found.array}[0] (line {line})"
    clash = {"warp_value", "offset"} & {text(n) for n in identifiers(kernel.definition)}
    return f"{kernel.name} already uses the name {sorted(clash)[0]}" if clash else None


def block_problem(kernel: Kernel, candidate: Candidate, half: str) -> tuple[str | None, str | None]:
    """(the block-size tunable, if one; why the launches do not qualify, if they do not)."""
    launches = launches_of(candidate, kernel.name)
    if not launches:
        return None, f"{kernel.name} is not launched by the plan"
    for index, launch in launches:
        block = str(launch.block[0]).strip()
        if not one_dimensional(launch) or not expr.names_in(block) <= set(candidate.tunables):
            return None, f"launches[{index}] does not use a one-dimensional block of constant size"
        threads = expr.evaluate_int(block, candidate.tunables)
        if threads < MIN_BLOCK or threads & (threads - 1):
            return None, f"launches[{index}] uses blocks of {threads} threads, not a power of two >= 64"
        if half != "blockDim.x" and block != half:
            return None, f"the loop starts at {half} / 2 but launches[{index}] uses blocks of {block}"
    names = {str(launch.block[0]).strip() for _, launch in launches}
    tunable = next(iter(names)) if len(names) == 1 and next(iter(names)) in candidate.tunables else None
    return tunable, None


def _warp_tail(found: TreeLoop, indent: str) -> str:
    t, a = found.tid, found.array
    if found.op == "+":
        first = f"{a}[{t}] + {a}[{t} + 32]"
        step = "warp_value += __shfl_down_sync(0xffffffffu, warp_value, offset);"
    else:
        first = f"fmaxf({a}[{t}], {a}[{t} + 32])"
        step = "warp_value = fmaxf(warp_value, __shfl_down_sync(0xffffffffu, warp_value, offset));"
    lines = [
        "// warp_shuffle_reduce: warp 0 combines the last 64 partial results through register",
        f"// shuffles, pairing lanes exactly as the loop above paired {a}[t] and {a}[t + s].",
        f"if ({t} < 32) {{", f"    {found.element_type} warp_value = {first};",
        "    for (int offset = 16; offset > 0; offset >>= 1) {", f"        {step}", "    }",
        f"    if ({t} == 0) {{", f"        {a}[0] = warp_value;", "    }", "}", "__syncthreads();",
    ]
    return "".join(f"\n{indent}{line}" for line in lines)


class WarpShuffleReduce(SiteRewrite):
    name = "warp_shuffle_reduce"
    title = "Warp shuffles for the last 32 partial results of a block reduction"
    families = ("warp_reduce",)

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate,
                   context: NodeContext) -> tuple[list[tuple[Kernel, TreeLoop, str | None]], list[str]]:
        sites, reasons = [], []
        for kernel in find_kernels(tree):
            loops = [n for n in walk(kernel.body) if n.type == "for_statement"]
            found = [tree_loop(loop, kernel) for loop in loops]
            matches = [f for f in found if not isinstance(f, str)]
            if len(matches) != 1:
                detail = "; ".join(dict.fromkeys(f for f in found if isinstance(f, str))) or "no for loops"
                reasons.append(f"{kernel.name}: no single textbook tree-reduction loop ({detail})")
                continue
            loop, half = matches[0]
            tunable, problem = block_problem(kernel, candidate, half)
            problem = problem or _later_use_problem(kernel, loop)
            if problem:
                reasons.append(f"{kernel.name}: {problem}")
            else:
                sites.append((kernel, loop, tunable))
        return sites, reasons

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = []
        for kernel, found, tunable in sites:
            edits.append(Edit(found.condition.start_byte, found.condition.end_byte, f"{found.variable} > 32"))
            tail = _warp_tail(found, indent_of(source, found.loop))
            edits.append(Edit(found.loop.end_byte, found.loop.end_byte, tail))
            if tunable is not None:
                first = kernel.body.named_children[0]
                edits.append(Edit(first.start_byte, first.start_byte, (
                    f'static_assert({tunable} >= {MIN_BLOCK} && ({tunable} & ({tunable} - 1)) == 0, '
                    f'"warp_shuffle_reduce needs a power-of-two block of at least {MIN_BLOCK} threads");\n'
                    f"{indent_of(source, first)}")))
        kernels = ", ".join(kernel.name for kernel, _, _ in sites)
        rationale = (
            f"{kernels}: the shared-memory tree stops at 64 partial results and warp 0 finishes with "
            "__shfl_down_sync, saving five barriers and their shared-memory round trips. Lanes pair up "
            "exactly as the tree's steps did, so the result is bit-identical; the block size is a power "
            f"of two of at least {MIN_BLOCK}, and only element 0 of the array is read afterwards."
        )
        return Rewritten(splice(source, edits), None, rationale)
