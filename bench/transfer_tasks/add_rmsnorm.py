"""add_rmsnorm: h = x + r, y = h / sqrt(mean(h**2) + eps) * w over rows of 8192 x 4096 fp32.

The fused residual add of a transformer block: both h (the new residual stream) and y
(the normalised input of the next layer) are outputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import io_bytes

EPS = 1e-6  # as Llama's RMSNorm; passed to the kernel as "f32:1e-6"

X = TensorSpec("x", "float32", ("M", "N"))
R = TensorSpec("r", "float32", ("M", "N"))
W = TensorSpec("w", "float32", ("N",))
H = TensorSpec("h", "float32", ("M", "N"))
Y = TensorSpec("y", "float32", ("M", "N"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    h = inputs["x"].astype(np.float64)  # a copy; the residual is added in place
    h += inputs["r"]
    mean_square = np.einsum("ij,ij->i", h, h) / h.shape[1]  # no M x N temporary
    y = h * (1.0 / np.sqrt(mean_square + EPS))[:, None]
    y *= inputs["w"].astype(np.float64)
    # h in float64 rounds to the kernel's fp32 x + r: float64 holds the sum of two fp32
    # values exactly unless one is under 2**-29 of the other, when both give the larger.
    return {"h": h.astype(np.float32), "y": y.astype(np.float32)}


TASK = Task(
    name="add_rmsnorm",
    description="fused residual add + RMSNorm over rows, eps 1e-6, outputs h = x + r and y, fp32",
    sizes={"M": 8192, "N": 4096},
    l0_sizes=(
        {"M": 1, "N": 1},
        {"M": 7, "N": 1000},
        {"M": 3, "N": 4099},
        {"M": 33, "N": 17},
    ),
    inputs=(X, R, W),
    outputs=(H, Y),
    reference=reference,
    # per element: the residual add, square + add for the sum, scale, weight multiply
    flops=lambda s: 5.0 * s["M"] * s["N"],
    bytes=io_bytes(X, R, W, H, Y),
    naive_source=(Path(__file__).with_name("naive") / "add_rmsnorm.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "add_rmsnorm",
                "grid": ["cdiv(M, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "r", "w", "h", "y", "M", "N", "f32:1e-6"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 128},
    },
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
