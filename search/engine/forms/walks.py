"""window.walk_rows: several outputs of one column a thread, for window reductions.

A thread per output recomputes the output's coordinates from its flat index (a division
and a modulus per coordinate) and reads its window alone; the windows of neighbouring
rows overlap (a 3 x 3 stencil's rows share two of their three input rows, a stride-2
pooling window one of three). Here a thread walks WALK neighbouring rows of one column:
the coordinates come from the grid (x: the column, y: the row block, z: the planes, a
grid-stride loop past 65,535 of them), the slower coordinates are worked out once per
plane, and the rows' windows are read by the same thread one after another, so the
inputs they share are still in L1 (or in registers, where the compiler proves two loads
the same). Each output runs the kernel's own work, unchanged; a warp still reads
neighbouring columns, so the loads stay coalesced. Partial results are not carried
from one row to the next (maxpool3d's expert does that along depth): that would
rewrite the math, and a skeleton only moves it.

Tunables: BLOCK threads a block, BLOCK_X of them across columns (BLOCK / BLOCK_X rows
of threads), WALK rows a thread.
"""

from __future__ import annotations

from typing import Any

from profiling.harness.spec import Task

from . import emit
from .skeleton_base import (
    DEFAULT_BLOCK,
    Emitted,
    Skeleton,
    kernel_text,
    launch_of,
    size_expression,
)
from .types import WINDOW, Form

DEFAULT_BLOCK_X = 32  # a warp across the columns: its loads are one row's neighbours
DEFAULT_WALK = 4  # rows a thread: 4 outputs share 2 of every 3 input rows of a 3 x 3 window
MAX_GRID_Z = 65535  # CUDA's limit on gridDim.z (compute capability 9.0)


class WalkRows(Skeleton):
    name = "window.walk_rows"
    family = WINDOW
    intents = ("WINDOW_REUSE", "UNROLL")
    # reuse of what neighbouring windows share (tile), index arithmetic once a thread
    # (grid_stride: fewer, longer-lived threads), the walk unrolled
    families = ("tile", "grid_stride", "unroll")
    summary = ("each thread walks WALK neighbouring rows of one output column (coordinates from the "
               "grid, the slower ones once per plane), reading the inputs the rows' windows share "
               "one after another; a warp across neighbouring columns")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        rows, columns = form.coordinates
        try:
            height = size_expression(form, rows.bound, plan, task)
            width = size_expression(form, columns.bound, plan, task)
        except emit.PlanProblem as error:
            return str(error)
        flat = len(form.space) == 1
        if flat:  # the planes: the flat bound over a plane's outputs (the last one may be partial)
            plane = f"(long long)({rows.bound}) * ({columns.bound})"
            planes_c = f"((long long)({form.space[0].bound}) + {plane} - 1) / ({plane})"
            planes = f"cdiv({sizes[0]}, ({height}) * ({width}))"
            inside = f" && {form.space[0].name} < ({form.space[0].bound})"
        else:
            planes_c = " * ".join(f"(long long)({a.bound})" for a in form.space[:-2]) or "1"
            planes = " * ".join(f"({s})" for s in sizes[:-2]) or "1"
            inside = ""
        grid = [f"cdiv({width}, BLOCK_X)", f"cdiv({height}, max(BLOCK // BLOCK_X, 1) * WALK)",
                f"max(min({planes}, {MAX_GRID_Z}), 1)"]
        tunables = {"BLOCK": DEFAULT_BLOCK, "BLOCK_X": DEFAULT_BLOCK_X, "WALK": DEFAULT_WALK}
        settings = {**plan.get("tunables", {}), **tunables}
        problem = emit.grid_problem(grid, [task.sizes, *task.l0_sizes], settings)
        if problem:
            return problem
        test = f"if ({rows.name} < ({rows.bound}){inside}) {{"
        output = "\n".join([*((form.rebuild,) if flat else ()), test, emit.indent(form.body, 4), "}"])
        body = f"""    static_assert(BLOCK % BLOCK_X == 0, "BLOCK is whole rows of BLOCK_X threads");
    const long long optiml_column = (long long)blockIdx.x * BLOCK_X + threadIdx.x % BLOCK_X;
    const long long optiml_row0 = ((long long)blockIdx.y * (BLOCK / BLOCK_X) + threadIdx.x / BLOCK_X) * WALK;
    const long long optiml_planes = {planes_c};
    if (optiml_column < (long long)({columns.bound})) {{
        for (long long optiml_rest = blockIdx.z; optiml_rest < optiml_planes; optiml_rest += gridDim.z) {{
{emit.indent(chr(10).join(form.setups), 12)}
#pragma unroll
            for (int optiml_k = 0; optiml_k < WALK; ++optiml_k) {{
                const {rows.ctype} {rows.name} = ({rows.ctype})(optiml_row0 + optiml_k);
                const {columns.ctype} {columns.name} = ({columns.ctype})optiml_column;
{emit.indent(output, 16)}
            }}
        }}
    }}"""
        launch = {"kernel": form.kernel, "grid": grid, "block": ["BLOCK"], "shared_bytes": 0,
                  "args": list(launch_of(form, plan)["args"])}
        new_plan = {"launches": [launch], "scratch": list(plan.get("scratch", [])),
                    "tunables": {**plan.get("tunables", {}), **tunables}}
        return Emitted(kernel_text(form, body), new_plan, self.summary)
