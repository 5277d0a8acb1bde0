"""CUDA text the skeletons share: block reductions, signatures, plan expressions.

A block reduction here reduces across the whole block with xor shuffles inside each
warp, then once more over the warps' results from 32 shared slots (the shape of CUB's
`BlockReduce` with the warp-reductions algorithm, spelt out so the gate's include policy
and the CPU emulator need nothing else). Every thread returns the same bits: a xor
butterfly combines the same pairs in every lane, and + is commutative. The block must be
a whole number of warps (a skeleton's plan keeps BLOCK a multiple of 32).
"""

from __future__ import annotations

import re
from typing import Any

from profiling.harness import expr

_COMBINE = {"sum": "{a} + {b}", "prod": "{a} * {b}", "max": "fmaxf({a}, {b})", "min": "fminf({a}, {b})"}
_CASTS = re.compile(r"\(\s*(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:long\s+long|long|int|size_t|int64_t|"
                    r"uint64_t|int32_t|unsigned)\s*\)")


_NAME = re.compile(r"[A-Za-z_]\w*")


class PlanProblem(ValueError):
    """A kernel-side expression that cannot be written as a plan expression over sizes."""


def combine(op: str, a: str, b: str) -> str:
    return _COMBINE[op].format(a=a, b=b)


def block_reduce_name(op: str, ctype: str) -> str:
    return f"optiml_block_{op}_{ctype}"


def block_reduce(op: str, ctype: str, identity: str) -> str:
    name = block_reduce_name(op, ctype)
    step = combine(op, "value", "__shfl_xor_sync(0xffffffffu, value, offset)")
    return f"""// Block-wide {op} of {ctype}: warps by xor shuffles, then the warps' results.
__device__ __forceinline__ {ctype} {name}({ctype} value) {{
    __shared__ {ctype} slots[32];
    for (int offset = 16; offset > 0; offset >>= 1) value = {step};
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // a previous call's readers are done with the slots
    if (lane == 0) slots[warp] = value;
    __syncthreads();
    value = lane < (int)(blockDim.x >> 5) ? slots[lane] : {identity};
    for (int offset = 16; offset > 0; offset >>= 1) value = {step};
    return value;
}}
"""


def block_arg_reduce_name(r) -> str:
    from .types import ARG_OPS

    return f"optiml_block_{r.op}_{ARG_OPS[r.compare][1]}_{r.ctype}_{r.index_ctype.replace(' ', '_')}"


def block_arg_reduce(r) -> str:
    """A block-wide arg-reduction of (value, index) pairs, by reference: the better value
    wins, and on equal values the index the tie rule keeps (the sentinel loses every tie).
    The order is total on the pairs the loop can hold (no NaN is ever taken: a test with
    NaN is false), so the xor butterfly leaves every lane with the same pair."""
    from .types import ARG_OPS

    op, rule = ARG_OPS[r.compare]
    better = ">" if op == "argmax" else "<"
    tie = "<" if rule == "first" else ">"
    wins = f"(ov {better} v || (ov == v && oi {tie} i))"  # the sentinel loses ties either way
    step = f"""for (int offset = 16; offset > 0; offset >>= 1) {{
        const {r.ctype} ov = __shfl_xor_sync(0xffffffffu, v, offset);
        const {r.index_ctype} oi = __shfl_xor_sync(0xffffffffu, i, offset);
        if {wins} {{ v = ov; i = oi; }}
    }}"""
    return f"""// Block-wide {op} of ({r.ctype}, {r.index_ctype}) pairs, the {rule} index on ties.
__device__ __forceinline__ void {block_arg_reduce_name(r)}({r.ctype}& v, {r.index_ctype}& i) {{
    __shared__ {r.ctype} slot_v[32];
    __shared__ {r.index_ctype} slot_i[32];
    {step}
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // a previous call's readers are done with the slots
    if (lane == 0) {{ slot_v[warp] = v; slot_i[warp] = i; }}
    __syncthreads();
    const bool held = lane < (int)(blockDim.x >> 5);
    v = held ? slot_v[lane] : {r.identity};
    i = held ? slot_i[lane] : ({r.index_ctype})({r.sentinel});
    {step}
}}
"""


def restricted(signature: str) -> str:
    """The signature with every pointer parameter marked __restrict__: the plan passes
    distinct buffers (the gate allocates each tensor apart), so they never alias."""
    signature = re.sub(r"__launch_bounds__\s*\([^)]*\)\s*", "", signature)  # the skeleton sets BLOCK
    head, _, params = signature.partition("(")
    params = re.sub(r"\*\s*(?!\s*__restrict__)", "* __restrict__ ", params)
    return f"{head}({params}"


def indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())


def plan_expression(c_text: str, form, launch: dict[str, Any], buffers: set[str],
                    locals_: dict[str, str]) -> str:
    """A kernel-side size expression (over parameters and uniform locals) as a plan
    expression over the task's sizes: each parameter becomes its argument in the plan."""
    c_text = _CASTS.sub("", c_text).replace("/", "//")  # C's / on sizes: integer division
    args = list(launch.get("args", []))

    def substitute(match: re.Match[str], depth: int = 0) -> str:
        name = match.group(0)
        if name in form.params:
            position = form.params.index(name)
            value = str(args[position]) if position < len(args) else ""
            if value in buffers or value.startswith("f32:") or not value:
                raise PlanProblem(f"{name} is not a size argument ({value or 'missing'})")
            return f"({value.split(':', 1)[-1]})"
        if name in locals_ and depth < 8:
            inner = re.sub(_NAME, lambda m: substitute(m, depth + 1),
                           _CASTS.sub("", locals_[name]).replace("/", "//"))
            return f"({inner})"
        raise PlanProblem(f"{name} is neither a parameter nor a size worked out from them")

    written = re.sub(_NAME, substitute, c_text)  # the plan's arguments are plan expressions
    if re.search(r"[^\w\s()+\-*/%]", written):
        raise PlanProblem(f"{c_text} uses operators a plan expression does not have")
    return written


_INTEGER_DECLARATION = re.compile(r"(?:const\s+)?(?:unsigned\s+)?(?:long\s+long|long|int|size_t)\s+"
                                  r"(\w+\s*=[^;]+);")


def uniform_locals(prelude: str) -> dict[str, str]:
    """`int total = M * D;` -> {"total": "M * D"}: the prelude's integer declarations, one
    name or several (`int b = idx / D2, j = idx % D2;`)."""
    found = {}
    for match in _INTEGER_DECLARATION.finditer(prelude):
        for declarator in _top_level_split(match.group(1)):
            name, _, value = declarator.partition("=")
            if re.fullmatch(r"\s*\w+\s*", name) and value.strip():
                found[name.strip()] = value.strip()
    return found


def _top_level_split(text: str) -> list[str]:
    """`a = f(x, y), b = 2` -> ["a = f(x, y)", "b = 2"]: commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for position, char in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:position])
            start = position + 1
    return [*parts, text[start:]]


def check_at_sizes(expression: str, sizes: list[dict[str, int]], tunables: dict[str, int]) -> str | None:
    for point in sizes:
        try:
            value = expr.evaluate_int(expression, {**point, **tunables})
        except (expr.ExpressionError, ValueError, ZeroDivisionError) as error:
            return f"{expression} at {point}: {error}"
        if value < 0:
            return f"{expression} is negative at {point}"
    return None


# CUDA's grid limits (Programming Guide, "Technical Specifications", compute capability 9.0).
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def grid_problem(grid: list[str], sizes: list[dict[str, int]], tunables: dict[str, int]) -> str | None:
    """Why a grid would be refused at some size (an expression that fails, a dimension
    outside CUDA's limits), or None."""
    for dim, most in zip(grid, GRID_LIMITS, strict=False):
        problem = check_at_sizes(dim, sizes, tunables)
        if problem:
            return problem
        for point in sizes:
            if not 1 <= expr.evaluate_int(dim, {**point, **tunables}) <= most:
                return f"a grid dimension {dim} outside 1..{most} at {point}"
    return None
