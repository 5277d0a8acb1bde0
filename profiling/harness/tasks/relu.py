"""relu: y = max(x, 0) over 2**28 fp32 values, a pure bandwidth task."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..spec import Arrays, Sizes, Task, TensorSpec, Tolerance, VendorReference
from ._common import io_bytes

X = TensorSpec("x", "float32", ("n",))
Y = TensorSpec("y", "float32", ("n",))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    # Exact in fp32: max(x, 0) is one of its arguments.
    return {"y": np.maximum(inputs["x"], np.float32(0))}


TASK = Task(
    name="relu",
    description="y = max(x, 0) elementwise, fp32",
    sizes={"n": 2**28},
    l0_sizes=({"n": 1}, {"n": 1000}, {"n": 4099}, {"n": 65537}),
    inputs=(X,),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: float(s["n"]),  # one max per element
    bytes=io_bytes(X, Y),
    naive_source=(Path(__file__).with_name("naive") / "relu.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "relu",
                "grid": ["cdiv(n, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "y", "n"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    # max(x, 0) is x or 0, copied: any difference is a bug.
    tolerances={"float32": Tolerance(atol=0.0, rtol=0.0)},
    naive_ms=0.8062,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(time_ms=0.5059, what="torch 2.11 relu, 2**28 fp32, on H200 (GPU.md)"),
)
