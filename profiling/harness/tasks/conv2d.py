"""conv2d: y = conv(x, w) + bias, NCHW, 3x3 filters, padding 1, stride 1, fp32.

Cross-correlation, as torch.nn.functional.conv2d computes it:
y[n, k, i, j] = bias[k] + sum_{c, r, s} x[n, c, i + r - 1, j + s - 1] * w[k, c, r, s].
The check is the dot-product allowance of sgemm.py with reduction length C * 9.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..spec import Arrays, Sizes, Task, TensorSpec, VendorReference
from ._common import dot_product_allowance, io_bytes

X = TensorSpec("x", "float32", ("N", "C", "H", "W"))
WEIGHT = TensorSpec("w", "float32", ("K", "C", 3, 3))
BIAS = TensorSpec("bias", "float32", ("K",))
Y = TensorSpec("y", "float32", ("N", "K", "H", "W"))

_IMAGES_PER_PASS = 8  # im2col of 8 images at L1: 8 * 56 * 56 x 576 float64 = 116 MiB


def _correlate(x: np.ndarray, w: np.ndarray, dtype: type) -> np.ndarray:
    """3x3, padding 1 cross-correlation by im2col + one matmul per pass, in `dtype`."""
    n, c, h, width = x.shape
    filters = w.reshape(w.shape[0], c * 9).astype(dtype).T  # (C*9, K)
    y = np.empty((n, w.shape[0], h, width), dtype=dtype)
    for start in range(0, n, _IMAGES_PER_PASS):
        block = np.pad(x[start : start + _IMAGES_PER_PASS].astype(dtype), ((0, 0), (0, 0), (1, 1), (1, 1)))
        windows = sliding_window_view(block, (3, 3), axis=(2, 3))  # (n, C, H, W, 3, 3)
        columns = windows.transpose(0, 2, 3, 1, 4, 5).reshape(-1, c * 9)  # copies
        product = (columns @ filters).reshape(block.shape[0], h, width, -1)
        y[start : start + block.shape[0]] = product.transpose(0, 3, 1, 2)
    return y


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    y = _correlate(inputs["x"], inputs["w"], np.float64)
    y += inputs["bias"].astype(np.float64)[None, :, None, None]
    return {"y": y.astype(np.float32)}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    # Magnitudes only scale the allowance: fp32 is accurate enough (all terms positive).
    magnitude = _correlate(np.abs(inputs["x"]), np.abs(inputs["w"]), np.float32)
    magnitude += np.abs(inputs["bias"])[None, :, None, None]
    return {"y": dot_product_allowance(magnitude.astype(np.float64), 9 * sizes["C"])}


TASK = Task(
    name="conv2d",
    description="3x3 conv2d, padding 1, stride 1, NCHW fp32, with bias",
    sizes={"N": 32, "C": 64, "H": 56, "W": 56, "K": 128},
    l0_sizes=(
        {"N": 1, "C": 1, "H": 1, "W": 1, "K": 1},
        {"N": 2, "C": 3, "H": 7, "W": 5, "K": 4},
        {"N": 1, "C": 17, "H": 13, "W": 11, "K": 9},
        {"N": 3, "C": 64, "H": 8, "W": 2, "K": 33},
    ),
    inputs=(X, WEIGHT, BIAS),
    outputs=(Y,),
    reference=reference,
    # a multiply and an add per tap (9 C taps per output); padding taps counted too
    flops=lambda s: 2.0 * s["N"] * s["K"] * s["H"] * s["W"] * s["C"] * 9,
    bytes=io_bytes(X, WEIGHT, BIAS, Y),
    naive_source=(Path(__file__).with_name("naive") / "conv2d.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "conv2d_3x3_naive",
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
    allowance_why="(2 + 5 sqrt(9 C)) * 2**-24 * (|x| conv |w| + |bias|)",
    naive_ms=2.227,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(
        time_ms=0.3899, what="torch 2.11 conv2d (cuDNN, TF32 off), 32x64x56x56 -> 128, 3x3, on H200 (GPU.md)"
    ),
)
