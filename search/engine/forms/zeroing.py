"""The launch before a full reduction's atomics: one that sets an output to zero.

    extern "C" __global__ void zero(float* y) { y[0] = 0.0f; }              (<<<1, 1>>>)
    extern "C" __global__ void zero(float* y) { if (threadIdx.x == 0 && blockIdx.x == 0) *y = 0.f; }

Every thread that runs the store writes the same zero to the same element, so the launch
zeroes it whatever its grid and block, once the store is unconditional or tested only
on thread 0 of block 0 (`threadIdx.x == 0`, `blockIdx.x == 0`, both joined by `&&`, in
either order): that thread is in every launch. Any other test could leave the element
as it was.
"""

from __future__ import annotations

from typing import Any

from ..rewrites.syntax import Kernel, named_statements, strip_parens, text
from .accumulators import _body
from .reading import condition_of

_ZEROS = ("0", "0.0f", "0.f", "0.0", "0.0F")
_FIRST = ("threadIdx.x==0", "0==threadIdx.x", "blockIdx.x==0", "0==blockIdx.x")


def zeroed_output(kernel: Kernel | None, launch: dict[str, Any]) -> str | None:
    """The argument the launch sets to zero (`y[0] = 0.0f;` or `*y = 0;`), or None."""
    if kernel is None:
        return None
    statements = named_statements(kernel.body)
    if len(statements) == 1 and statements[0].type == "if_statement" and _first_thread(statements[0]):
        statements = _body(statements[0].child_by_field_name("consequence"))
    if len(statements) != 1 or statements[0].type != "expression_statement":
        return None
    compact = text(statements[0]).replace(" ", "")
    for index, param in enumerate(kernel.params):
        for zero in _ZEROS:
            if compact in (f"{param.name}[0]={zero};", f"*{param.name}={zero};"):
                args = launch.get("args", [])
                return str(args[index]) if index < len(args) else None
    return None


def _first_thread(statement) -> bool:
    """`if (threadIdx.x == 0)`, `if (blockIdx.x == 0)` or both joined by &&, no else."""
    if statement.child_by_field_name("alternative") is not None or condition_of(statement) is None:
        return False
    return _tests_first(strip_parens(condition_of(statement)))


def _tests_first(condition) -> bool:
    if condition.type == "binary_expression" and text(condition.child_by_field_name("operator")) == "&&":
        return all(_tests_first(strip_parens(condition.child_by_field_name(s))) for s in ("left", "right"))
    return text(condition).replace(" ", "") in _FIRST
