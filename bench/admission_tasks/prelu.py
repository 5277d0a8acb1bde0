"""prelu: y = max(x, 0) + slope[c] * min(x, 0) over an N x C x H x W fp32 tensor, one
slope per channel, as torch.nn.functional.prelu(x, slope).

An admission task (README.md): an elementwise map that writes its own element but reads
an operand broadcast over the planes (`slope[c]`, c worked out from the flat index), the
layout map.quads is for; relu, the lineage behind map.vec4 and map.quads, reads only x[i].
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec, Tolerance
from profiling.harness.tasks._common import io_bytes

X = TensorSpec("x", "float32", ("N", "C", "H", "W"))
SLOPE = TensorSpec("slope", "float32", ("C",))
Y = TensorSpec("y", "float32", ("N", "C", "H", "W"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    x = inputs["x"]
    slope = inputs["slope"][None, :, None, None]
    return {"y": np.where(x > 0, x, slope * x).astype(np.float32)}


TASK = Task(
    name="prelu",
    description="PReLU with a slope per channel over an N x C x H x W fp32 tensor",
    sizes={"N": 32, "C": 64, "H": 112, "W": 112},
    l0_sizes=(
        {"N": 1, "C": 1, "H": 1, "W": 1},
        {"N": 2, "C": 3, "H": 5, "W": 7},
        {"N": 1, "C": 5, "H": 3, "W": 33},
        {"N": 3, "C": 17, "H": 2, "W": 65},
    ),
    inputs=(X, SLOPE),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: float(s["N"] * s["C"] * s["H"] * s["W"]),
    bytes=io_bytes(X, SLOPE, Y),
    naive_source=(Path(__file__).with_name("naive") / "prelu.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "prelu",
                "grid": ["cdiv(N * C * H * W, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "slope", "y", "N", "C", "H", "W"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    # one product a negative element, rounded once in fp32 either way
    tolerances={"float32": Tolerance(atol=1e-6, rtol=1e-6)},
)
