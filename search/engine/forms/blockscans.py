"""scan.block_scan: a block per row, the row's running values computed by a block-wide
scan of its terms, each element's own work run with the value it would have had.

The row goes by in chunks of BLOCK x ITEMS elements. Warp w takes 32 x ITEMS neighbouring
elements of a chunk, ITEMS rows of 32 (lane l reads element 32 i + l of its segment:
every load coalesced, ITEMS of them in flight a thread). Each thread computes its terms
(the statements the term needs, then the term); each row of 32 is scanned inclusively by
`__shfl_up_sync` (5 steps) and chained to the one before it, giving each element the
warp's running value before it; the warps' totals meet in 32 shared slots, and each warp
adds those of the warps before it and the chunk's carry. Then each element runs the
loop's own body, the running value set to what the sequential loop would have held
before that iteration, so the kernel's own update and its own writes (inclusive or
exclusive, any epilogue) happen as written. The combination order is a tree, not the
loop's: sums and products round differently (inside the task's tolerance), max and min
are exact.

Tunables: BLOCK threads a row (a multiple of 32, at most 1024), ITEMS elements a thread
a chunk.
"""

from __future__ import annotations

from typing import Any

from profiling.harness.spec import Task

from . import emit, strides
from .skeleton_base import (
    DEFAULT_BLOCK,
    DEFAULT_ITEMS,
    Emitted,
    Skeleton,
    block_row,
    kernel_text,
    last_launch,
    plan_with,
    short_rows_problem,
    uniform_lines,
)
from .types import SCAN, Form, LoopHole


class BlockScan(Skeleton):
    name = "scan.block_scan"
    family = SCAN
    intents = ("BLOCK_PER_ROW", "WARP_SHUFFLE_SCAN")
    families = ("coalesce", "parallelism", "warp_reduce")
    summary = ("a block per row: the terms of ITEMS x BLOCK elements at a time scanned by warp shuffles "
               "and one shared step across the warps, each element's own work run with its running value")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        loop = next(step for step in form.steps if isinstance(step, LoopHole))
        fixed = strides.literal_arguments(form, last_launch(plan).get("args", []))
        problem = strides.contiguity_problem(loop, form.helpers, fixed) or \
            short_rows_problem(form, plan, task)
        if problem:
            return problem
        lines, rows = block_row(form, sizes)
        for step in form.steps:
            lines += [_scan(form, step)] if isinstance(step, LoopHole) else uniform_lines(step)
        body = emit.indent("\n".join(lines), 4)
        tunables = {"BLOCK": DEFAULT_BLOCK, "ITEMS": DEFAULT_ITEMS}
        new_plan = plan_with(form, plan, task, f"max({rows}, 1)", tunables)
        if isinstance(new_plan, str):
            return new_plan
        return Emitted(kernel_text(form, body), new_plan, self.summary)


def _scan(form: Form, loop: LoopHole) -> str:
    r = loop.reductions[0]
    v = loop.variables[0]
    kind, identity = r.ctype, r.identity

    def combine(a: str, b: str) -> str:
        return f"({emit.combine(r.op, a, b)})"

    if form.reverse:
        position = f"({v.ctype})((long long)({v.bound}) - 1 - optiml_p)"
    elif loop.start == "0":
        position = f"({v.ctype})optiml_p"
    else:
        position = f"({v.ctype})(({loop.start}) + optiml_p)"
    element = "const long long optiml_p = optiml_segment + optiml_i * 32 + optiml_lane;"
    term = "\n".join([element, f"optiml_term[optiml_i] = {identity};", "if (optiml_p < optiml_n) {",
                      f"    const {v.ctype} {v.name} = {position};",
                      *([emit.indent(form.body, 4)] if form.body else []),
                      f"    optiml_term[optiml_i] = ({form.total});", "}"])
    run = "\n".join([element, "if (optiml_p < optiml_n) {", f"    const {v.ctype} {v.name} = {position};",
                     f"    {r.name} = {combine('optiml_before', 'optiml_term[optiml_i]')};",
                     emit.indent(loop.body, 4), "}"])
    each = "#pragma unroll\nfor (int optiml_i = 0; optiml_i < ITEMS; ++optiml_i)"
    return f"""{{
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK is whole warps, at most 32 of them");
    __shared__ {kind} optiml_totals[32];
    const long long optiml_n = (long long)({v.bound});
    const int optiml_lane = threadIdx.x % 32, optiml_warp = threadIdx.x / 32;
    {kind} optiml_carry = {r.name};  // the running value before the row's first element
    for (long long optiml_chunk = 0; optiml_chunk < optiml_n; optiml_chunk += (long long)BLOCK * ITEMS) {{
        const long long optiml_segment = optiml_chunk + (long long)optiml_warp * 32 * ITEMS;
        {kind} optiml_term[ITEMS];
{emit.indent(each, 8)} {{
{emit.indent(term, 12)}
        }}
        // each element's running value within its warp's segment, before it
        {kind} optiml_warp_run = {identity};
{emit.indent(each, 8)} {{
            {kind} optiml_in = optiml_term[optiml_i];
#pragma unroll
            for (int optiml_d = 1; optiml_d < 32; optiml_d *= 2) {{
                const {kind} optiml_up = __shfl_up_sync(0xffffffffu, optiml_in, optiml_d);
                if (optiml_lane >= optiml_d) optiml_in = {combine('optiml_up', 'optiml_in')};
            }}
            {kind} optiml_ex = __shfl_up_sync(0xffffffffu, optiml_in, 1);
            if (optiml_lane == 0) optiml_ex = {identity};
            optiml_term[optiml_i] = {combine('optiml_warp_run', 'optiml_ex')};
            optiml_warp_run = {combine('optiml_warp_run', '__shfl_sync(0xffffffffu, optiml_in, 31)')};
        }}
        if (optiml_lane == 0) optiml_totals[optiml_warp] = optiml_warp_run;
        __syncthreads();
        {kind} optiml_before = optiml_carry;  // the chunk's carry and the warps before this one
        for (int optiml_w = 0; optiml_w < optiml_warp; ++optiml_w)
            optiml_before = {combine('optiml_before', 'optiml_totals[optiml_w]')};
        {kind} optiml_next = optiml_before;
        for (int optiml_w = optiml_warp; optiml_w < BLOCK / 32; ++optiml_w)
            optiml_next = {combine('optiml_next', 'optiml_totals[optiml_w]')};
        __syncthreads();  // every warp has read the totals before the next chunk writes them
{emit.indent(each, 8)} {{
{emit.indent(run, 12)}
        }}
        optiml_carry = optiml_next;
    }}
    {r.name} = optiml_carry;  // the loop's final value, for what follows it
}}"""
