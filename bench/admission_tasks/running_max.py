"""running_max: the running maximum along each row of an M x N fp32 matrix, as
torch.cummax(x, dim=1).values.

An admission task (README.md): a scan, the layout scan.block_scan is for; no task of the
suite or of the transfer suite carries a running value along a row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec, Tolerance
from profiling.harness.tasks._common import io_bytes

X = TensorSpec("x", "float32", ("M", "N"))
Y = TensorSpec("y", "float32", ("M", "N"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    return {"y": np.maximum.accumulate(inputs["x"], axis=1)}


TASK = Task(
    name="running_max",
    description="y[r, j] = max(x[r, :j + 1]) for an M x N fp32 matrix",
    sizes={"M": 4096, "N": 4096},
    l0_sizes=({"M": 1, "N": 1}, {"M": 3, "N": 1000}, {"M": 5, "N": 33}, {"M": 2, "N": 4099}),
    inputs=(X,),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: float(s["M"] * s["N"]),  # a comparison per element
    bytes=io_bytes(X, Y),
    naive_source=(Path(__file__).with_name("naive") / "running_max.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "running_max",
                "grid": ["cdiv(M, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "y", "M", "N"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    tolerances={"float32": Tolerance(atol=0.0, rtol=0.0)},  # a maximum is exact in any order
)
