"""conv1x1: pointwise convolution, y[n, k] = bias[k] + sum_c w[k, c] x[n, c], NCHW fp32.

x is 32 x 256 x 56 x 56, w 256 x 256: per image a (K x C) @ (C x H W) matrix product.
The check is sgemm's dot-product allowance with reduction length C
(_common.dot_product_allowance), the magnitude including |bias|.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import dot_product_allowance, io_bytes

X = TensorSpec("x", "float32", ("N", "C", "H", "W"))
WEIGHT = TensorSpec("w", "float32", ("K", "C"))
BIAS = TensorSpec("bias", "float32", ("K",))
Y = TensorSpec("y", "float32", ("N", "K", "H", "W"))

_IMAGES_PER_PASS = 8  # images converted to float64 at a time: 51 MiB of x at L1


def _pointwise(x: np.ndarray, w: np.ndarray, bias: np.ndarray, dtype: type) -> np.ndarray:
    """bias + w @ x for every image and pixel, computed in `dtype`."""
    n, c, h, width = x.shape
    weights, shift = w.astype(dtype), bias.astype(dtype)[:, None]
    y = np.empty((n, w.shape[0], h * width), dtype=dtype)
    for start in range(0, n, _IMAGES_PER_PASS):
        block = x[start : start + _IMAGES_PER_PASS].reshape(-1, c, h * width).astype(dtype)
        y[start : start + block.shape[0]] = weights @ block + shift
    return y.reshape(n, w.shape[0], h, width)


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    return {"y": _pointwise(inputs["x"], inputs["w"], inputs["bias"], np.float64).astype(np.float32)}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    # Magnitudes only scale the allowance: fp32 is accurate enough (all terms positive).
    magnitude = _pointwise(np.abs(inputs["x"]), np.abs(inputs["w"]), np.abs(inputs["bias"]), np.float32)
    return {"y": dot_product_allowance(magnitude.astype(np.float64), sizes["C"])}


TASK = Task(
    name="conv1x1",
    description="1x1 convolution (pointwise), NCHW fp32, w K x C, with bias",
    sizes={"N": 32, "C": 256, "H": 56, "W": 56, "K": 256},
    l0_sizes=(
        {"N": 1, "C": 1, "H": 1, "W": 1, "K": 1},
        {"N": 2, "C": 3, "H": 7, "W": 5, "K": 4},
        {"N": 1, "C": 17, "H": 13, "W": 11, "K": 9},
        {"N": 3, "C": 65, "H": 8, "W": 2, "K": 33},
    ),
    inputs=(X, WEIGHT, BIAS),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: 2.0 * s["N"] * s["K"] * s["H"] * s["W"] * s["C"],  # a multiply and an add per term
    bytes=io_bytes(X, WEIGHT, BIAS, Y),
    naive_source=(Path(__file__).with_name("naive") / "conv1x1.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "conv1x1",
                "grid": ["cdiv(N * K * H * W, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "w", "bias", "y", "N", "C", "H", "W", "K"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    allowance=allowance,
    allowance_why="(2 + 5 sqrt(C)) * 2**-24 * (|w| @ |x| + |bias|)",
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
    math="fp32",
)
