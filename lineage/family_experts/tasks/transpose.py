"""transpose: y = x^T for an 8192 x 8192 fp32 matrix, as x.t().contiguous().

A family task (lineage/family_experts/README.md): the permutation family has no task in
the suite, so its expert lineage is walked here and feeds only the skeleton cards.
"""

from __future__ import annotations

from pathlib import Path

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec, Tolerance
from profiling.harness.tasks._common import io_bytes

X = TensorSpec("x", "float32", ("M", "N"))
Y = TensorSpec("y", "float32", ("N", "M"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    return {"y": inputs["x"].T.copy()}


TASK = Task(
    name="transpose",
    description="y = x^T for an M x N fp32 matrix (x.t().contiguous())",
    sizes={"M": 8192, "N": 8192},
    l0_sizes=({"M": 1, "N": 1}, {"M": 7, "N": 33}, {"M": 33, "N": 65}, {"M": 100, "N": 3}),
    inputs=(X,),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: 0.0,  # a copy
    bytes=io_bytes(X, Y),
    naive_source=(Path(__file__).with_name("naive") / "transpose.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "transpose_naive",
                "grid": ["cdiv(N, 16)", "cdiv(M, 16)"],
                "block": [16, 16],
                "shared_bytes": 0,
                "args": ["x", "y", "M", "N"],
            }
        ],
        "scratch": [],
        "tunables": {},
    },
    # a copy: any difference is a bug
    tolerances={"float32": Tolerance(atol=0.0, rtol=0.0)},
    # no recorded vendor time: bench/lineage_suite.py times torch's x.t().contiguous() in
    # the same run (bench/vendor.py)
)
