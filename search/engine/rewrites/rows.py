"""The thread-per-row shape that block_per_row spreads over a block, read conservatively.

    T row = blockIdx.x * blockDim.x + threadIdx.x;      (the first statement)
    if (row >= rows) { return; }
    ...declarations...
    for (int j = 0; j < N; ++j) { ... }                 (loops over the row, at the top level)
    ...
    out[row] = ...;                                     (optional: the row's result, last)

The loops must be independent across j except through scalar accumulators: a local
declared before the loop and changed in it by exactly one top-level statement
`acc += e`, `acc = acc + e`, `acc = fmaxf(acc, e)` or `acc = fminf(acc, e)`, and not read
anywhere else in that loop. Every memory access in a loop is p[j] (which also makes the
block's accesses contiguous), and a pointer written in a loop reaches a buffer nothing
else in the kernel touches. Nothing outside the loops reads a thread index, so every
thread of a block computes the same row-wide values.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from .block_reduce import is_zero_literal
from .elementwise import IndexedBody, find_indexed_body
from .syntax import (
    INTEGER_TYPES,
    THREAD_BUILTINS,
    Kernel,
    assigned_identifier,
    assigned_identifiers,
    declared_name,
    declared_names,
    defined_functions,
    identifiers,
    integer_literal,
    named_statements,
    operands,
    operator,
    strip_parens,
    text,
    walk,
)

SUM_TYPES = frozenset({"float", "double", "int"})  # types __shfl_down_sync moves and + combines
EXTREMA = {"fmaxf": "max", "fminf": "min"}  # float only
# Calls whose effect depends on which threads run them, or that reach memory behind our back.
THREAD_SENSITIVE_CALLS = ("atomic", "__sync", "__shfl", "__ballot", "__any", "__all", "__activemask",
                          "__match", "__reduce", "__nanosleep", "__threadfence", "printf", "assert",
                          "malloc", "free")
_FORBIDDEN_NODES = ("return_statement", "break_statement", "continue_statement", "goto_statement",
                    "labeled_statement", "gnu_asm_expression")


@dataclass(frozen=True)
class Accumulator:
    name: str
    op: str  # "sum", "max" or "min"
    statement: Node  # the update, for its reads of the accumulator


@dataclass(frozen=True)
class RowLoop:
    loop: Node
    variable: str
    start: Node  # the 0 the loop starts at
    update: Node  # ++j
    bound: Node
    accumulators: tuple[Accumulator, ...]
    written: frozenset[str]  # pointers written as p[j]


@dataclass(frozen=True)
class RowKernel:
    kernel: Kernel
    shape: IndexedBody  # the row index and its early return
    declaration: Node  # the row index's declaration
    loops: tuple[RowLoop, ...]
    results: tuple[Node, ...]  # writes of the row's result, after the last loop
    types: dict[str, str]  # accumulator -> its declared type


def line(node: Node) -> int:
    return node.start_point.row + 1


def _call_name(node: Node) -> str:
    function = node.child_by_field_name("function")
    return text(function) if function is not None else ""


def _uniform_problem(kernel: Kernel, statements: list[Node]) -> str | None:
    """Why the code after the early return could differ between threads, or reach memory
    behind the analysis' back; None when it cannot."""
    functions = defined_functions(_root(kernel.definition))
    if any(n.type == "type_qualifier" and text(n) == "__shared__" for n in walk(kernel.body)):
        return "it already uses __shared__ memory"
    for node in (n for statement in statements for n in walk(statement)):
        name = _call_name(node) if node.type == "call_expression" else ""
        if node.type == "identifier" and text(node) in THREAD_BUILTINS:
            return f"line {line(node)} reads {text(node)}; only the row index may"
        if name.startswith(THREAD_SENSITIVE_CALLS) or "::" in name or name in functions:
            return f"line {line(node)} calls {name}, whose effects are not analysed"
        static = node.type == "storage_class_specifier" and text(node) == "static"
        if node.type in _FORBIDDEN_NODES or static:
            return f"line {line(node)} has a {node.type.replace('_', ' ')}"
        if node.type == "pointer_expression" and operator(node) == "*":
            return f"line {line(node)} dereferences {text(node)}; only p[j] accesses are analysed"
    return None


def _root(node: Node) -> Node:
    while node.parent is not None:
        node = node.parent
    return node


def _subscript(node: Node) -> tuple[str, Node] | None:
    node = strip_parens(node)
    base, indices = node.child_by_field_name("argument"), node.child_by_field_name("indices")
    if node.type != "subscript_expression" or base is None or base.type != "identifier" or (
            indices is None or len(indices.named_children) != 1):
        return None
    return text(base), strip_parens(indices.named_children[0])


def _accumulation(assignment: Node) -> Accumulator | None:
    """`acc += e`, `acc = acc + e` (either order), `acc = fmaxf(acc, e)` / fminf (either order)."""
    name = assigned_identifier(assignment)
    right = assignment.child_by_field_name("right")
    if assignment.type != "assignment_expression" or name is None or right is None:
        return None
    right = strip_parens(right)
    if operator(assignment) == "+=":
        others, op = [right], "sum"
    elif operator(assignment) != "=":
        return None
    elif right.type == "binary_expression" and operator(right) == "+":
        others, op = list(operands(right)), "sum"
    elif right.type == "call_expression" and _call_name(right) in EXTREMA:
        arguments = right.child_by_field_name("arguments")
        others, op = (list(arguments.named_children) if arguments else []), EXTREMA[_call_name(right)]
    else:
        return None
    if op != "sum" or operator(assignment) == "=":
        if len(others) != 2 or sum(text(strip_parens(n)) == name for n in others) != 1:
            return None
        others = [n for n in others if text(strip_parens(n)) != name]
    if any(text(n) == name for n in identifiers(others[0])):
        return None
    statement = assignment.parent
    return Accumulator(name, op, statement) if statement is not None else None


def _loop_head(loop: Node) -> tuple[str, Node, Node, Node] | str:
    """(j, its 0, the update, the bound) for `for (int j = 0; j < bound; ++j)`."""
    init, condition, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    kind = init.child_by_field_name("type") if init is not None and init.type == "declaration" else None
    declarators = init.children_by_field_name("declarator") if kind is not None and init else []
    start = declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
    if kind is None or text(kind) not in INTEGER_TYPES or start is None or integer_literal(start) != 0:
        return f"the loop on line {line(loop)} does not declare an integer starting at 0"
    variable = declared_name(declarators[0])
    check = strip_parens(condition) if condition is not None else None
    if check is None or check.type != "binary_expression" or operator(check) != "<" or (
            text(strip_parens(operands(check)[0])) != variable):
        return f"the loop on line {line(loop)} does not run while {variable} < bound"
    step = strip_parens(update) if update is not None else None
    by_one = step is not None and (
        (step.type == "update_expression" and text(step).replace(variable, "") == "++")
        or (step.type == "assignment_expression" and operator(step) == "+="
            and integer_literal(step.child_by_field_name("right") or step) == 1))
    if step is None or not by_one or assigned_identifier(step) != variable:
        return f"the loop on line {line(loop)} does not step {variable} by one"
    return variable, start, step, operands(check)[1]


def row_loop(loop: Node) -> RowLoop | str:
    head = _loop_head(loop)
    if isinstance(head, str):
        return head
    variable, start, update, bound = head
    body = loop.child_by_field_name("body")
    if body is None:
        return f"the loop on line {line(loop)} has no body"
    if any(text(n) in assigned_identifiers(loop) for n in identifiers(bound)):
        return f"the loop on line {line(loop)} changes its own bound"
    top = set(named_statements(body)) if body.type == "compound_statement" else {body}
    inner = declared_names(body)
    accumulators, written = [], set()
    for node in walk(body):
        access = _subscript(node) if node.type == "subscript_expression" else None
        if access is not None and text(access[1]) != variable or (
                node.type == "subscript_expression" and access is None):
            return (f"line {line(node)} accesses {text(node)}, not indexed by the loop's {variable} alone: "
                    "threads would not read consecutive elements")
        if node.type not in ("assignment_expression", "update_expression"):
            continue
        target = node.child_by_field_name("left" if node.type == "assignment_expression" else "argument")
        target = strip_parens(target) if target is not None else node
        access = _subscript(target)
        if access is not None:
            written.add(access[0])  # p[j], checked above
            continue
        name = text(target) if target.type == "identifier" else None
        if name == variable or name is None:
            return f"line {line(node)} changes {text(target)}"
        if name in inner:
            continue
        found = _accumulation(node) if node.parent in top else None
        if found is None:
            return (f"line {line(node)} changes {name}, declared outside the loop, other than as a "
                    f"top-level `{name} += e` or `{name} = fmaxf({name}, e)` (or fminf)")
        accumulators.append(found)
    return RowLoop(loop, variable, start, update, bound, tuple(accumulators), frozenset(written))


def _declarations(statements: list[Node]) -> dict[str, Node]:
    """Top-level local name -> its declarator (init_declarator, pointer_declarator, ...)."""
    found = {}
    for statement in (s for s in statements if s.type == "declaration"):
        for declarator in statement.children_by_field_name("declarator"):
            found[declared_name(declarator)] = declarator
    return found


def _declared_type(declarator: Node) -> str:
    declaration = declarator.parent
    kind = declaration.child_by_field_name("type") if declaration is not None else None
    pointer = declarator.type == "pointer_declarator" or (
        (declarator.child_by_field_name("declarator") or declarator).type == "pointer_declarator")
    return "" if kind is None or pointer else text(kind)


def _accumulator_problem(kernel: Kernel, loops: list[RowLoop],
                         declared: dict[str, Node]) -> dict[str, str] | str:
    """The accumulators' types, or why one cannot be combined across the block."""
    types = {}
    for loop in loops:
        for acc in loop.accumulators:
            declarator = declared.get(acc.name)
            value = declarator.child_by_field_name("value") if declarator is not None else None
            if declarator is None or declarator.start_byte > loop.loop.start_byte or value is None:
                return f"{acc.name} is not a local initialised before its loop on line {line(loop.loop)}"
            kind = _declared_type(declarator)
            if acc.op == "sum" and kind not in SUM_TYPES or acc.op != "sum" and kind != "float":
                return f"{acc.name} ({kind or 'a pointer'}) is not a type its {acc.op} can be combined in"
            if acc.op == "sum" and not is_zero_literal(value):
                return f"{acc.name} starts at {text(value)}, not 0: every thread of the row would add it"
            changes = [n for n in walk(kernel.body) if assigned_identifier(n) == acc.name]
            if len(changes) != 1:
                return f"{acc.name} is changed {len(changes)} times; an accumulator changes in one statement"
            reads = sum(text(n) == acc.name for n in identifiers(loop.loop))
            if reads != sum(text(n) == acc.name for n in identifiers(acc.statement)):
                return (f"{acc.name} is read inside its loop on line {line(loop.loop)}, where each "
                        "thread would hold only its part of it")
            types[acc.name] = kind
    return types


def _pointer_roots(name: str, kernel: Kernel, declared: dict[str, Node], depth: int = 0) -> set[str]:
    """The pointer parameters a pointer local is computed from (itself, for a parameter)."""
    param = kernel.param(name)
    if param is not None:
        return {name} if param.pointer is not None else set()
    declarator = declared.get(name)
    value = declarator.child_by_field_name("value") if declarator is not None else None
    if value is None or depth > 8:  # 8: pointers defined through pointers, bounded
        return set()
    return set().union(*(_pointer_roots(text(n), kernel, declared, depth + 1) for n in identifiers(value)))


def _memory_problem(kernel: Kernel, loops: list[RowLoop], results: list[Node],
                    declared: dict[str, Node]) -> str | None:
    """Buffers written in a loop or as the result are touched nowhere else in the kernel."""
    outside = [n for n in identifiers(kernel.body)
               if not any(loop.loop.start_byte <= n.start_byte < loop.loop.end_byte for loop in loops)]
    for pointer in sorted(set().union(*(loop.written for loop in loops))):
        declarator = declared.get(pointer)
        own = (declarator.start_byte, declarator.end_byte) if declarator is not None else (0, 0)
        roots = _pointer_roots(pointer, kernel, declared)
        if not roots:
            return f"cannot tell which buffer {pointer} points into"
        for node in outside:
            if text(node) in roots | {pointer} and not own[0] <= node.start_byte < own[1]:
                return (f"line {line(node)} uses {text(node)}, whose buffer a loop writes through "
                        f"{pointer}[j]: other threads' elements could be read")
    targets = [_result_target(result) for result in results]
    for result, pointer in zip(results, targets, strict=True):
        if sum(text(n) == pointer for n in identifiers(kernel.body)) != targets.count(pointer):
            return f"{pointer}, written with the row's result on line {line(result)}, is used elsewhere"
    return None


def _result_target(statement: Node) -> str:
    """p for `p[index] = value;`, else ""."""
    assignment = statement.named_children[0] if statement.type == "expression_statement" else None
    if assignment is None or assignment.type != "assignment_expression" or operator(assignment) != "=":
        return ""
    target = _subscript(assignment.child_by_field_name("left") or assignment)
    return target[0] if target is not None else ""


def _is_result(statement: Node, kernel: Kernel) -> bool:
    """`p[index] = value;` on a pointer parameter p: the row's result, written once."""
    param = kernel.param(_result_target(statement))
    return param is not None and param.pointer is not None


def find_row_kernel(kernel: Kernel) -> RowKernel | str:
    shape = find_indexed_body(kernel)
    if isinstance(shape, str):
        return shape
    name, row = kernel.name, shape.index
    first = named_statements(kernel.body)[0]
    if shape.form != "early_return" or first.start_byte != shape.start:
        return f"{name}: the kernel does not start with {row} and `if ({row} >= rows) return;`"
    if row in assigned_identifiers(kernel.body):
        return f"{name}: {row} is changed after its declaration"
    statements = [s for s in shape.statements if s.type != "comment"]
    problem = _uniform_problem(kernel, statements)
    if problem:
        return f"{name}: {problem}"
    loops: list[RowLoop] = []
    results: list[Node] = []
    for statement in statements:
        if statement.type == "for_statement" and results:
            return (f"{name}: the loop on line {line(statement)} follows the row's result written on "
                    f"line {line(results[0])}; the result must come after the last loop")
        if statement.type == "for_statement":
            found = row_loop(statement)
            if isinstance(found, str):
                return f"{name}: {found}"
            loops.append(found)
        elif _is_result(statement, kernel):
            results.append(statement)
        elif statement.type != "declaration":
            return (f"{name}: line {line(statement)} is not a declaration, a loop over the row or a "
                    "write of the row's result")
    if not loops:
        return f"{name}: no loop over the row"
    declared = _declarations(statements)
    types = _accumulator_problem(kernel, loops, declared)
    if isinstance(types, str):
        return f"{name}: {types}"
    problem = _shadowing_problem(kernel, loops, {*declared, row}) or _memory_problem(
        kernel, loops, results, declared)
    if problem:
        return f"{name}: {problem}"
    return RowKernel(kernel, shape, first, tuple(loops), tuple(results), types)


def _shadowing_problem(kernel: Kernel, loops: list[RowLoop], outer: set[str]) -> str | None:
    """A loop that declares an outer name again would make the name-based checks unsound."""
    outer |= {p.name for p in kernel.params}
    for loop in loops:
        body = loop.loop.child_by_field_name("body")
        again = sorted(declared_names(body) & outer) if body is not None else []
        if again:
            return f"the loop on line {line(loop.loop)} declares {again[0]} again, hiding the outer one"
    return None
