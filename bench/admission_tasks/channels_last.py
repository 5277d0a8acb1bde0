"""channels_last: an N x C x H x W fp32 tensor in N x H x W x C order, as
x.permute(0, 2, 3, 1).contiguous() (a convolution's input moved to channels-last).

An admission task (README.md): a permutation, the layout permutation.smem_tile is for;
no task of the suite or of the transfer suite moves a tensor's axes.
"""

from __future__ import annotations

from pathlib import Path

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec, Tolerance
from profiling.harness.tasks._common import io_bytes

X = TensorSpec("x", "float32", ("N", "C", "H", "W"))
Y = TensorSpec("y", "float32", ("N", "H", "W", "C"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    return {"y": inputs["x"].transpose(0, 2, 3, 1).copy()}


TASK = Task(
    name="channels_last",
    description="an N x C x H x W fp32 tensor permuted to N x H x W x C",
    sizes={"N": 32, "C": 128, "H": 56, "W": 56},
    l0_sizes=(
        {"N": 1, "C": 1, "H": 1, "W": 1},
        {"N": 2, "C": 3, "H": 5, "W": 7},
        {"N": 1, "C": 40, "H": 3, "W": 33},
        {"N": 3, "C": 17, "H": 2, "W": 65},
    ),
    inputs=(X,),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: 0.0,  # a copy
    bytes=io_bytes(X, Y),
    naive_source=(Path(__file__).with_name("naive") / "channels_last.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "channels_last",
                "grid": ["cdiv(N * C * H * W, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "y", "N", "C", "H", "W"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    tolerances={"float32": Tolerance(atol=0.0, rtol=0.0)},  # a copy: any difference is a bug
)
