"""where: out = a where cond > 0, else b, over 2**25 fp32 values.

cond is float32 (the gate draws floats): true means strictly greater than zero, so 0,
-0 and NaN select b. A user with a float mask writes torch.where(cond > 0, a, b).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec, Tolerance
from profiling.harness.tasks._common import io_bytes

COND = TensorSpec("cond", "float32", ("n",))
A = TensorSpec("a", "float32", ("n",))
B = TensorSpec("b", "float32", ("n",))
OUT = TensorSpec("out", "float32", ("n",))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    return {"out": np.where(inputs["cond"] > 0, inputs["a"], inputs["b"])}


TASK = Task(
    name="where",
    description="out = where(cond > 0, a, b) elementwise, cond given as fp32, fp32",
    sizes={"n": 2**25},
    l0_sizes=({"n": 1}, {"n": 1000}, {"n": 4099}, {"n": 65537}),
    inputs=(COND, A, B),
    outputs=(OUT,),
    reference=reference,
    flops=lambda s: float(s["n"]),  # one compare per element
    bytes=io_bytes(COND, A, B, OUT),
    naive_source=(Path(__file__).with_name("naive") / "where.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "where_select",
                "grid": ["cdiv(n, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["cond", "a", "b", "out", "n"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    # Every output is a copy of a or of b: any difference is a bug.
    tolerances={"float32": Tolerance(atol=0.0, rtol=0.0)},
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
