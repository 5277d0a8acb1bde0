"""grid_stride: one thread per element becomes a grid-stride loop over a bounded grid.

`i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { work }` becomes
`for (i = <same>; i < n; i += blockDim.x * gridDim.x) { work }`, and the plan's grid
becomes min(<old grid>, 132 * 16): enough resident blocks to fill the H200, each thread
walking several elements, so block scheduling and index arithmetic are amortised
("CUDA Pro Tip: Write Flexible Kernels with Grid-Stride Loops", NVIDIA blog, 2013).

Every element is still handled exactly once by one thread; the work must therefore not
depend on which thread runs it (no thread indices, no barriers, no shuffles, no shared
memory), must not return early, and must not carry state from one element to the next.
The plan must start a thread for every element today, or the loop would start computing
elements the kernel skipped.
"""

from __future__ import annotations

from typing import Any

from tree_sitter import Tree

from profiling.harness import expr
from profiling.harness.candidate import Candidate

from ..types import NodeContext
from .base import Rewritten, SiteRewrite, task_of
from .elementwise import IndexedBody, body_hazard, coverage_problem, find_indexed_body
from .plan import BLOCKS_PER_SM, GRID_CAP, H200_SMS, launches_of
from .syntax import Edit, find_kernels, indent_at, reblock, splice, text


def grid_stride_step(index_type: str) -> str:
    return f"({index_type})blockDim.x * gridDim.x"


def render_loop(source: bytes, shape: IndexedBody) -> str:
    """The grid-stride loop that replaces the index declaration and its check."""
    indent = indent_at(source, shape.start)
    i, kind = shape.index, shape.index_type
    body = reblock(source, shape.statements[0], shape.statements[-1], indent + "    ")
    return (
        f"// grid_stride: each thread handles elements {i}, {i} + gridDim.x * blockDim.x, ...\n"
        f"{indent}for ({kind} {i} = {text(shape.init)}; {i} < {text(shape.bound)}; "
        f"{i} += {grid_stride_step(kind)}) {{\n{body}\n{indent}}}"
    )


def capped_grid(grid: str | int) -> str:
    return f"min({grid}, {GRID_CAP})"


class GridStride(SiteRewrite):
    name = "grid_stride"
    title = "Grid-stride loop over a grid of 132 SMs x 16 blocks"
    families = ("grid_stride",)

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate,
                   context: NodeContext) -> tuple[list[IndexedBody], list[str]]:
        task = task_of(context)
        sites, reasons = [], []
        for kernel in find_kernels(tree):
            shape = find_indexed_body(kernel)
            if isinstance(shape, str):
                reasons.append(shape)
                continue
            already = f"{kernel.name} is already a grid-stride loop" if shape.form == "grid_stride" else None
            problem = already or body_hazard(shape) or coverage_problem(shape, candidate, task) or (
                self._gain_problem(shape, candidate, task.sizes))
            if problem:
                reasons.append(problem)
            else:
                sites.append(shape)
        return sites, reasons

    @staticmethod
    def _gain_problem(shape: IndexedBody, candidate: Candidate, l1_sizes: dict[str, int]) -> str | None:
        """A grid already within the cap at the timed (L1) sizes would not change at all."""
        names = {**l1_sizes, **candidate.tunables}
        launches = launches_of(candidate, shape.kernel.name)
        grids = [expr.evaluate_int(launch.grid[0], names) for _, launch in launches]
        if max(grids) <= H200_SMS * BLOCKS_PER_SM:
            return (f"{shape.kernel.name} launches {max(grids)} blocks at the L1 sizes, within the cap of "
                    f"{H200_SMS} x {BLOCKS_PER_SM}: a grid-stride loop would change nothing there")
        return None

    def apply(self, tree: Tree, source: bytes, candidate: Candidate, context: NodeContext) -> Rewritten:
        sites, _ = self.find_sites(tree, source, candidate, context)
        edits = [Edit(shape.start, shape.end, render_loop(source, shape)) for shape in sites]
        kernels = {shape.kernel.name for shape in sites}
        plan: dict[str, Any] = candidate.plan_dict()
        for launch in plan["launches"]:
            if launch["kernel"] in kernels:
                launch["grid"] = [capped_grid(launch["grid"][0]), *launch["grid"][1:]]
        rationale = (
            f"{', '.join(sorted(kernels))}: one thread per element becomes a grid-stride loop and the grid "
            f"is capped at {H200_SMS} SMs x {BLOCKS_PER_SM} blocks, so each thread handles several "
            "elements and block launch and index arithmetic are amortised. Each element is still "
            "computed once, by the same code, with no barrier, shuffle, shared memory or thread index "
            "in it; the plan's grid already covered every element at the L1 and L0 sizes."
        )
        return Rewritten(splice(source, edits), plan, rationale)
