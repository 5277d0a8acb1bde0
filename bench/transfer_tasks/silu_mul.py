"""silu_mul: SwiGLU, out[m, d] = silu(x[m, d]) * x[m, D + d], x of 8192 x 2*4096 fp32.

silu(v) = v * sigmoid(v). Both halves come from one input row, as a fused gate/up
projection leaves them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import io_bytes

X = TensorSpec("x", "float32", ("M", "2 * D"))
OUT = TensorSpec("out", "float32", ("M", "D"))


def sigmoid(v: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-v)) without overflow: exp is only ever taken of -|v|."""
    e = np.exp(-np.abs(v))
    return np.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_ROWS_PER_PASS = 1024  # rows in float64 at a time: 64 MiB per temporary at L1


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    d, out = sizes["D"], np.empty((sizes["M"], sizes["D"]), dtype=np.float32)
    for start in range(0, sizes["M"], _ROWS_PER_PASS):
        rows = inputs["x"][start : start + _ROWS_PER_PASS].astype(np.float64)
        gate, value = rows[:, :d], rows[:, d:]
        out[start : start + _ROWS_PER_PASS] = gate * sigmoid(gate) * value
    return {"out": out}


TASK = Task(
    name="silu_mul",
    description="SwiGLU: out = silu(x[:, :D]) * x[:, D:], x of M x 2D, fp32",
    sizes={"M": 8192, "D": 4096},
    l0_sizes=(
        {"M": 1, "D": 1},
        {"M": 7, "D": 1000},
        {"M": 3, "D": 4099},
        {"M": 17, "D": 33},
    ),
    inputs=(X,),
    outputs=(OUT,),
    reference=reference,
    # per output: negate, exp, add, divide, multiply (exp counted as one)
    flops=lambda s: 5.0 * s["M"] * s["D"],
    bytes=io_bytes(X, OUT),
    naive_source=(Path(__file__).with_name("naive") / "silu_mul.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "silu_mul",
                "grid": ["cdiv(M * D, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "out", "M", "D"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
