"""softmax: y = softmax(x) over the last dimension of a 4096 x 8192 fp32 matrix."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..spec import Arrays, Sizes, Task, TensorSpec, Tolerance, VendorReference
from ._common import io_bytes

X = TensorSpec("x", "float32", ("M", "N"))
Y = TensorSpec("y", "float32", ("M", "N"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    x = inputs["x"].astype(np.float64)  # a copy: the input is left alone
    x -= x.max(axis=1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=1, keepdims=True)
    return {"y": x.astype(np.float32)}


TASK = Task(
    name="softmax",
    description="row softmax of an M x N fp32 matrix (over the last dimension)",
    sizes={"M": 4096, "N": 8192},
    l0_sizes=(
        {"M": 1, "N": 1},
        {"M": 7, "N": 1000},
        {"M": 3, "N": 8191},
        {"M": 17, "N": 33},
    ),
    inputs=(X,),
    outputs=(Y,),
    reference=reference,
    # per element: max compare, subtract, exp, add, divide (exp counted as one)
    flops=lambda s: 5.0 * s["M"] * s["N"],
    bytes=io_bytes(X, Y),
    naive_source=(Path(__file__).with_name("naive") / "softmax.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "softmax_rows",
                "grid": ["cdiv(M, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "y", "M", "N"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 128},
    },
    # Probabilities average 1/N (1.2e-4 at L1), so the default atol of 1e-4 would pass
    # nearly anything; a correct fp32 softmax errs relatively (exp, an N-term sum).
    tolerances={"float32": Tolerance(atol=1e-7, rtol=1e-4)},
    naive_ms=3,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(
        time_ms=0.1424, what="torch 2.11 softmax(dim=-1), 4096x8192 fp32, on H200 (GPU.md)"
    ),
)
