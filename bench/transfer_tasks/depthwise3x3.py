"""depthwise3x3: depthwise 3x3 convolution, stride 1, padding 1, NCHW fp32, no bias.

Cross-correlation, as torch's conv2d with groups = C computes it:
y[n, c, i, j] = sum_{r, s} x[n, c, i + r - 1, j + s - 1] * w[c, r, s], x 64 x 256 x 56 x 56.
The check is sgemm's dot-product allowance with length 9 (_common.dot_product_allowance).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import dot_product_allowance, io_bytes

X = TensorSpec("x", "float32", ("N", "C", "H", "W"))
WEIGHT = TensorSpec("w", "float32", ("C", 3, 3))
Y = TensorSpec("y", "float32", ("N", "C", "H", "W"))

_IMAGES_PER_PASS = 8  # images padded in float64 at a time: 51 MiB at L1


def _correlate(x: np.ndarray, w: np.ndarray, dtype: type) -> np.ndarray:
    """Each channel of x against its own 3x3 taps, zero padding 1, computed in `dtype`,
    a few images at a time, rounded to fp32."""
    h, width = x.shape[2:]
    taps = w.astype(dtype)
    y = np.empty(x.shape, dtype=np.float32)
    for start in range(0, x.shape[0], _IMAGES_PER_PASS):
        block = np.pad(x[start : start + _IMAGES_PER_PASS].astype(dtype), ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((block.shape[0], *x.shape[1:]), dtype=dtype)
        for r in range(3):
            for s in range(3):
                out += block[:, :, r : r + h, s : s + width] * taps[None, :, r, s, None, None]
        y[start : start + block.shape[0]] = out
    return y


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    return {"y": _correlate(inputs["x"], inputs["w"], np.float64)}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    # Magnitudes only scale the allowance: fp32 is accurate enough (all terms positive).
    magnitude = _correlate(np.abs(inputs["x"]), np.abs(inputs["w"]), np.float32)
    return {"y": dot_product_allowance(magnitude.astype(np.float64), 9)}


TASK = Task(
    name="depthwise3x3",
    description="depthwise 3x3 conv, stride 1, padding 1, NCHW fp32, w C x 3 x 3, no bias",
    sizes={"N": 64, "C": 256, "H": 56, "W": 56},
    l0_sizes=(
        {"N": 1, "C": 1, "H": 1, "W": 1},
        {"N": 2, "C": 3, "H": 7, "W": 5},
        {"N": 1, "C": 17, "H": 13, "W": 11},
        {"N": 3, "C": 5, "H": 2, "W": 33},
    ),
    inputs=(X, WEIGHT),
    outputs=(Y,),
    reference=reference,
    # a multiply and an add per tap, 9 taps per output; padding taps counted too
    flops=lambda s: 18.0 * s["N"] * s["C"] * s["H"] * s["W"],
    bytes=io_bytes(X, WEIGHT, Y),
    naive_source=(Path(__file__).with_name("naive") / "depthwise3x3.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "depthwise3x3",
                "grid": ["cdiv(N * C * H * W, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "w", "y", "N", "C", "H", "W"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    allowance=allowance,
    allowance_why="(2 + 5 sqrt(9)) * 2**-24 * (|x| conv |w|)",
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
