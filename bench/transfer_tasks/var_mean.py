"""var_mean: per row of an 8192 x 8192 fp32 matrix, its population variance and its mean.

The variance divides by N (unbiased=False), as torch.var_mean(x, dim=1, unbiased=False),
whose output order (var, mean) the outputs follow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import io_bytes

X = TensorSpec("x", "float32", ("M", "N"))
VAR = TensorSpec("var", "float32", ("M",))
MEAN = TensorSpec("mean", "float32", ("M",))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    x = inputs["x"].astype(np.float64)  # a copy; centred in place below
    mean = x.mean(axis=1)
    x -= mean[:, None]
    variance = np.einsum("ij,ij->i", x, x) / x.shape[1]  # no M x N temporary
    return {"var": variance.astype(np.float32), "mean": mean.astype(np.float32)}


TASK = Task(
    name="var_mean",
    description="per-row population variance and mean of an M x N fp32 matrix",
    sizes={"M": 8192, "N": 8192},
    l0_sizes=(
        {"M": 1, "N": 1},
        {"M": 7, "N": 1000},
        {"M": 3, "N": 8191},
        {"M": 33, "N": 17},
        {"M": 1031, "N": 3},
    ),
    inputs=(X,),
    outputs=(VAR, MEAN),
    reference=reference,
    # per element: add for the mean, subtract + square + add for the variance
    flops=lambda s: 4.0 * s["M"] * s["N"],
    bytes=io_bytes(X, VAR, MEAN),
    naive_source=(Path(__file__).with_name("naive") / "var_mean.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "var_mean_rows",
                "grid": ["cdiv(M, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "var", "mean", "M", "N"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 128},
    },
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
