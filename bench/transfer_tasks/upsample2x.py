"""upsample2x: nearest-neighbour upsampling by 2, x 32 x 128 x 64 x 64 -> 32 x 128 x 128 x 128.

y[n, c, i, j] = x[n, c, i // 2, j // 2], as torch's interpolate(scale_factor=2,
mode="nearest"). A pure copy: no arithmetic, every byte moved is the cost.
"""

from __future__ import annotations

from pathlib import Path

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec, Tolerance
from profiling.harness.tasks._common import io_bytes

X = TensorSpec("x", "float32", ("N", "C", "H", "W"))
Y = TensorSpec("y", "float32", ("N", "C", "2 * H", "2 * W"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    return {"y": inputs["x"].repeat(2, axis=2).repeat(2, axis=3)}


TASK = Task(
    name="upsample2x",
    description="nearest-neighbour upsampling by 2 in H and W, NCHW fp32",
    sizes={"N": 32, "C": 128, "H": 64, "W": 64},
    l0_sizes=(
        {"N": 1, "C": 1, "H": 1, "W": 1},
        {"N": 2, "C": 3, "H": 7, "W": 5},
        {"N": 1, "C": 17, "H": 13, "W": 11},
        {"N": 3, "C": 5, "H": 1, "W": 33},
    ),
    inputs=(X,),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: 0.0,  # copies only
    bytes=io_bytes(X, Y),
    naive_source=(Path(__file__).with_name("naive") / "upsample2x.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "upsample_nearest2x",
                # z: one plane per (n, c), N * C <= 65535 at every size below
                "grid": ["cdiv(2 * W, BLOCK_X)", "cdiv(2 * H, BLOCK_Y)", "N * C"],
                "block": ["BLOCK_X", "BLOCK_Y"],
                "shared_bytes": 0,
                "args": ["x", "y", "N", "C", "H", "W"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK_X": 32, "BLOCK_Y": 8},
    },
    # Every output is a copy of one input: any difference is a bug.
    tolerances={"float32": Tolerance(atol=0.0, rtol=0.0)},
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
