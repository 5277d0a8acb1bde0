"""rotary: rotary position embedding, GPT-NeoX style (halves), x of 8192 x 32 x 128 fp32.

For each position s, head h and i < D/2, with c = cos[s, i] and t = sin[s, i]:
out[s, h, i] = x[s, h, i] * c - x[s, h, i + D/2] * t and
out[s, h, i + D/2] = x[s, h, i + D/2] * c + x[s, h, i] * t.
The tables are inputs drawn like the others, not true cosines: the kernel must not
assume c**2 + t**2 = 1.

Each output is a two-term dot product, so the check is sgemm's dot-product allowance
with length 2 (_common.dot_product_allowance): about 9 * 2**-24 * (|x_i c| + |x_j t|).
A fixed tolerance would fail a correct kernel where heavy-tailed terms cancel.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import dot_product_allowance, io_bytes

X = TensorSpec("x", "float32", ("S", "H", "D"))
COS = TensorSpec("cos", "float32", ("S", "D // 2"))
SIN = TensorSpec("sin", "float32", ("S", "D // 2"))
OUT = TensorSpec("out", "float32", ("S", "H", "D"))

_POSITIONS_PER_PASS = 1024  # positions in float64 at a time: 32 MiB of x at L1


def _by_positions(
    inputs: Arrays, transform: Callable[[np.ndarray], np.ndarray], combine: Callable[..., np.ndarray]
) -> np.ndarray:
    """combine(first half, second half, cos, sin) of x in float64 after `transform`, a block
    of positions at a time, into fp32 (the tables broadcast over the heads)."""
    x = inputs["x"]
    out = np.empty(x.shape, dtype=np.float32)
    half = x.shape[-1] // 2
    for start in range(0, x.shape[0], _POSITIONS_PER_PASS):
        block = slice(start, start + _POSITIONS_PER_PASS)
        rows = transform(x[block]).astype(np.float64)
        c, t = (transform(inputs[name][block]).astype(np.float64)[:, None, :] for name in ("cos", "sin"))
        out[block] = combine(rows[..., :half], rows[..., half:], c, t)
    return out


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    def rotate(first: np.ndarray, second: np.ndarray, c: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.concatenate([first * c - second * t, second * c + first * t], axis=-1)

    return {"out": _by_positions(inputs, np.asarray, rotate)}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    def magnitude(first: np.ndarray, second: np.ndarray, c: np.ndarray, t: np.ndarray) -> np.ndarray:
        """|term 1| + |term 2| of each output, given the magnitudes of the inputs."""
        return np.concatenate([first * c + second * t, second * c + first * t], axis=-1)

    # rounded to fp32 on the way: magnitudes only scale the allowance
    magnitudes = _by_positions(inputs, np.abs, magnitude).astype(np.float64)
    return {"out": dot_product_allowance(magnitudes, 2)}


TASK = Task(
    name="rotary",
    description="rotary embedding, half-split (GPT-NeoX), x of S x H x D, tables S x D/2, fp32",
    sizes={"S": 8192, "H": 32, "D": 128},
    l0_sizes=(
        {"S": 1, "H": 1, "D": 2},
        {"S": 7, "H": 3, "D": 10},
        {"S": 5, "H": 2, "D": 34},
        {"S": 13, "H": 1, "D": 66},
        {"S": 3, "H": 5, "D": 130},
    ),
    inputs=(X, COS, SIN),
    outputs=(OUT,),
    reference=reference,
    flops=lambda s: 3.0 * s["S"] * s["H"] * s["D"],  # two multiplies and an add per output
    bytes=io_bytes(X, COS, SIN, OUT),
    naive_source=(Path(__file__).with_name("naive") / "rotary.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "rotary",
                "grid": ["cdiv(S * H * D, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "cos", "sin", "out", "S", "H", "D"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    allowance=allowance,
    allowance_why="(2 + 5 sqrt(2)) * 2**-24 * (|x_i cos| + |x_j sin|)",
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
