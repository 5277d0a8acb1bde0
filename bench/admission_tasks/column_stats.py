"""column_stats: per column of an 8192 x 4096 fp32 matrix, its mean and its population
standard deviation (a batch norm's training statistics), as
torch.std_mean(x, dim=0, correction=0) with the outputs in the order (mean, std).

An admission task (README.md): a reduction down the columns, where rows side by side in
memory are the outputs; no lineage of the suite has that layout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import io_bytes

X = TensorSpec("x", "float32", ("N", "D"))
MEAN = TensorSpec("mean", "float32", ("D",))
STD = TensorSpec("std", "float32", ("D",))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    x = inputs["x"].astype(np.float64)  # a copy; centred in place below
    mean = x.mean(axis=0)
    x -= mean[None, :]
    variance = np.einsum("ij,ij->j", x, x) / x.shape[0]  # no second N x D temporary
    return {"mean": mean.astype(np.float32), "std": np.sqrt(variance).astype(np.float32)}


TASK = Task(
    name="column_stats",
    description="per-column mean and population standard deviation of an N x D fp32 matrix",
    sizes={"N": 8192, "D": 4096},
    l0_sizes=(
        {"N": 1, "D": 1},
        {"N": 7, "D": 1000},
        {"N": 1000, "D": 3},
        {"N": 33, "D": 17},
        {"N": 8191, "D": 33},
    ),
    inputs=(X,),
    outputs=(MEAN, STD),
    reference=reference,
    # per element: add for the mean, subtract + square + add for the variance
    flops=lambda s: 4.0 * s["N"] * s["D"],
    bytes=io_bytes(X, MEAN, STD),
    naive_source=(Path(__file__).with_name("naive") / "column_stats.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "column_stats",
                "grid": ["cdiv(D, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "mean", "std", "N", "D"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    vendor=None,  # timed on a GPU host by vendor.py's call, in the same run as the kernels
    naive_ms=None,
)
