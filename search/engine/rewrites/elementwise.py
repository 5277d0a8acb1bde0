"""The one-thread-per-element shape, which grid_stride and vectorize_float4 rewrite.

Three forms are recognised at the top level of a kernel's body, the index being
`blockIdx.x * blockDim.x + threadIdx.x` in a 64-bit integer variable:

    guarded:       T i = <index>; if (i < bound) { body }              (last statement)
    early_return:  T i = <index>; if (i >= bound) { return; } body...  (to the end)
    grid_stride:   for (T i = <index>; i < bound; i += blockDim.x * gridDim.x) { body }

`body_hazard` says why a body could not run several times in one thread, and
`coverage_problem` checks that the plan's grid covers every element today, so that a
rewrite which covers them all does not start computing elements the kernel skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from profiling.harness import expr
from profiling.harness.candidate import Candidate, Launch
from profiling.harness.spec import Task

from .plan import (
    argument_problem,
    buffer_names,
    kernel_resolver,
    launches_of,
    one_dimensional,
    plan_expression,
    size_points,
)
from .syntax import (
    THREAD_BUILTINS,
    WIDE_INTEGER_TYPES,
    Kernel,
    declared_names,
    defined_functions,
    is_global_index,
    is_product_of,
    named_statements,
    operands,
    operator,
    strip_parens,
    text,
    walk,
)

# Calls whose meaning depends on which threads run together: a thread that loops over
# several elements would reach them a different number of times than its neighbours.
_COLLECTIVE_PREFIXES = ("__sync", "__shfl", "__ballot", "__any", "__all", "__activemask", "__match",
                        "__reduce", "__nanosleep")


@dataclass(frozen=True)
class IndexedBody:
    kernel: Kernel
    form: str  # "guarded", "early_return" or "grid_stride"
    index: str
    index_type: str
    init: Node  # the global index expression
    bound: Node
    statements: tuple[Node, ...]  # the work for one element
    start: int  # the byte range a rewrite replaces
    end: int


def _index_declaration(statement: Node) -> tuple[str, str, Node] | None:
    """(name, type, init) when `statement` declares one 64-bit variable = the global index."""
    if statement.type != "declaration":
        return None
    kind = statement.child_by_field_name("type")
    declarators = statement.children_by_field_name("declarator")
    if kind is None or text(kind) not in WIDE_INTEGER_TYPES or len(declarators) != 1:
        return None
    name = declarators[0].child_by_field_name("declarator")
    value = declarators[0].child_by_field_name("value")
    if name is None or value is None or name.type != "identifier" or not is_global_index(value):
        return None
    if any(c.type in ("type_qualifier", "storage_class_specifier") for c in statement.named_children):
        return None  # `const` would forbid the loop's increment; `static` is not per thread
    return text(name), text(kind), value


def _comparison(node: Node | None, index: str, wanted: str) -> Node | None:
    """The bound in `index <wanted> bound`, or None."""
    if node is None:
        return None
    if node.type == "condition_clause":
        node = node.child_by_field_name("value") or node
    node = strip_parens(node)
    if node.type != "binary_expression" or operator(node) != wanted:
        return None
    left, right = operands(node)
    return right if strip_parens(left).type == "identifier" and text(strip_parens(left)) == index else None


def _block_statements(node: Node) -> tuple[Node, ...]:
    """What a branch or loop runs, comments included (they move with the code)."""
    return tuple(node.named_children) if node.type == "compound_statement" else (node,)


def _is_bare_return(node: Node) -> bool:
    statements = [s for s in _block_statements(node) if s.type != "comment"]
    return (len(statements) == 1 and statements[0].type == "return_statement"
            and not statements[0].named_children)


def find_indexed_body(kernel: Kernel) -> IndexedBody | str:
    children = kernel.body.named_children
    statements = named_statements(kernel.body)
    for position, statement in enumerate(statements):
        if statement.type == "for_statement":
            found = _grid_stride_loop(kernel, statement, position == len(statements) - 1)
            if found is not None:
                return found
        declared = _index_declaration(statement)
        if declared is None or position + 1 >= len(statements):
            continue
        index, index_type, init = declared
        check = statements[position + 1]
        rest = tuple(children[children.index(check) + 1:])
        return _guarded_body(kernel, statement, check, rest, declared) if check.type == "if_statement" else (
            f"{kernel.name}: the statement after {index}'s declaration is not an if")
    return f"{kernel.name}: no 64-bit index = blockIdx.x * blockDim.x + threadIdx.x at the top of the kernel"


def _guarded_body(kernel: Kernel, declaration: Node, check: Node, rest: tuple[Node, ...],
                  declared: tuple[str, str, Node]) -> IndexedBody | str:
    index, index_type, init = declared
    condition, then = check.child_by_field_name("condition"), check.child_by_field_name("consequence")
    if check.child_by_field_name("alternative") is not None or then is None:
        return f"{kernel.name}: the check on {index} has an else branch"
    work = [s for s in rest if s.type != "comment"]
    if (bound := _comparison(condition, index, "<")) is not None:
        if work:
            return f"{kernel.name}: statements follow the `if ({index} < ...)` block"
        if all(s.type == "comment" for s in _block_statements(then)):
            return f"{kernel.name}: the `if ({index} < ...)` block is empty"
        return IndexedBody(kernel, "guarded", index, index_type, init, bound, _block_statements(then),
                           declaration.start_byte, check.end_byte)
    if (bound := _comparison(condition, index, ">=")) is not None and _is_bare_return(then):
        if not work:
            return f"{kernel.name}: nothing follows the early return"
        return IndexedBody(kernel, "early_return", index, index_type, init, bound, rest,
                           declaration.start_byte, rest[-1].end_byte)
    return (f"{kernel.name}: {text(condition) if condition else 'the check'} is neither `{index} < bound` "
            f"around the work nor `{index} >= bound` before an early return")


def _grid_stride_loop(kernel: Kernel, loop: Node, last: bool) -> IndexedBody | None:
    init, update, body = (loop.child_by_field_name(f) for f in ("initializer", "update", "body"))
    declared = _index_declaration(init) if init is not None else None
    if declared is None or update is None or body is None or not last or not named_statements(body):
        return None
    index, index_type, start = declared
    bound = _comparison(loop.child_by_field_name("condition"), index, "<")
    update = strip_parens(update)
    if bound is None or update.type != "assignment_expression" or operator(update) != "+=" or (
            text(update.child_by_field_name("left") or update) != index
            or not is_product_of(update.child_by_field_name("right") or update, "blockDim", "gridDim")):
        return None
    # The note grid_stride leaves above its loop goes with the loop when it is replaced.
    note = loop.prev_named_sibling
    noted = note is not None and text(note).startswith("// grid_stride:")
    begin = note.start_byte if noted and note is not None else loop.start_byte
    return IndexedBody(kernel, "grid_stride", index, index_type, start, bound, _block_statements(body),
                       begin, loop.end_byte)


def _call_name(node: Node) -> str:
    function = node.child_by_field_name("function")
    return text(function) if function is not None else ""


def body_hazard(shape: IndexedBody) -> str | None:
    """Why the per-element work could not run several times in one thread, or None."""
    name = shape.kernel.name
    if any(n.type == "type_qualifier" and text(n) == "__shared__" for n in walk(shape.kernel.body)):
        return f"{name} uses __shared__ memory, which threads share across elements"
    inner = set().union(*(declared_names(s) for s in shape.statements))
    root = shape.kernel.definition
    while root.parent is not None:
        root = root.parent
    functions = defined_functions(root)
    for statement in shape.statements:
        for node in walk(statement):
            hazard = _node_hazard(node, inner, functions)
            if hazard:
                return f"{name} line {node.start_point.row + 1}: {hazard}"
    return None


def _node_hazard(node: Node, inner: set[str], functions: set[str]) -> str | None:
    if node.type in ("return_statement", "goto_statement", "labeled_statement") or "asm" in node.type:
        return f"the work has a {node.type.replace('_', ' ')}"
    name = _call_name(node) if node.type == "call_expression" else ""
    if name.startswith(_COLLECTIVE_PREFIXES) or "::" in name:
        return f"the work calls {name}, which depends on which threads run together"
    if name in functions:
        return f"the work calls {name}, defined in this file, whose effects are not analysed"
    if node.type == "identifier" and text(node) in THREAD_BUILTINS:
        return f"the work reads {text(node)}, whose meaning a thread looping over elements would change"
    if node.type == "storage_class_specifier" and text(node) == "static":
        return "the work declares a static variable, which would carry over between elements"
    if node.type in ("assignment_expression", "update_expression"):
        target = node.child_by_field_name("left" if node.type == "assignment_expression" else "argument")
        target = strip_parens(target) if target is not None else None
        if target is not None and target.type == "identifier" and text(target) not in inner:
            return f"the work changes {text(target)}, declared outside it: elements would not be independent"
    return None


def bound_expression(shape: IndexedBody, launch: Launch, task: Task, candidate: Candidate) -> str | None:
    """The element count as a plan expression for this launch, or None."""
    resolve = kernel_resolver(shape.kernel, launch, buffer_names(task, candidate), shape.start)
    return plan_expression(shape.bound, resolve)


def coverage_problem(shape: IndexedBody, candidate: Candidate, task: Task) -> str | None:
    """None when every launch of the kernel is 1-D and starts a thread for every element."""
    launches = launches_of(candidate, shape.kernel.name)
    if not launches:
        return f"{shape.kernel.name} is not launched by the plan"
    for index, launch in launches:
        problem = argument_problem(shape.kernel, launch, index)
        if problem or not one_dimensional(launch):
            return problem or f"launches[{index}] is not one-dimensional"
        bound = bound_expression(shape, launch, task, candidate)
        if bound is None:
            return f"cannot express the bound {text(shape.bound)!r} in the plan's sizes (launches[{index}])"
        if shape.form == "grid_stride":
            continue  # a grid-stride loop covers every element whatever the grid
        for sizes in size_points(task):
            names = {**sizes, **candidate.tunables}
            threads = expr.evaluate_int(launch.grid[0], names) * expr.evaluate_int(launch.block[0], names)
            if threads < expr.evaluate_int(bound, names):
                return (f"launches[{index}] starts {threads} threads for {expr.evaluate_int(bound, names)} "
                        f"elements at {sizes}, so covering them all would change the result")
    return None

