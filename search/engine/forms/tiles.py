"""The contraction's skeleton: shared-memory tiles of both factors and a register tile of
outputs per thread (SMEM_TILE, REG_TILE), the classic SIMT GEMM of CUTLASS's threadblock
-> thread layering, with the kernel's own factors, initial value and epilogue.

A block computes a 64 x 64 tile of outputs in 16-deep steps of the reduction: its 256
threads load a 64 x 16 tile of the first factor and a 16 x 64 tile of the second (each
element evaluated with the kernel's own expression, out-of-range ones as 0), then each
thread accumulates a 4 x 4 set of outputs, rows ty + 16 i and columns tx + 16 j, so a
warp's stores and its reads of the second tile are contiguous. Each output then runs the
kernel's own work before its loop (the accumulator's initial value), adds its sum, and
runs the epilogue, under the kernel's own bounds.
"""

from __future__ import annotations

from typing import Any

from profiling.harness.spec import Task

from . import emit
from .skeleton_base import Emitted, Skeleton, kernel_text, last_launch
from .types import CONTRACTION, Form

TILE = 64  # outputs per block side: 16 x 16 threads x 4 x 4 outputs each
DEPTH = 16  # reduction steps per shared-memory tile: 2 x 64 x 16 x 4 B = 8 KB a block
THREADS = 256


class SmemRegisterTile(Skeleton):
    name = "contraction.smem_register_tile"
    family = CONTRACTION
    intents = ("SMEM_TILE", "REG_TILE")
    summary = ("64 x 64 outputs a block from 16-deep shared-memory tiles of both factors, "
               "4 x 4 outputs a thread in registers")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        rows, cols = sizes
        grid = [f"max(cdiv({cols}, {TILE}), 1)", f"max(cdiv({rows}, {TILE}), 1)"]
        problem = emit.grid_problem(grid, [task.sizes, *task.l0_sizes], plan.get("tunables", {}))
        if problem:
            return problem
        launch = {"kernel": form.kernel, "grid": grid, "block": [THREADS], "shared_bytes": 0,
                  "args": list(last_launch(plan).get("args", []))}
        new_plan = {"launches": [launch], "scratch": list(plan.get("scratch", [])),
                    "tunables": dict(plan.get("tunables", {}))}
        return Emitted(kernel_text(form, _body(form)), new_plan, self.summary)


def _load(form: Form, axis, factor: str, outer: str, depth_index: str, tile: str) -> str:
    k = form.reduction
    return f"""{{
    float optiml_v = 0.0f;
    const {axis.ctype} {axis.name} = ({axis.ctype})({outer});
    const {k.ctype} {k.name} = ({k.ctype})(optiml_k0 + {depth_index});
    if ({axis.name} < ({axis.bound}) && {k.name} < ({k.bound})) optiml_v = {factor};
    {tile} = optiml_v;
}}"""


def _body(form: Form) -> str:
    row, col = form.space
    k = form.reduction
    load_a = _load(form, row, form.factors[0], "optiml_m0 + optiml_e / 16", "optiml_e % 16",
                   "optiml_As[optiml_e % 16][optiml_e / 16]")
    load_b = _load(form, col, form.factors[1], "optiml_n0 + optiml_e % 64", "optiml_e / 64",
                   "optiml_Bs[optiml_e / 64][optiml_e % 64]")
    total = f"{form.accumulator} = {form.accumulator} + optiml_c[optiml_i][optiml_j];"
    epilogue = "\n".join(s for s in (form.body, total, form.epilogue) if s)
    a_row = "optiml_a[optiml_i] = optiml_As[optiml_kk][optiml_ty + 16 * optiml_i];"
    b_col = "optiml_b[optiml_j] = optiml_Bs[optiml_kk][optiml_tx + 16 * optiml_j];"
    fma = "optiml_c[optiml_i][optiml_j] += optiml_a[optiml_i] * optiml_b[optiml_j];"
    return f"""    __shared__ float optiml_As[{DEPTH}][{TILE} + 1];  // +1: no bank conflicts on stores
    __shared__ float optiml_Bs[{DEPTH}][{TILE}];
    const int optiml_tx = threadIdx.x % 16, optiml_ty = threadIdx.x / 16;
    const long long optiml_m0 = (long long)blockIdx.y * {TILE};
    const long long optiml_n0 = (long long)blockIdx.x * {TILE};
    float optiml_c[4][4] = {{}};
    for (long long optiml_k0 = 0; optiml_k0 < (long long)({k.bound}); optiml_k0 += {DEPTH}) {{
        for (int optiml_e = threadIdx.x; optiml_e < {TILE * DEPTH}; optiml_e += {THREADS}) {{
{emit.indent(load_a, 12)}
        }}
        for (int optiml_e = threadIdx.x; optiml_e < {TILE * DEPTH}; optiml_e += {THREADS}) {{
{emit.indent(load_b, 12)}
        }}
        __syncthreads();
#pragma unroll
        for (int optiml_kk = 0; optiml_kk < {DEPTH}; ++optiml_kk) {{
            float optiml_a[4], optiml_b[4];
#pragma unroll
            for (int optiml_i = 0; optiml_i < 4; ++optiml_i) {a_row}
#pragma unroll
            for (int optiml_j = 0; optiml_j < 4; ++optiml_j) {b_col}
#pragma unroll
            for (int optiml_i = 0; optiml_i < 4; ++optiml_i)
#pragma unroll
                for (int optiml_j = 0; optiml_j < 4; ++optiml_j) {fma}
        }}
        __syncthreads();
    }}
    for (int optiml_i = 0; optiml_i < 4; ++optiml_i) {{
        for (int optiml_j = 0; optiml_j < 4; ++optiml_j) {{
            const {row.ctype} {row.name} = ({row.ctype})(optiml_m0 + optiml_ty + 16 * optiml_i);
            const {col.ctype} {col.name} = ({col.ctype})(optiml_n0 + optiml_tx + 16 * optiml_j);
            if ({row.name} < ({row.bound}) && {col.name} < ({col.bound})) {{
{emit.indent(epilogue, 16)}
            }}
        }}
    }}"""
