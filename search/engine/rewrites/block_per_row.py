"""block_per_row: a thread-per-row kernel becomes one block per row.

With one thread per row, the threads of a warp walk 32 different rows in step: every
load touches 32 rows N floats apart (32 memory transactions for 32 floats), and the
whole task runs on only M threads (4096 for softmax: 3% of the H200's 270k resident
threads). Here block b takes row b and its threads split the row's columns:

    row = blockIdx.x;  for (int j = threadIdx.x; j < N; j += blockDim.x) { ... }

so a warp reads 32 consecutive floats per load, and M blocks of, say, 256 threads fill
the GPU. Each scalar a loop accumulates (`acc += e`, `acc = fmaxf(acc, e)`, fminf) is
then combined across the block with a block_reduce helper (block_reduce.py) before
anything reads it, so every thread sees the row's value; the row's result, if the kernel
writes one after its loops, is written by thread 0. (Consecutive threads reading
consecutive words is what coalesces: CUDA C++ Best Practices Guide, "Coalesced Access to
Global Memory".)

The shape is checked by rows.py. The plan's grid becomes the row count; the block must
be whole warps (a multiple of 32, at most 1024), which a static_assert keeps true when
the block size is a tunable. At the L1 sizes the loops must run at least once per
thread of the block, or most threads would idle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tree_sitter import Node, Tree

from profiling.harness import expr
from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task

from ..types import NodeContext
from .base import Rewritten, SiteRewrite, task_of
from .block_reduce import MAX_BLOCK_THREADS, WARP_SIZE, helper_name, render_helper
from .elementwise import bound_expression, coverage_problem
from .plan import aliasing_problem, buffer_names, kernel_resolver, launches_of, plan_expression, size_points
from .rows import RowKernel, find_row_kernel
from .syntax import Edit, defined_functions, find_kernels, indent_of, line_start, reblock, splice, text

# Threads per row when the block size is a tunable of this kernel alone: 8 warps, 32
# floats each for the softmax L1 row of 8192 and enough loads in flight per SM with 8
# resident blocks (2048 threads per SM on compute capability 9.0). TunableSource moves it.
ROW_THREADS = 256


@dataclass(frozen=True)
class RowSite:
    rows: RowKernel
    grids: dict[int, str]  # launch index -> the row count as a plan expression
    tunable: str | None  # the block size's tunable, when every launch's block is that one name
    reset: bool  # the tunable is this kernel's alone, so it starts at ROW_THREADS


def _block_tunable(candidate: Candidate, kernel: str) -> tuple[str | None, bool]:
    """(the one tunable naming the kernel's blocks or None, whether no other launch uses it)."""
    launches = launches_of(candidate, kernel)
    blocks = {str(launch.block[0]).strip() for _, launch in launches}
    tunable = next(iter(blocks)) if len(blocks) == 1 else None
    if tunable not in candidate.tunables:
        return None, False
    others = [launch for launch in candidate.launches if launch.kernel != kernel]
    values = [value for launch in others for value in (
        *launch.grid, *launch.block, launch.shared_bytes,
        *(str(arg).split(":", 1)[-1] for arg in launch.args))]
    used = set().union(*(expr.names_in(value) for value in values))
    return tunable, tunable not in used


def _block_problem(site: RowKernel, candidate: Candidate, task: Task) -> str | None:
    """Why a launch's block is not whole warps of at most 1024 threads at some size, or None."""
    for sizes in size_points(task):
        for index, launch in launches_of(candidate, site.kernel.name):
            threads = expr.evaluate_int(launch.block[0], {**sizes, **candidate.tunables})
            if threads % WARP_SIZE or not WARP_SIZE <= threads <= MAX_BLOCK_THREADS:
                return (f"launches[{index}] uses blocks of {threads} threads, not whole warps of "
                        f"{WARP_SIZE} up to {MAX_BLOCK_THREADS}")
    return None


def _gain_problem(site: RowKernel, candidate: Candidate, task: Task) -> str | None:
    """At the L1 sizes every loop over the row runs at least once per thread of the block."""
    names = {**task.sizes, **candidate.tunables}
    buffers = buffer_names(task, candidate)
    for index, launch in launches_of(candidate, site.kernel.name):
        threads = expr.evaluate_int(launch.block[0], names)
        for loop in site.loops:
            resolve = kernel_resolver(site.kernel, launch, buffers, loop.loop.start_byte)
            length = plan_expression(loop.bound, resolve)
            if length is None:
                return f"cannot express the loop bound {text(loop.bound)!r} in the plan's sizes"
            if expr.evaluate_int(length, names) < threads:
                return (f"the loop on line {loop.loop.start_point.row + 1} runs "
                        f"{expr.evaluate_int(length, names)} times at the L1 sizes, fewer than the "
                        f"{threads} threads of launches[{index}]: most of the block would idle")
    return None


def _site(found: RowKernel | str, candidate: Candidate, task: Task, functions: set[str]) -> RowSite | str:
    if isinstance(found, str):
        return found
    name = found.kernel.name
    launches = launches_of(candidate, name)
    problem = coverage_problem(found.shape, candidate, task) or next(
        (p for index, launch in launches if (p := aliasing_problem(found.kernel, launch, index))), None)
    if problem:
        return f"{name}: {problem}"
    tunable, own = _block_tunable(candidate, name)
    sized = replace(candidate, tunables={**candidate.tunables, tunable: ROW_THREADS}) if own and tunable \
        else candidate
    clash = sorted(functions & {helper_name(op, kind) for op, kind in _operations(found)})
    problem = _block_problem(found, sized, task) or _gain_problem(found, sized, task) or (
        f"the file already defines {clash[0]}" if clash else None)
    if problem:
        return f"{name}: {problem}"
    grids = {index: bound_expression(found.shape, launch, task, candidate) or ""
             for index, launch in launches}
    return RowSite(found, grids, tunable, own)


def _operations(site: RowKernel) -> list[tuple[str, str]]:
    return [(acc.op, site.types[acc.name]) for loop in site.loops for acc in loop.accumulators]


def _kernel_edits(source: bytes, site: RowSite) -> list[Edit]:
    rows = site.rows
    indent = indent_of(source, rows.declaration)
    row, kind = rows.shape.index, rows.shape.index_type
    header = [
        "// block_per_row: block b handles row b and its threads share the row's columns. The",
        "// early return below is taken by the whole block or by none of it, so no thread skips a",
        "// barrier that the others wait at.",
    ]
    if site.tunable is not None:
        t = site.tunable
        header.insert(0, f'static_assert({t} >= {WARP_SIZE} && {t} % {WARP_SIZE} == 0 && {t} <= '
                         f'{MAX_BLOCK_THREADS}, "block_per_row needs whole warps, at most '
                         f'{MAX_BLOCK_THREADS} threads");')
    lines = [*header, f"{kind} {row} = blockIdx.x;"]
    edits = [Edit(rows.declaration.start_byte, rows.declaration.end_byte, f"\n{indent}".join(lines))]
    for loop in rows.loops:
        edits += [Edit(loop.start.start_byte, loop.start.end_byte, "threadIdx.x"),
                  Edit(loop.update.start_byte, loop.update.end_byte, f"{loop.variable} += blockDim.x")]
        combine = "".join(
            f"\n{indent}{acc.name} = {helper_name(acc.op, rows.types[acc.name])}({acc.name});"
            for acc in loop.accumulators)
        edits.append(Edit(loop.loop.end_byte, loop.loop.end_byte, combine))
    for result in rows.results:
        body = reblock(source, result, result, indent + "    ")
        guarded = f"if (threadIdx.x == 0) {{  // one thread writes the row's result\n{body}\n{indent}}}"
        edits.append(Edit(result.start_byte, result.end_byte, guarded))
    return edits


def _helpers_edit(source: bytes, first: Node, operations: list[tuple[str, str]]) -> Edit:
    """The helpers, once each, before the first rewritten kernel and the comment above it."""
    top = first
    while top.parent is not None and top.parent.parent is not None:
        top = top.parent
    while (above := top.prev_sibling) is not None and above.type == "comment" and (
            above.end_point.row + 1 >= top.start_point.row):
        top = above
    helpers = "\n\n".join(render_helper(op, kind) for op, kind in dict.fromkeys(operations))
    start = line_start(source, top.start_byte)
    return Edit(start, start, helpers + "\n\n")


class BlockPerRow(SiteRewrite):
    name = "block_per_row"
    title = "One block per row instead of one thread per row"
    families = ("parallelism", "coalesce")

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate,
                   context: NodeContext) -> tuple[list[RowSite], list[str]]:
        task = task_of(context)
        functions = defined_functions(tree.root_node)
        sites, reasons = [], []
        for kernel in find_kernels(tree):
            site = _site(find_row_kernel(kernel), candidate, task, functions)
            if isinstance(site, str):
                reasons.append(site)
            else:
                sites.append(site)
        return sites, reasons

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = [edit for site in sites for edit in _kernel_edits(source, site)]
        operations = [op for site in sites for op in _operations(site.rows)]
        if operations:
            edits.append(_helpers_edit(source, sites[0].rows.kernel.definition, operations))
        plan: dict[str, Any] = candidate.plan_dict()
        for site in sites:
            for index, grid in site.grids.items():
                plan["launches"][index]["grid"] = [grid, *plan["launches"][index]["grid"][1:]]
            if site.tunable is not None and site.reset:
                plan["tunables"][site.tunable] = ROW_THREADS
        kernels = ", ".join(site.rows.kernel.name for site in sites)
        combined = sorted({f"{acc.name} ({acc.op})" for site in sites for loop in site.rows.loops
                           for acc in loop.accumulators})
        rationale = (
            f"{kernels}: one block per row instead of one thread per row. Each loop over the row now "
            "strides by blockDim.x from threadIdx.x, so a warp reads 32 consecutive elements per load "
            "(one coalesced transaction instead of 32 rows apart) and the grid has one block per row "
            "instead of rows / blockDim.x blocks. "
            + (f"The accumulators {', '.join(combined)} are combined across the block with warp "
               "shuffles and a 32-entry shared array right after their loop, before anything reads "
               "them. " if combined else "")
            + "Each element is still read and written with the same expression; only fp32 sums are "
            "added in a different order (max and min are exact), which the task's fp32 tolerance "
            "admits."
        )
        return Rewritten(splice(source, edits), plan, rationale)

