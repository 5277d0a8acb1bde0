"""The contraction's skeleton: shared-memory tiles of both factors and a register tile of
outputs per thread (SMEM_TILE, REG_TILE), the classic SIMT GEMM of CUTLASS's threadblock
-> thread layering, with the kernel's own factors, initial value and epilogue.

A block of 256 threads (16 x 16) computes a T x T tile of outputs (T = 128 when both
output extents are at least 256 at the task's sizes, or at least 128 with a wave of
blocks, else 64; an extent made of several coordinates, a convolution's images and
pixels, is one merged index split back into them where read) for one batch point
(blockIdx.z, unflattened into the batch coordinates), in steps of D = OPTIML_STEP / T
(1024 / T by default) along the reduction. Each step the threads load a T x D tile of the
first factor and a D x T tile of the second, both stored k-major and padded by 4 floats
so the stores do not conflict;
each element is evaluated with the kernel's own expression (out-of-range ones as 0), and
neighbouring threads load along whichever index the factor's memory is contiguous in (k
for A[row * K + k], the column for B[k * N + col], k for a transposed W[col * K + k]); each
thread then reads T/16 values of each tile as float4s (rows ty*4 + 64h + r, columns
tx*4 + 64h + c) and accumulates the T/16 x T/16 products in registers. Each output then
runs the kernel's own work before its loop (the accumulator's initial value), adds its
sum, and runs the epilogue, under its coordinates' bounds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from profiling.harness import expr
from profiling.harness.spec import Task

from ..rewrites.syntax import parse, text, walk
from . import contraction, emit, strides
from .skeleton_base import Emitted, Skeleton, kernel_text, launch_of, size_expression
from .types import CONTRACTION, Form

THREADS = 256  # 16 x 16
# Compile-time switches, each overridable with -D (bench/contraction_variants.py times them):
# OPTIML_PREFETCH loads the next step's elements into registers while a step computes (on:
# 1.02x on addmm_gelu, 1.13x on conv1x1 against off, H100, bench/results/2026-12-07-h100-
# contraction-variants.json);
# OPTIML_MIN_BLOCKS is __launch_bounds__'s blocks an SM (2: at most 128 registers a thread);
# OPTIML_STEP is T x D, the elements of each factor a step (1024: D = 8 at T = 128, four
# loads a thread; 2048 halves the steps and their barriers, eight loads a thread).
# OPTIML_STAGES 2 double-buffers the tiles in shared memory (prefetching into registers):
# one barrier a step instead of two.
SWITCHES = {"OPTIML_PREFETCH": 1, "OPTIML_MIN_BLOCKS": 2, "OPTIML_STEP": 1024, "OPTIML_STAGES": 1}
DEFINES = "\n".join(f"#ifndef {name}\n#define {name} {value}\n#endif" for name, value in SWITCHES.items())
LARGE = 256  # both output extents at least this at the task's sizes: 128 x 128 tiles
WAVE_BLOCKS = 132  # or both at least 128 and this many 128 x 128 blocks (an H100's SMs)


class SmemRegisterTile(Skeleton):
    name = "contraction.smem_register_tile"
    family = CONTRACTION
    intents = ("SMEM_TILE", "REG_TILE")
    families = ("tile",)
    summary = ("64 x 64 or 128 x 128 outputs a block from shared-memory tiles of both factors, "
               "4 x 4 or 8 x 8 outputs a thread in registers, read from shared memory as float4")

    def _emit(self, form: Form, plan: dict[str, Any], task: Task, sizes: list[str]) -> Emitted | str:
        if not form.coordinates:
            return "no output coordinates (a contraction lifted before they were read)"
        try:
            extents = [size_expression(form, c.bound, plan, task) for c in form.coordinates]
            covers = [(size_expression(form, b, plan, task), size_expression(form, d, plan, task))
                      for b, d in form.covers]
        except emit.PlanProblem as error:
            return str(error)
        points = [task.sizes, *task.l0_sizes]
        tunables = plan.get("tunables", {})
        for bound, divisor in covers:
            for point in points:
                values = {**point, **tunables}
                if expr.evaluate_int(f"({bound}) % ({divisor})", values) != 0:
                    return f"{bound} is not a multiple of {divisor} at {point}: outputs would be dropped"
        *batch, rows, cols = extents
        form = _narrowed(form, extents[-2:], points, tunables)
        tile = 128 if _large(rows, cols, batch, {**task.sizes, **tunables}) else 64
        grid = [f"max(cdiv({cols}, {tile}), 1)", f"max(cdiv({rows}, {tile}), 1)"]
        if batch:
            grid.append(" * ".join(f"({b})" for b in batch))
        problem = emit.grid_problem(grid, points, tunables)
        if problem:
            return problem
        launch = {"kernel": form.kernel, "grid": grid, "block": [THREADS], "shared_bytes": 0,
                  "args": list(launch_of(form, plan)["args"])}
        new_plan = {"launches": [launch], "scratch": list(plan.get("scratch", [])),
                    "tunables": dict(tunables)}
        # two blocks an SM by default: at most 128 registers a thread (the 8 x 8 tile needs
        # about that without prefetching; with it, ptxas spills 32-52 bytes at sm_90)
        source = kernel_text(form, _body(form, tile), helpers=DEFINES).replace(
            "__global__ void ", f"__global__ void __launch_bounds__({THREADS}, OPTIML_MIN_BLOCKS) ", 1)
        return Emitted(source, new_plan,
                       self.summary + f" ({tile} x {tile} here)")


def _narrowed(form: Form, extents: list[str], points: list[dict], tunables: dict) -> Form:
    """A merged tile index (images x pixels) as an int where its extent, and so every
    product of its digits' extents, is under 2^31 at every size the task runs (L1 and
    each L0): its digits are then worked out with 32-bit divisions."""
    merged = dict(form.merged)
    coordinates = list(form.coordinates)
    for position, extent in zip((len(coordinates) - 2, len(coordinates) - 1), extents, strict=True):
        axis = coordinates[position]
        if axis.name in merged and all(expr.evaluate_int(extent, {**point, **tunables}) < 2**31 - 2**16
                                       for point in points):
            coordinates[position] = replace(axis, ctype="int")
    return replace(form, coordinates=tuple(coordinates))


def _large(rows: str, cols: str, batch: list[str], values: dict[str, int]) -> bool:
    """128 x 128 tiles where both output extents are at least LARGE, or at least 128 with
    a wave of such blocks for the GPU (a convolution's 128 channels by its many pixels);
    else 64 x 64, so that small products still spread over the SMs."""
    extents = [expr.evaluate_int(e, values) for e in (rows, cols)]
    if min(extents) >= LARGE:
        return True
    blocks = -(-extents[0] // 128) * -(-extents[1] // 128)
    for b in batch:
        blocks *= expr.evaluate_int(b, values)
    return min(extents) >= 128 and blocks >= WAVE_BLOCKS


def _batch(form: Form) -> str:
    """The batch coordinates from blockIdx.z, fastest last: `const int n = ...;`."""
    *batch, _, _ = form.coordinates
    if not batch:
        return ""
    lines = ["long long optiml_z = blockIdx.z;"]
    for coordinate in reversed(batch):
        lines.append(f"const {coordinate.ctype} {coordinate.name} = ({coordinate.ctype})"
                     f"(optiml_z % (long long)({coordinate.bound}));")
        lines.append(f"optiml_z /= (long long)({coordinate.bound});")
    return "\n".join(lines)


def _load(form: Form, coordinate, factor: str, setup: str, outer: str, depth_index: str, store: str) -> str:
    """One element of a factor's tile, at step `optiml_k_at`, into `store` (a register)."""
    k = form.reduction
    value = f"{{\n{emit.indent(setup, 4)}\n    optiml_v = {factor};\n}}" if setup else f"optiml_v = {factor};"
    return f"""{{
    float optiml_v = 0.0f;
    const {coordinate.ctype} {coordinate.name} = ({coordinate.ctype})({outer});
    const {k.ctype} {k.name} = ({k.ctype})(optiml_k_at + {depth_index});
    if ({coordinate.name} < ({coordinate.bound}) && {k.name} < ({k.bound})) {value}
    {store} = optiml_v;
}}"""


def _fetch(load_a: str, load_b: str, at: str) -> str:
    """Each thread's OPTIML_STEP / THREADS elements of both tiles at step `at`, into registers."""
    return f"""{{
    const long long optiml_k_at = {at};
#pragma unroll
    for (int optiml_f = 0; optiml_f < optiml_per_thread; ++optiml_f) {{
        const int optiml_e = threadIdx.x + optiml_f * {THREADS};
{emit.indent(load_a, 8)}
{emit.indent(load_b, 8)}
    }}
}}"""


def _products(per: int) -> str:
    """A step's products from buffer optiml_s: each thread's per x per outputs, reading its
    rows and columns as float4s (rows ty*4 + 64h + r, columns tx*4 + 64h + c)."""
    return f"""#pragma unroll
for (int optiml_kk = 0; optiml_kk < optiml_depth; ++optiml_kk) {{
    float optiml_a[{per}], optiml_b[{per}];
#pragma unroll
    for (int optiml_h = 0; optiml_h < {per // 4}; ++optiml_h) {{
        const float4 optiml_x =
            *reinterpret_cast<const float4*>(&optiml_As[optiml_s][optiml_kk][optiml_ty * 4 + 64 * optiml_h]);
        const float4 optiml_y =
            *reinterpret_cast<const float4*>(&optiml_Bs[optiml_s][optiml_kk][optiml_tx * 4 + 64 * optiml_h]);
        optiml_a[4 * optiml_h] = optiml_x.x; optiml_a[4 * optiml_h + 1] = optiml_x.y;
        optiml_a[4 * optiml_h + 2] = optiml_x.z; optiml_a[4 * optiml_h + 3] = optiml_x.w;
        optiml_b[4 * optiml_h] = optiml_y.x; optiml_b[4 * optiml_h + 1] = optiml_y.y;
        optiml_b[4 * optiml_h + 2] = optiml_y.z; optiml_b[4 * optiml_h + 3] = optiml_y.w;
    }}
#pragma unroll
    for (int optiml_i = 0; optiml_i < {per}; ++optiml_i)
#pragma unroll
        for (int optiml_j = 0; optiml_j < {per}; ++optiml_j)
            optiml_c[optiml_i][optiml_j] += optiml_a[optiml_i] * optiml_b[optiml_j];
}}"""


def k_fastest(factor: str, coordinate: str, k: str, default: bool, setup: str = "") -> bool:
    """Whether neighbouring threads should load a factor's tile along k (A[row * K + k])
    rather than along its coordinate (At[k * M + row]): the order in which its reads are
    contiguous, measured (strides.py) on every subscript of the factor, read through the
    locals its setup declares; `default` when neither or both are."""
    tree = parse(f"void optiml_factor() {{ float optiml_v = {factor}; }}")
    locals_ = emit.uniform_locals(setup)
    along_k = along_coordinate = True
    found = False
    for node in walk(tree.root_node):
        if node.type == "subscript_expression":
            index = strides.through(text(node.child_by_field_name("indices"))[1:-1], locals_, keep="")
            found = True
            along_k &= strides.stride(index, k) in (1, -1)
            along_coordinate &= strides.stride(index, coordinate) in (1, -1)
    if not found or along_k == along_coordinate:
        return default
    return along_k


def _body(form: Form, tile: int) -> str:
    *_, row, col = form.coordinates
    k = form.reduction
    depth, per = "optiml_depth", tile // 16
    # each tile is loaded in the order its factor's memory is contiguous in
    # a flattened nest (a convolution's taps) is contiguous along k for its innermost loop
    # only; the coordinate, for a whole tile row
    # a merged coordinate (images and pixels) is split into the kernel's own before use
    setups = ["\n".join(t for t in (contraction.unmerge(form, axis.name, axis.ctype), setup) if t)
              for axis, setup in zip((row, col), form.setups or ("", ""), strict=True)]
    nest = k.name == contraction.NEST_K
    a_on_k = k_fastest(form.factors[0], row.name, k.name, default=not nest, setup=setups[0])
    b_on_k = k_fastest(form.factors[1], col.name, k.name, default=False, setup=setups[1])
    outer_a, step_a = ((f"optiml_e / {depth}", f"optiml_e % {depth}") if a_on_k
                       else (f"optiml_e % {tile}", f"optiml_e / {tile}"))
    outer_b, step_b = ((f"optiml_e / {depth}", f"optiml_e % {depth}") if b_on_k
                       else (f"optiml_e % {tile}", f"optiml_e / {tile}"))
    load_a = _load(form, row, form.factors[0], setups[0], f"optiml_m0 + {outer_a}", step_a,
                   "optiml_ra[optiml_f]")
    load_b = _load(form, col, form.factors[1], setups[1], f"optiml_n0 + {outer_b}", step_b,
                   "optiml_rb[optiml_f]")
    total = f"{form.accumulator} = {form.accumulator} + optiml_c[optiml_i][optiml_j];"
    work = "\n".join(s for s in (form.body, total, form.epilogue) if s)
    output = "\n".join(s for s in (contraction.unmerge(form, row.name, row.ctype),
                                    contraction.unmerge(form, col.name, col.ctype),
                                    form.rebuild, "{\n" + emit.indent(work, 4) + "\n}") if s)
    # thread t's outputs: row ty*4 + 64*(i/4) + i%4, column tx*4 + 64*(j/4) + j%4
    offset = "optiml_{t} * 4 + 64 * (optiml_{i} / 4) + optiml_{i} % 4"
    # both k-major, each row padded by 4 floats so that stores along k spread over the banks
    store = f"""#pragma unroll
for (int optiml_f = 0; optiml_f < optiml_per_thread; ++optiml_f) {{
    const int optiml_e = threadIdx.x + optiml_f * {THREADS};
    optiml_As[optiml_s][{step_a}][{outer_a}] = optiml_ra[optiml_f];
    optiml_Bs[optiml_s][{step_b}][{outer_b}] = optiml_rb[optiml_f];
}}"""
    compute = _products(per)
    more = f"optiml_k0 + {depth} < (long long)({k.bound})"
    # OPTIML_STAGES 2: two buffers, the next step's elements stored into the other while
    # this one is read, one barrier a step; else OPTIML_PREFETCH loads the next step's
    # elements into registers while this step computes, or each step's just before it
    return f"""    constexpr int optiml_depth = OPTIML_STEP / {tile};
    constexpr int optiml_per_thread = OPTIML_STEP / {THREADS};
    static_assert(OPTIML_STEP % {tile} == 0 && OPTIML_STEP % {THREADS} == 0, "OPTIML_STEP");
    __shared__ __align__(16) float optiml_As[OPTIML_STAGES][{depth}][{tile} + 4];
    __shared__ __align__(16) float optiml_Bs[OPTIML_STAGES][{depth}][{tile} + 4];
    const int optiml_tx = threadIdx.x % 16, optiml_ty = threadIdx.x / 16;
{emit.indent(_batch(form), 4)}
    const long long optiml_m0 = (long long)blockIdx.y * {tile};
    const long long optiml_n0 = (long long)blockIdx.x * {tile};
    float optiml_c[{per}][{per}] = {{}};
    float optiml_ra[optiml_per_thread], optiml_rb[optiml_per_thread];
    int optiml_s = 0;
#if OPTIML_STAGES == 2
{emit.indent(_fetch(load_a, load_b, "0"), 4)}
{emit.indent(store, 4)}
    __syncthreads();
    for (long long optiml_k0 = 0; optiml_k0 < (long long)({k.bound}); optiml_k0 += {depth}) {{
        if ({more}) {{
{emit.indent(_fetch(load_a, load_b, f"optiml_k0 + {depth}"), 12)}
        }}
{emit.indent(compute, 8)}
        optiml_s ^= 1;
        if ({more}) {{
{emit.indent(store, 12)}
        }}
        __syncthreads();
    }}
#else
#if OPTIML_PREFETCH
{emit.indent(_fetch(load_a, load_b, "0"), 4)}
#endif
    for (long long optiml_k0 = 0; optiml_k0 < (long long)({k.bound}); optiml_k0 += {depth}) {{
#if !OPTIML_PREFETCH
{emit.indent(_fetch(load_a, load_b, "optiml_k0"), 8)}
#endif
{emit.indent(store, 8)}
        __syncthreads();
#if OPTIML_PREFETCH
        if ({more}) {{
{emit.indent(_fetch(load_a, load_b, f"optiml_k0 + {depth}"), 12)}
        }}
#endif
{emit.indent(compute, 8)}
        __syncthreads();
    }}
#endif
#pragma unroll
    for (int optiml_i = 0; optiml_i < {per}; ++optiml_i) {{
#pragma unroll
        for (int optiml_j = 0; optiml_j < {per}; ++optiml_j) {{
            const {row.ctype} {row.name} = ({row.ctype})(optiml_m0 + {offset.format(t="ty", i="i")});
            const {col.ctype} {col.name} = ({col.ctype})(optiml_n0 + {offset.format(t="tx", i="j")});
            if ({row.name} < ({row.bound}) && {col.name} < ({col.bound})) {{
{emit.indent(output, 16)}
            }}
        }}
    }}"""
