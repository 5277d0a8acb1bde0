"""cumsum: y = cumsum(x, dim=1) for an M x N fp32 matrix, as torch.cumsum(x, dim=1).

A family task (lineage/family_experts/README.md): the scan family has no task in the
suite, so its expert lineage is walked here and feeds only the skeleton cards.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import dot_product_allowance, io_bytes

X = TensorSpec("x", "float32", ("M", "N"))
Y = TensorSpec("y", "float32", ("M", "N"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    return {"y": np.cumsum(inputs["x"].astype(np.float64), axis=1).astype(np.float32)}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    """Each running sum is a sum of its prefix's terms in some order: the fp32 summation
    bound on sum|x| over the prefix, with the row's length as the number of terms."""
    magnitude = np.cumsum(np.abs(inputs["x"].astype(np.float64)), axis=1)
    return {"y": dot_product_allowance(magnitude, sizes["N"])}


TASK = Task(
    name="cumsum",
    description="y = cumsum(x, dim=1) for an M x N fp32 matrix (torch.cumsum(x, dim=1))",
    sizes={"M": 4096, "N": 8192},
    l0_sizes=({"M": 1, "N": 1}, {"M": 3, "N": 1000}, {"M": 5, "N": 33}, {"M": 2, "N": 4099}),
    inputs=(X,),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: float(s["M"] * s["N"]),
    bytes=io_bytes(X, Y),
    naive_source=(Path(__file__).with_name("naive") / "cumsum.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "cumsum_naive",
                "grid": ["cdiv(M, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "y", "M", "N"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    # a tree's order and the loop's round differently: allowed by each prefix's sum|x|
    allowance=allowance,
    allowance_why="(2 + 5 sqrt(N)) * 2**-24 * cumsum(|x|)",
    # no recorded vendor time: bench/lineage_suite.py times torch.cumsum in the same run
)
