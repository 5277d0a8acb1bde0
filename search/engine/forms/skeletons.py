"""Skeletons: schedules of a family that emit CUDA for any math in the form's holes.

Each skeleton states the family it schedules, the vocabulary intents it embodies
(lineage/engine/vocabulary.py), and its preconditions; `emit(form, plan, task)` returns
the kernel and its launch plan, or the reason it does not apply. The math is the
kernel's own text, moved, never rewritten: only how index points and row elements are
handed to threads changes, and reductions are combined across the block.

    map.grid_stride          every element, ITEMS per thread at a grid stride
    map.vec4                 float4 loads and stores (a direct map), scalar tail
    map.quads                a map that writes y[i] but reads elsewhere: four neighbouring
                             elements a thread, one float4 store (quads.py)
    rows.block_per_row       a block per row, the loops strided over its threads,
                             reductions by warp shuffles and one shared-slot step
    rows.split_strided       rows side by side in memory: a row per lane, its loops
                             split over the warps (columns.py)
    full.grid_stride_accumulate
                             a wave of blocks, each thread sums its slice in a register,
                             one block reduction and one atomic per block
    contraction.smem_register_tile
                             shared-memory tiles of both factors, a register tile of
                             outputs a thread (tiles.py)
    window.walk_rows         WALK neighbouring rows of an output column a thread, the
                             coordinates from the grid (walks.py)
    window.quads             four neighbouring outputs of a row a thread, each with its own
                             window work, one float4 store (quads.py)
    permutation.smem_tile    a tile of the two permuted coordinates staged through
                             shared memory: reads and writes both coalesced (transposes.py)
    scan.block_scan          a block per row, the running values by a block-wide scan of
                             the terms, each element's own work run with its value
                             (blockscans.py)
"""

from __future__ import annotations

import re
from typing import Any

from profiling.harness.spec import Task

from . import emit, strides
from .blockscans import BlockScan
from .columns import SplitStridedRows
from .quads import COMPONENTS, WindowQuads, map_prologue, narrow, quad_body, quad_work
from .skeleton_base import (
    DEFAULT_BLOCK,
    DEFAULT_ITEMS,
    DEFAULT_WAVE_BLOCKS,
    Emitted,
    Skeleton,
    block_row,
    flat_total,
    kernel_text,
    last_launch,
    launch_of,
    plan_with,
    set_aside,
    short_rows_problem,
    spread_loop,
    unflatten,
    uniform_lines,
)
from .tiles import SmemRegisterTile
from .transposes import SmemTile
from .types import FULL_REDUCE, MAP, ROWS, Form, LoopHole
from .walks import WalkRows


class GridStrideMap(Skeleton):
    name = "map.grid_stride"
    family = MAP
    intents = ("GRID_STRIDE", "UNROLL")
    families = ("grid_stride", "unroll")
    summary = "each thread takes ITEMS elements a grid stride apart; the loads of all of them are in flight"

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        total = " * ".join(f"({size})" for size in sizes)
        body = f"""    const long long optiml_total = {flat_total(form)};
    const long long optiml_stride = (long long)blockDim.x * gridDim.x;
    for (long long optiml_base = (long long)blockIdx.x * blockDim.x + threadIdx.x; optiml_base < optiml_total;
         optiml_base += optiml_stride * ITEMS) {{
#pragma unroll
        for (int optiml_u = 0; optiml_u < ITEMS; ++optiml_u) {{
            const long long optiml_flat = optiml_base + optiml_u * optiml_stride;
            if (optiml_flat < optiml_total) {{
{emit.indent(unflatten(form, "optiml_flat"), 16)}
{emit.indent(form.body, 16)}
            }}
        }}
    }}"""
        grid = f"max(cdiv({total}, BLOCK * ITEMS), 1)"
        new_plan = plan_with(form, plan, task, grid, {"BLOCK": DEFAULT_BLOCK, "ITEMS": DEFAULT_ITEMS})
        if isinstance(new_plan, str):
            return new_plan
        return Emitted(kernel_text(form, body), new_plan, self.summary)



class Vec4Map(Skeleton):
    name = "map.vec4"
    family = MAP
    intents = ("VEC4", "GRID_STRIDE")
    families = ("vectorize", "grid_stride")
    summary = ("float4 loads and stores where every pointer is 16-byte aligned, a grid-stride loop "
               "over the quads and a scalar tail")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        if not form.direct:
            return ("not a direct map: some access is not p[i] of the one index, or a write is conditional "
                    "(map.quads takes a map that writes its own element)")
        total = sizes[0]
        index = form.space[0].name
        pointers = sorted(set(form.reads) | set(form.writes))
        loads = "\n".join(f"const float4 {p}_v4 = reinterpret_cast<const float4*>({p})[optiml_q];"
                          for p in form.reads if p not in form.writes)
        for p in form.writes:
            value = f" = reinterpret_cast<const float4*>({p})[optiml_q]" if p in form.reads else ""
            loads += f"\nfloat4 {p}_v4{value};"
        components = []
        for component in COMPONENTS:
            lane = form.body
            for p in pointers:
                access = rf"\b{re.escape(p)}\s*\[\s*{re.escape(index)}\s*\]"
                lane = re.sub(access, f"{p}_v4.{component}", lane)
            components.append("{\n" + emit.indent(lane, 4) + "\n}")
        stores = "\n".join(f"reinterpret_cast<float4*>({p})[optiml_q] = {p}_v4;" for p in form.writes)
        aligned = " | ".join(f"(unsigned long long){p}" for p in pointers)
        quad = "\n".join([loads, *components, stores])
        prologue = f"{form.space[0].ctype} {index} = ({form.space[0].ctype})optiml_flat;"
        body = quad_body(form, quad, aligned, prologue)
        return self._emitted(form, plan, task, body, total)

    def _emitted(self, form: Form, plan: dict[str, Any], task: Task, body: str, total: str) -> Emitted | str:
        grid = f"max(cdiv({total}, 4 * BLOCK), 1)"
        new_plan = plan_with(form, plan, task, grid, {"BLOCK": DEFAULT_BLOCK})
        if isinstance(new_plan, str):
            return new_plan
        return Emitted(kernel_text(form, body), new_plan, self.summary)


class MapQuads(Vec4Map):
    """map.vec4's schedule for a map that is not direct: it writes its own element y[i]
    but reads elsewhere (quads.py). A card of its own: vec4's admission measured direct
    maps only."""

    name = "map.quads"
    intents = ("VEC4", "UNROLL")
    families = ("vectorize", "unroll")
    summary = ("four neighbouring elements a thread, each with the kernel's own work and its "
               "coordinates from the flat index, their results stored as one float4 (a pointer read "
               "only at the element's own index loaded as one)")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        if form.direct:
            return "a direct map: map.vec4 takes it with float4 loads of every pointer"
        total = " * ".join(f"({size})" for size in sizes)
        prologue = map_prologue(form, narrow(total, task, plan))
        work = quad_work(form, prologue)
        if isinstance(work, str):
            return work
        return self._emitted(form, plan, task, quad_body(form, *work, prologue), total)


class BlockPerRow(Skeleton):
    name = "rows.block_per_row"
    family = ROWS
    intents = ("BLOCK_PER_ROW", "WARP_SHUFFLE_REDUCE")
    # a row's threads read neighbouring addresses (coalesce) where one thread per row read
    # addresses a row apart, and a row has a block (parallelism)
    families = ("coalesce", "parallelism", "warp_reduce")
    summary = ("a block of BLOCK threads per row: each loop over the row strided over the block "
               "(coalesced), each reduction combined by warp shuffles and one shared-slot step")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        fixed = strides.literal_arguments(form, last_launch(plan).get("args", []))
        for loop in (step for step in form.steps if isinstance(step, LoopHole)):
            problem = strides.contiguity_problem(loop, form.helpers, fixed)
            if problem:
                return problem
        problem = short_rows_problem(form, plan, task)
        if problem:
            return problem
        lines, rows = block_row(form, sizes)
        reducers: dict[tuple[str, str], str] = {}
        for step in form.steps:
            lines += _strided_loop(step, reducers) if isinstance(step, LoopHole) else uniform_lines(step)
        body = emit.indent("\n".join(lines), 4)
        new_plan = plan_with(form, plan, task, f"max({rows}, 1)", {"BLOCK": DEFAULT_BLOCK})
        if isinstance(new_plan, str):
            return new_plan
        # a zero-row launch would be refused; rows = 0 never occurs at the task's sizes
        return Emitted(kernel_text(form, body, "\n".join(reducers.values())), new_plan, self.summary)


def _strided_loop(loop: LoopHole, reducers: dict[tuple[str, str], str]) -> list[str]:
    for r in loop.reductions:
        if r.index:
            reducers.setdefault((emit.block_arg_reduce_name(r), ""), emit.block_arg_reduce(r))
        else:
            reducers.setdefault((r.op, r.ctype), emit.block_reduce(r.op, r.ctype, r.identity))
    lines = [*set_aside(loop), *spread_loop(loop, "threadIdx.x", "blockDim.x")]
    for r in loop.reductions:
        if r.index:  # the block's pair replaces the one before the loop as the loop would have
            lines += [f"{emit.block_arg_reduce_name(r)}({r.name}, {r.index});",
                      f"if (!({r.index} != ({r.index_ctype})({r.sentinel}) && "
                      f"{r.name} {r.compare} optiml_{r.name}_before)) {{",
                      f"    {r.name} = optiml_{r.name}_before;",
                      f"    {r.index} = optiml_{r.index}_before;", "}"]
            continue
        reduced = f"{emit.block_reduce_name(r.op, r.ctype)}({r.name})"
        lines.append(f"{r.name} = {emit.combine(r.op, f'optiml_{r.name}_before', reduced)};")
    if loop.writes_memory and not loop.reductions:
        lines.append("__syncthreads();  // the next step may read what other threads wrote")
    return lines


class GridStrideAccumulate(Skeleton):
    name = "full.grid_stride_accumulate"
    family = FULL_REDUCE
    intents = ("GRID_STRIDE_ACCUMULATE", "WARP_SHUFFLE_REDUCE")
    families = ("grid_stride", "warp_reduce")
    summary = ("a wave of blocks; each thread sums its grid-stride slice in a register, the block "
               "combines them by shuffles, and one atomic per block adds the block's total")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        total = sizes[0]
        axis = form.space[0]
        body = f"""    const long long optiml_total = (long long)({axis.bound});
    float optiml_sum = 0.0f;
    for (long long optiml_flat = (long long)blockIdx.x * blockDim.x + threadIdx.x; optiml_flat < optiml_total;
         optiml_flat += (long long)blockDim.x * gridDim.x) {{
        {axis.ctype} {axis.name} = ({axis.ctype})optiml_flat;
{emit.indent(form.body, 8)}
        optiml_sum += ({form.total});
    }}
    optiml_sum = {emit.block_reduce_name("sum", "float")}(optiml_sum);
    if (threadIdx.x == 0) atomicAdd({form.into}, {form.finish});"""
        # named after the kernel: names with optiml_ are the harness's own (sanitize.RESERVED)
        zeroing = f"{form.kernel}_zero_total"
        zero = f"extern \"C\" __global__ void {zeroing}(float* total) {{\n    total[0] = 0.0f;\n}}\n"
        position = form.params.index(form.into)
        into_arg = launch_of(form, plan)["args"][position]
        before = [{"kernel": zeroing, "grid": [1], "block": [1], "shared_bytes": 0,
                   "args": [into_arg]}]
        grid = f"max(min(cdiv({total}, BLOCK), WAVE_BLOCKS), 1)"
        tunables = {"BLOCK": DEFAULT_BLOCK, "WAVE_BLOCKS": DEFAULT_WAVE_BLOCKS}
        new_plan = plan_with(form, plan, task, grid, tunables, before)
        if isinstance(new_plan, str):
            return new_plan
        helpers = zero + "\n" + emit.block_reduce("sum", "float", "0.0f")
        return Emitted(kernel_text(form, body, helpers), new_plan, self.summary)


SKELETONS = (GridStrideMap(), Vec4Map(), MapQuads(), BlockPerRow(), SplitStridedRows(),
             GridStrideAccumulate(), SmemRegisterTile(), WalkRows(), WindowQuads(), SmemTile(), BlockScan())


def for_family(family: str) -> list:
    return [s for s in SKELETONS if s.family == family]


def by_name(name: str):
    return next(s for s in SKELETONS if s.name == name)
