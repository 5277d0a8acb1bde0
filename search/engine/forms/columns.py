"""Strided rows (column reductions): rows side by side in memory, each row's loop
stepping across them.

`out[col] = sum over i of x[i * D + col]`, a reduction over dim 1 of a (B, D1, D2)
tensor, per-channel statistics: one thread per output already reads neighbouring
addresses together (its neighbours are the next columns), so `rows.block_per_row`, which
strides a block along one row's loop, would scatter them. What such a kernel lacks is
parallelism: a few thousand outputs, each a long serial loop. This skeleton keeps the
neighbours on a warp's lanes and splits every row's loops over the block's warps:

    block = COLS neighbouring rows (lanes) x BLOCK/COLS slices
    slice s runs iterations s, s + slices, ... of each loop of its row
    a loop's reductions: each slice's partial into shared memory, then every thread of
    the row combines the slices in slice order (the same bits in every thread)

The kernel's statements between loops run in every thread of the row alike; a statement
that writes memory runs in slice 0 only. A warp's lanes past the last row compute the
last row again (their reads stay in bounds) and write nothing.
"""

from __future__ import annotations

from typing import Any

from profiling.harness import expr
from profiling.harness.spec import Task

from . import emit, strides
from .skeleton_base import (
    Emitted,
    Skeleton,
    flat_total,
    kernel_text,
    last_launch,
    plan_with,
    set_aside,
    short_rows_problem,
    spread_loop,
    unflatten,
)
from .types import ARG_OPS, ROWS, Form, LoopHole, Reduction

BLOCK = 1024  # threads: CUDA's most, the partial arrays' size
# Rows per block (a tunable, COLS): 32 fill a warp's 128-byte line; fewer rows a block give
# more slices per row, and more blocks, where 32 would leave SMs idle. The first of these
# that gives a block of 1024 threads to each of 132 SMs (H100 and H200 SXM) at the task's
# sizes. (column_stats at 8192 x 4096 on an H100, BLOCK 1024: COLS 32 0.223 ms, 16 0.150,
# 8 0.169, 4 0.225; bench/results/2026-12-06-h100-split-strided/.)
COLS_CHOICES = (32, 16, 8, 4)
FULL_GRID = 132


class SplitStridedRows(Skeleton):
    name = "rows.split_strided"
    family = ROWS
    intents = ("BLOCK_PER_ROW", "BLOCK_REDUCE")
    # a thread per row leaves the GPU with a few thousand threads (occupancy); the rows'
    # loops get the block's slices (parallelism)
    families = ("occupancy", "parallelism")
    summary = ("rows side by side in memory (a reduction down columns): COLS neighbouring rows side by side "
               "in a block, each row's loops split over the block's BLOCK/COLS slices, partial results "
               "combined through shared memory in slice order")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        fixed = strides.literal_arguments(form, last_launch(plan).get("args", []))
        problem = strides.neighbour_problem(form, fixed) or short_rows_problem(form, plan, task)
        if problem:
            return problem
        total = flat_total(form)
        reductions = {r.name: r for step in form.steps if isinstance(step, LoopHole) for r in step.reductions}
        lines = [f"if ({total} <= 0) return;  // no rows (every thread of the block alike)",
                 "const int optiml_lane = threadIdx.x % COLS;",
                 "const int optiml_slice = threadIdx.x / COLS;",
                 "const int optiml_slices = blockDim.x / COLS;",
                 "const long long optiml_row = (long long)blockIdx.x * COLS + optiml_lane;",
                 # threads past the last whole slice (BLOCK no multiple of COLS) idle
                 "const bool optiml_live = optiml_slice < optiml_slices && "
                 f"optiml_row < {total};",
                 f"const long long optiml_kept_row = optiml_live ? optiml_row : {total} - 1;",
                 unflatten(form, "optiml_kept_row")]
        lines += [declaration for r in reductions.values() for declaration in _partials(r)]
        for step in form.steps:
            if isinstance(step, LoopHole):
                lines += _split_loop(step)
            elif step.writes:
                lines += ["if (optiml_live && optiml_slice == 0) {", emit.indent(step.text, 4), "}",
                          "__syncthreads();  // later statements of the row may read what it wrote"]
            else:
                lines.append(step.text)
        rows = " * ".join(f"({size})" for size in sizes)
        cols = _cols(rows, task)
        if isinstance(cols, str):
            return cols
        grid = f"max(cdiv({rows}, COLS), 1)"
        new_plan = plan_with(form, plan, task, grid, {"BLOCK": BLOCK, "COLS": cols})
        if isinstance(new_plan, str):
            return new_plan
        return Emitted(kernel_text(form, emit.indent("\n".join(lines), 4)), new_plan, self.summary)


def _cols(rows: str, task: Task) -> int | str:
    """COLS at the task's sizes (COLS_CHOICES)."""
    try:
        count = expr.evaluate_int(rows, dict(task.sizes))
    except (expr.ExpressionError, ValueError, ZeroDivisionError) as error:
        return f"the row count {rows} at {task.sizes}: {error}"
    return next((c for c in COLS_CHOICES if -(-count // c) >= FULL_GRID), COLS_CHOICES[-1])


def _partials(r: Reduction) -> list[str]:
    size = BLOCK  # one slot per thread: BLOCK, as blockDim.x, is at most 1024
    found = [f"__shared__ {r.ctype} optiml_part_{r.name}[{size}];"]
    if r.index:
        found.append(f"__shared__ {r.index_ctype} optiml_part_{r.index}[{size}];")
    return found


def _split_loop(loop: LoopHole) -> list[str]:
    walk = spread_loop(loop, "optiml_slice", "optiml_slices")
    lines = [*set_aside(loop), "if (optiml_live) {", emit.indent("\n".join(walk), 4), "}"]
    for r in loop.reductions:
        lines += _combine(r)
    if loop.writes_memory and not loop.reductions:
        lines.append("__syncthreads();  // the next step may read what other slices wrote")
    return lines


def _combine(r: Reduction) -> list[str]:
    """Every thread of the row combines the row's slices, in slice order."""
    mine = "optiml_slice * COLS + optiml_lane"
    theirs = "optiml_k * COLS + optiml_lane"
    if not r.index:
        step = emit.combine(r.op, r.name, f"optiml_part_{r.name}[{theirs}]")
        return [f"optiml_part_{r.name}[{mine}] = {r.name};", "__syncthreads();",
                f"{r.name} = optiml_{r.name}_before;",
                f"for (int optiml_k = 0; optiml_k < optiml_slices; ++optiml_k) {r.name} = {step};",
                "__syncthreads();  // the partials are read before the next loop writes them"]
    op, rule = ARG_OPS[r.compare]
    better = ">" if op == "argmax" else "<"
    tie = "<" if rule == "first" else ">"  # the sentinel loses every tie either way
    return [f"optiml_part_{r.name}[{mine}] = {r.name};", f"optiml_part_{r.index}[{mine}] = {r.index};",
            "__syncthreads();",
            "for (int optiml_k = 0; optiml_k < optiml_slices; ++optiml_k) {",
            f"    const {r.ctype} optiml_ov = optiml_part_{r.name}[{theirs}];",
            f"    const {r.index_ctype} optiml_oi = optiml_part_{r.index}[{theirs}];",
            f"    if (optiml_ov {better} {r.name} || "
            f"(optiml_ov == {r.name} && optiml_oi {tie} {r.index})) {{",
            f"        {r.name} = optiml_ov;", f"        {r.index} = optiml_oi;", "    }", "}",
            "__syncthreads();  // the partials are read before the next loop writes them",
            # the row's pair replaces the one before the loop as the loop would have
            f"if (!({r.index} != ({r.index_ctype})({r.sentinel}) && "
            f"{r.name} {r.compare} optiml_{r.name}_before)) {{",
            f"    {r.name} = optiml_{r.name}_before;", f"    {r.index} = optiml_{r.index}_before;", "}"]

