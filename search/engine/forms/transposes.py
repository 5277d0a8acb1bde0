"""permutation.smem_tile: a permutation's values staged through a shared-memory tile so
that both its reads and its write are coalesced.

A block takes a TILE x TILE tile of the two coordinates the form names (`along`: A, the
one the reads walk, and B, the one the write walks) for one point of the other
coordinates (the planes, `blockIdx.z`, grid-strided past 65,535). First each warp
computes the kernel's own value for 32 neighbouring values of A (its reads side by
side) and stores them in a row of the tile; after a barrier each warp takes a column of
the tile, 32 neighbouring values of B, and writes them side by side. The tile is TILE +
1 wide, so a warp reading down a column meets 32 different banks (SMEM_PADDING). The
grid's x counts tiles along A, its y along B (B's extent at most 65,535 tiles), with no
division per thread: the kernel is memory-bound, and the few instructions before its
first load are what a thread per element pays.

Each thread computes all its values of the tile (TILE * TILE / BLOCK of them) into
registers before it stores any: its reads are in flight together, which a loop that
stores each value before loading the next does not allow.

Tunables: BLOCK threads a block (a multiple of TILE dividing TILE * TILE).
"""

from __future__ import annotations

import re
from typing import Any

from profiling.harness.spec import Task

from . import emit
from .skeleton_base import DEFAULT_BLOCK, Emitted, Skeleton, kernel_text, launch_of, size_expression
from .types import PERMUTATION, Form

TILE = 32  # a warp across the tile's rows, and 32 banks down its columns
MAX_GRID_Z = 65535
MAX_PLANES = 2**31 - 1  # the planes' digits are worked out in 32 bits (a division is 4x cheaper)


class SmemTile(Skeleton):
    name = "permutation.smem_tile"
    family = PERMUTATION
    intents = ("SMEM_TILE", "SMEM_PADDING")
    families = ("coalesce", "tile")
    summary = ("a TILE x TILE tile of the two permuted coordinates a block: the values computed "
               "with the reads side by side, stored in a padded shared tile, written out down its "
               "columns with the writes side by side")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        by_name = {c.name: c for c in form.coordinates}
        a, b = (by_name[name] for name in form.along)
        planes = [c for c in form.coordinates if c.name not in form.along]
        try:
            extent_a, extent_b, *plane_sizes = (size_expression(form, c.bound, plan, task)
                                                for c in (a, b, *planes))
        except emit.PlanProblem as error:
            return str(error)
        planes_plan = " * ".join(f"({s})" for s in plane_sizes) or "1"
        grid = [f"cdiv({extent_a}, {TILE})", f"cdiv({extent_b}, {TILE})",
                f"max(min({planes_plan}, {MAX_GRID_Z}), 1)"]
        tunables = {"BLOCK": DEFAULT_BLOCK}
        settings = {**plan.get("tunables", {}), **tunables}
        problem = emit.grid_problem(grid, [task.sizes, *task.l0_sizes], settings) or \
            emit.check_at_sizes(f"{MAX_PLANES} - ({planes_plan})", [task.sizes, *task.l0_sizes], settings)
        if problem:
            return problem
        kind = element_type(form.signature, form.into)
        if kind is None:
            return f"the type of {form.into}'s elements is not read from the signature"
        body = _body(form, a, b, planes, kind)
        launch = {"kernel": form.kernel, "grid": grid, "block": ["BLOCK"], "shared_bytes": 0,
                  "args": list(launch_of(form, plan)["args"])}
        new_plan = {"launches": [launch], "scratch": list(plan.get("scratch", [])),
                    "tunables": {**plan.get("tunables", {}), **tunables}}
        return Emitted(kernel_text(form, body), new_plan, self.summary)


def element_type(signature: str, pointer: str) -> str | None:
    """`float` for `float* __restrict__ y` (the written pointer's element type), or None."""
    pattern = rf"([A-Za-z_][\w ]*?)\s*\*\s*(?:const\s+)?(?:__restrict__\s+)?{re.escape(pointer)}\s*[,)]"
    found = re.search(pattern, signature)
    if found is None:
        return None
    words = [w for w in found.group(1).split() if w not in ("const", "volatile")]
    return " ".join(words) or None


def _planes(planes) -> tuple[str, list[str]]:
    """(the number of plane points, declarations of the plane coordinates from optiml_rest)."""
    count = " * ".join(f"(long long)({c.bound})" for c in planes) or "1"
    lines, inner = [], []
    for c in reversed(planes):
        divisor = " * ".join(f"(unsigned)({x})" for x in inner)
        value = f"(optiml_rest / ({divisor}))" if divisor else "optiml_rest"
        if c is not planes[0]:
            value = f"({value} % (unsigned)({c.bound}))"
        lines.append(f"const {c.ctype} {c.name} = ({c.ctype}){value};")
        inner.append(c.bound)
    return count, lines[::-1]


def _body(form: Form, a, b, planes, kind: str) -> str:
    """Each thread first computes its PER values of the tile (its reads all in flight at
    once, in registers), then stores them; after the barrier it writes PER values of the
    tile's columns. The tile's origin is kept in the coordinates' own types: a kernel
    whose coordinate is an int never has more than an int's worth of it."""
    count, plane_lines = _planes(planes)
    flat = len(form.space) == 1
    inside = f"{a.name} < ({a.bound}) && {b.name} < ({b.bound})"
    if flat:
        inside += f" && {form.space[0].name} < ({form.space[0].bound})"
    rebuild = form.rebuild if flat else ""

    def at(a_offset: str, b_offset: str) -> str:
        return "\n".join([f"const {a.ctype} {a.name} = optiml_a0 + ({a.ctype})({a_offset});",
                          f"const {b.ctype} {b.name} = optiml_b0 + ({b.ctype})({b_offset});",
                          *([rebuild] if rebuild else [])])

    row = "const int optiml_k = optiml_y + optiml_i * (BLOCK / 32);"
    load = "\n".join([row, at("optiml_x", "optiml_k"), f"if ({inside}) {{",
                      *([emit.indent(form.body, 4)] if form.body else []),
                      f"    optiml_v[optiml_i] = ({form.value});", "}"])
    store = "\n".join([row, at("optiml_k", "optiml_x"), f"if ({inside}) {{",
                       f"    {form.into}[{form.written_at}] = optiml_tile[optiml_x][optiml_k];", "}"])
    each = "#pragma unroll\nfor (int optiml_i = 0; optiml_i < OPTIML_PER; ++optiml_i)"
    stage = "\n".join([each, "    optiml_tile[optiml_y + optiml_i * (BLOCK / 32)][optiml_x] = "
                              "optiml_v[optiml_i];"])
    return f"""    static_assert(BLOCK % {TILE} == 0 && ({TILE} * {TILE}) % BLOCK == 0,
                  "BLOCK is whole rows of the tile, and the tile whole blocks");
    constexpr int OPTIML_PER = {TILE} * {TILE} / BLOCK;  // values of the tile a thread moves
    __shared__ {kind} optiml_tile[{TILE}][{TILE} + 1];
    const int optiml_x = threadIdx.x % {TILE}, optiml_y = threadIdx.x / {TILE};
    const {a.ctype} optiml_a0 = ({a.ctype})blockIdx.x * {TILE};
    const {b.ctype} optiml_b0 = ({b.ctype})blockIdx.y * {TILE};
    const unsigned optiml_planes = (unsigned)({count});
    for (unsigned optiml_rest = blockIdx.z; optiml_rest < optiml_planes; optiml_rest += gridDim.z) {{
{"".join(emit.indent(line, 8) + chr(10) for line in plane_lines)}        {kind} optiml_v[OPTIML_PER] = {{}};
{emit.indent(each, 8)} {{
{emit.indent(load, 12)}
        }}
{emit.indent(stage, 8)}
        __syncthreads();
{emit.indent(each, 8)} {{
{emit.indent(store, 12)}
        }}
        __syncthreads();
    }}"""
