"""launch_bounds: `__launch_bounds__(N)` where every launch uses one constant block size.

Told the largest block a kernel runs with, ptxas plans its register allocation for that
size: it caps registers so that such a block always fits, and weighs unrolling and
scheduling against that budget (CUDA C++ Programming Guide, "Launch Bounds"). N is
written with the tunable's name (`__launch_bounds__(BLOCK)`), which the compiler
receives as -DBLOCK=..., so the bound
follows the plan when the block size is tuned. A launch with more threads than N would
fail, so N must be exactly what every launch of the kernel uses.
"""

from __future__ import annotations

import re

from tree_sitter import Tree

from profiling.harness import expr
from profiling.harness.candidate import Candidate

from ..types import NodeContext
from .base import Rewritten, SiteRewrite
from .plan import launches_of
from .syntax import Edit, Kernel, find_kernels, prototyped, splice

MAX_THREADS_PER_BLOCK = 1024  # every compute capability since 2.0 (CUDA C++ Programming Guide)
WARP_SIZE = 32  # below one warp there is no register budget worth matching
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _block_expression(dims: tuple[str | int, ...]) -> str | None:
    """`BLOCK`, `TILE * TILE`, `256`: a C expression for the block's thread count, when
    every dimension is a number or a plain name (plan-only syntax like cdiv is not C)."""
    parts = []
    for dim in dims:
        if isinstance(dim, int) or _NAME.fullmatch(dim.strip()) or dim.strip().isdigit():
            parts.append(str(dim).strip())
        else:
            return None
    return " * ".join(parts)


def _kernel_bound(kernel: Kernel, candidate: Candidate) -> tuple[str, int] | str:
    """(C expression, threads) shared by all launches of the kernel, or why there is none."""
    if any(child.type == "launch_bounds" for child in kernel.definition.children):
        return f"{kernel.name} already has __launch_bounds__"
    launches = launches_of(candidate, kernel.name)
    if not launches:
        return f"{kernel.name} is not launched by the plan"
    expressions = {_block_expression(launch.block) for _, launch in launches}
    if None in expressions:
        return f"{kernel.name}: a block size is not a number or a tunable name"
    if len(expressions) > 1:
        listed = ", ".join(sorted(map(str, expressions)))
        return f"{kernel.name} is launched with different block sizes ({listed})"
    expression = expressions.pop() or ""
    if not expr.names_in(expression) <= set(candidate.tunables):
        return f"{kernel.name}: block size {expression} depends on the task's sizes, not only on tunables"
    threads = expr.evaluate_int(expression, candidate.tunables)
    if not WARP_SIZE <= threads <= MAX_THREADS_PER_BLOCK:
        return f"{kernel.name}: a block of {threads} threads is outside {WARP_SIZE}..{MAX_THREADS_PER_BLOCK}"
    return expression, threads


class LaunchBounds(SiteRewrite):
    name = "launch_bounds"
    title = "__launch_bounds__ matched to the block size"
    families = ("launch_bounds",)

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext
                   ) -> tuple[list[tuple[Kernel, str, int]], list[str]]:
        sites, reasons = [], []
        for kernel in find_kernels(tree):
            bound = _kernel_bound(kernel, candidate)
            if prototyped(tree, kernel.name):
                bound = f"{kernel.name} is also declared separately, and both would need the bound"
            if isinstance(bound, str):
                reasons.append(bound)
            else:
                sites.append((kernel, *bound))
        return sites, reasons

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = [Edit(kernel.declarator.start_byte, kernel.declarator.start_byte,
                      f"__launch_bounds__({expression}) ") for kernel, expression, _ in sites]
        described = ", ".join(f"{kernel.name} ({expression} = {threads} threads)"
                              for kernel, expression, threads in sites)
        rationale = (f"Every launch of {described} uses that block size, so ptxas is told it and plans "
                     "its register budget for exactly that block size; the bound is written with the "
                     "tunable's name, so it follows the plan when the block size is tuned.")
        return Rewritten(splice(source, edits), None, rationale)
