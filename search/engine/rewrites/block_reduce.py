"""Block-wide reductions as small __device__ helpers, and the identities of their operations.

block_per_row combines each thread's partial accumulator with a helper per operation
and type, emitted once per file:

    float block_reduce_sum_float(float value);   // every thread gets the block's sum

Each warp reduces its 32 values with __shfl_down_sync, lane 0 of every warp leaves its
result in a 32-entry shared array (blockDim.x <= 1024 = 32 warps of 32 lanes, CUDA C++
Programming Guide, "Compute Capabilities"), warp 0 reduces those, and the result goes to
every thread through one shared variable ("Using CUDA Warp-Level Primitives", NVIDIA
blog, 2018). Two barriers per call are enough to call it again at once: the next call
writes the shared array only after every thread passed this call's second barrier (so
warp 0 has read it), and writes the result only after its own first barrier (so every
thread has read this call's result).
"""

from __future__ import annotations

from tree_sitter import Node

from .syntax import integer_literal, strip_parens, text

WARP_SIZE = 32  # lanes per warp on every NVIDIA GPU so far; the full mask below assumes it
MAX_BLOCK_THREADS = 1024  # every compute capability since 2.0 (CUDA C++ Programming Guide)

# (operation, type) -> the value that leaves a combination unchanged.
IDENTITY = {
    ("sum", "float"): "0.0f", ("sum", "double"): "0.0", ("sum", "int"): "0",
    ("max", "float"): "-INFINITY", ("min", "float"): "INFINITY",
}
_COMBINE = {
    "sum": "value += {other};",
    "max": "value = fmaxf(value, {other});",
    "min": "value = fminf(value, {other});",
}


def is_zero_literal(node: Node) -> bool:
    """0, 0.0f, 0.f, 0u, ...: the identity of +."""
    node = strip_parens(node)
    if node.type != "number_literal":
        return False
    try:
        return float(text(node).rstrip("fFlLuU")) == 0.0
    except ValueError:
        return integer_literal(node) == 0


def helper_name(op: str, kind: str) -> str:
    return f"block_reduce_{op}_{kind}"


def render_helper(op: str, kind: str) -> str:
    """The CUDA text of the helper for one operation and type."""
    step = _COMBINE[op].format(other="__shfl_down_sync(0xffffffffu, value, offset)")
    identity, warps = IDENTITY[(op, kind)], MAX_BLOCK_THREADS // WARP_SIZE
    return "\n".join([
        f"// block_per_row: the {op} of `value` over every thread of the block, returned to all of",
        f"// them. All threads of the block must call it; blockDim.x must be a multiple of {WARP_SIZE},",
        f"// at most {MAX_BLOCK_THREADS}.",
        f"__device__ __forceinline__ {kind} {helper_name(op, kind)}({kind} value) {{",
        f"    __shared__ {kind} warp_results[{warps}];  // one per warp of the largest block",
        f"    __shared__ {kind} block_result;",
        f"    const unsigned lane = threadIdx.x % {WARP_SIZE}, warp = threadIdx.x / {WARP_SIZE};",
        "    for (int offset = 16; offset > 0; offset >>= 1) {",
        f"        {step}",
        "    }",
        "    if (lane == 0) {",
        "        warp_results[warp] = value;",
        "    }",
        "    __syncthreads();",
        "    if (warp == 0) {",
        f"        value = lane < blockDim.x / {WARP_SIZE} ? warp_results[lane] : {identity};",
        "        for (int offset = 16; offset > 0; offset >>= 1) {",
        f"            {step}",
        "        }",
        "        if (lane == 0) {",
        "            block_result = value;",
        "        }",
        "    }",
        "    __syncthreads();",
        "    return block_result;",
        "}",
    ])
