"""What the launch plan says about a kernel: its launches, arguments and sizes.

A rewrite that changes a launch (a grid-stride loop needs fewer blocks) or relies on the
plan (float4 loads need the harness's aligned buffers) reads the plan through these
helpers. Kernel-side expressions (`(long long)N * K * H * W`) are translated into plan
expressions (`(N) * (K) * (H) * (W)`) so they can be evaluated at the task's sizes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

from profiling.harness import expr
from profiling.harness.candidate import Candidate, Launch
from profiling.harness.spec import Task

from .syntax import INTEGER_TYPES, Kernel, assigned_identifiers, integer_literal, operands, operator, text

# The H200 has 132 SMs (the GH100 configuration of the H100 SXM5; NVIDIA H100/H200
# datasheets). 16 resident blocks per SM is enough to fill it with blocks of 128 threads
# (2048 threads per SM on compute capability 9.0, CUDA C Programming Guide, "Compute
# Capabilities"), and a grid that is a multiple of the SM count is the advice of
# "CUDA Pro Tip: Write Flexible Kernels with Grid-Stride Loops" (NVIDIA blog, 2013).
H200_SMS = 132
BLOCKS_PER_SM = 16
GRID_CAP = f"{H200_SMS} * {BLOCKS_PER_SM}"

Resolver = Callable[[str], str | None]


def size_points(task: Task) -> list[dict[str, int]]:
    """L1 first, then every L0 size: a plan must hold at all of them."""
    return [dict(task.sizes), *(dict(s) for s in task.l0_sizes)]


def launches_of(candidate: Candidate, kernel: str) -> list[tuple[int, Launch]]:
    return [(index, launch) for index, launch in enumerate(candidate.launches) if launch.kernel == kernel]


def buffer_names(task: Task, candidate: Candidate) -> set[str]:
    return {t.name for t in task.all_tensors()} | {s.name for s in candidate.scratch}


def float32_buffers(task: Task, candidate: Candidate) -> set[str]:
    return {t.name for t in task.all_tensors() if t.dtype == "float32"} | {
        s.name for s in candidate.scratch if s.dtype == "float32"}


def argument_problem(kernel: Kernel, launch: Launch, index: int) -> str | None:
    if len(launch.args) != len(kernel.params):
        return (f"launches[{index}] passes {len(launch.args)} arguments to {kernel.name}, "
                f"which takes {len(kernel.params)}")
    return None


def pointer_arguments(kernel: Kernel, launch: Launch) -> dict[str, str]:
    """Pointer parameter name -> the buffer the launch passes to it."""
    return {p.name: str(launch.args[p.position]) for p in kernel.pointer_params()}


def aliasing_problem(kernel: Kernel, launch: Launch, index: int) -> str | None:
    """Two pointer parameters given one buffer would make restrict or float4 rewrites unsafe."""
    seen: dict[str, str] = {}
    for param, buffer in pointer_arguments(kernel, launch).items():
        if buffer in seen:
            return f"launches[{index}] passes {buffer} as both {seen[buffer]} and {param}"
        seen[buffer] = param
    return None


def one_dimensional(launch: Launch) -> bool:
    """Only x varies: any y or z dimension is the literal 1."""
    return all(dim in (1, "1") for dim in (*launch.grid[1:], *launch.block[1:]))


def block_threads(launch: Launch, names: dict[str, int]) -> int:
    threads = 1
    for dim in launch.block:
        threads *= expr.evaluate_int(dim, names)
    return threads


def scalar_argument(kernel: Kernel, launch: Launch, buffers: set[str]) -> Resolver:
    """Resolve a kernel's integer parameter to the plan expression the launch passes."""
    def resolve(name: str) -> str | None:
        param = kernel.param(name)
        if param is None or param.pointer is not None or param.base_type not in INTEGER_TYPES:
            return None
        arg = launch.args[param.position]
        if isinstance(arg, int):
            return str(arg)
        if not isinstance(arg, str) or arg in buffers or arg.startswith("f32:"):
            return None
        return arg.split(":", 1)[1] if arg[:4] in ("i64:", "i32:") else arg
    return resolve


def constant_locals(kernel: Kernel, before: int) -> dict[str, Node]:
    """Integer locals declared at the top of the kernel before `before`, never reassigned."""
    reassigned = assigned_identifiers(kernel.body)
    found: dict[str, Node] = {}
    for statement in kernel.body.named_children:
        if statement.start_byte >= before or statement.type != "declaration":
            continue
        kind = statement.child_by_field_name("type")
        declarators = statement.children_by_field_name("declarator")
        if kind is None or text(kind) not in INTEGER_TYPES or len(declarators) != 1:
            continue
        init = declarators[0]
        name, value = init.child_by_field_name("declarator"), init.child_by_field_name("value")
        if init.type == "init_declarator" and name is not None and value is not None and (
            name.type == "identifier" and text(name) not in reassigned):
            found[text(name)] = value
    return found


def kernel_resolver(kernel: Kernel, launch: Launch, buffers: set[str], before: int) -> Resolver:
    """Parameters from the launch's arguments; constant locals through their initialisers."""
    arguments = scalar_argument(kernel, launch, buffers)
    local_values = constant_locals(kernel, before)

    def resolve(name: str, depth: int = 0) -> str | None:
        if name in local_values and depth < 8:  # 8: locals defined through locals, bounded
            return plan_expression(local_values[name], lambda n: resolve(n, depth + 1))
        return arguments(name)
    return resolve


_ATOM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_OPERATORS = {"+": "+", "-": "-", "*": "*", "/": "//", "%": "%"}


def plan_expression(node: Node, resolve: Resolver) -> str | None:
    """A C integer expression as a plan expression, or None when it is not one we can read.

    Integer casts are dropped and `/` becomes `//`: the same for the non-negative sizes
    and counts that plans deal in.
    """
    if node.type == "parenthesized_expression" and node.named_children:
        return plan_expression(node.named_children[0], resolve)
    if node.type == "cast_expression":
        kind, value = node.child_by_field_name("type"), node.child_by_field_name("value")
        if kind is None or value is None or text(kind) not in INTEGER_TYPES:
            return None
        return plan_expression(value, resolve)
    if node.type == "number_literal":
        value = integer_literal(node)
        return None if value is None else str(value)
    if node.type == "identifier":
        resolved = resolve(text(node))
        if resolved is None:
            return None
        return resolved if _ATOM.fullmatch(resolved.strip()) else f"({resolved})"
    if node.type == "binary_expression" and operator(node) in _OPERATORS:
        left, right = (plan_expression(side, resolve) for side in operands(node))
        if left is None or right is None:
            return None
        return f"({left} {_OPERATORS[operator(node)]} {right})"
    return None
