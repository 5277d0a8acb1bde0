"""gemv: y = A @ x, A an 8192 x 8192 row-major fp32 matrix, x a vector of 8192.

Each output is a K-term dot product, so the check is sgemm's dot-product allowance
(_common.dot_product_allowance): |y - ref| <= (2 + 5 sqrt(K)) * 2**-24 * (|A| @ |x|).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import dot_product_allowance, io_bytes

A = TensorSpec("A", "float32", ("M", "K"))
X = TensorSpec("x", "float32", ("K",))
Y = TensorSpec("y", "float32", ("M",))

_ROWS_PER_PASS = 2048  # rows of A converted to float64 at a time: 128 MiB at K = 8192


def _product(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """a @ x in float64, a block of rows at a time."""
    x = x.astype(np.float64)
    return np.concatenate(
        [a[i : i + _ROWS_PER_PASS].astype(np.float64) @ x for i in range(0, a.shape[0], _ROWS_PER_PASS)]
    )


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    return {"y": _product(inputs["A"], inputs["x"]).astype(np.float32)}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    magnitude = _product(np.abs(inputs["A"]), np.abs(inputs["x"]))
    return {"y": dot_product_allowance(magnitude, sizes["K"])}


TASK = Task(
    name="gemv",
    description="y = A @ x, A M x K row-major fp32, x of K",
    sizes={"M": 8192, "K": 8192},
    l0_sizes=(
        {"M": 1, "K": 1},
        {"M": 7, "K": 1000},
        {"M": 33, "K": 4099},
        {"M": 1031, "K": 3},
        {"M": 1, "K": 65537},
    ),
    inputs=(A, X),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: 2.0 * s["M"] * s["K"],  # one multiply and one add per term
    bytes=io_bytes(A, X, Y),
    naive_source=(Path(__file__).with_name("naive") / "gemv.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "gemv",
                "grid": ["cdiv(M, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["A", "x", "y", "M", "K"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 128},
    },
    allowance=allowance,
    allowance_why="(2 + 5 sqrt(K)) * 2**-24 * (|A| @ |x|)",
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
