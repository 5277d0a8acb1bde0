"""groupnorm: GroupNorm of x (32 x 256 x 64 x 64, NCHW fp32) in 32 groups, eps 1e-5.

Group g of image n is channels [g C/G, (g + 1) C/G): its mean and biased variance (as
torch.nn.GroupNorm) normalise those channels, then each channel c is scaled by gamma[c]
and shifted by beta[c]. C must be a multiple of G.

A group is long (L = C/G * H * W = 32768 values at L1), and with heavy-tailed inputs the
default tolerance fails a correct fp32 kernel: summed one value at a time, as the naive
kernel does, the worst of the L1 elements was 1.09 times it (numpy, same order). So the
check is an allowance of the dot-product kind (_common.dot_product_allowance), each
output's error scaled by what it is made of:
|y - ref| <= (2 + 5 sqrt(L)) u |gamma| (mean|x| + |x - mean|) / std + 4 u |beta|,
u = 2**-24, std = sqrt(var + eps). mean|x| bounds the error of the mean (a sum of L
values), |x - mean| that of the variance's relative error carried into the scale, and
4 u |beta| the rounding of the final add and of the reference (one ulp of y at most).
In the same order the worst L1 element is at 0.31 of it, and the median allowance
is under half the default tolerance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import FP32_UNIT_ROUNDOFF, ROUNDING_UNITS, io_bytes

EPS = 1e-5  # torch.nn.GroupNorm's default; passed to the kernel as "f32:1e-5"

X = TensorSpec("x", "float32", ("N", "C", "H", "W"))
GAMMA = TensorSpec("gamma", "float32", ("C",))
BETA = TensorSpec("beta", "float32", ("C",))
Y = TensorSpec("y", "float32", ("N", "C", "H", "W"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    n, c, g = sizes["N"], sizes["C"], sizes["G"]
    x = inputs["x"].astype(np.float64).reshape(n * g, -1)  # a copy: one row per group
    x -= x.mean(axis=1, keepdims=True)
    variance = np.einsum("ij,ij->i", x, x) / x.shape[1]
    x *= (1.0 / np.sqrt(variance + EPS))[:, None]
    y = x.reshape(n, c, -1)
    y *= inputs["gamma"].astype(np.float64)[None, :, None]
    y += inputs["beta"].astype(np.float64)[None, :, None]
    return {"y": y.reshape(inputs["x"].shape).astype(np.float32)}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    n, c, g = sizes["N"], sizes["C"], sizes["G"]
    gamma = np.abs(inputs["gamma"]).astype(np.float64).reshape(g, c // g, 1)
    beta = np.abs(inputs["beta"]).astype(np.float64).reshape(g, c // g, 1)
    allowed = np.empty((n, g, c // g, sizes["H"] * sizes["W"]))
    for image in range(n):  # one image's groups at a time: float64 temporaries of 8 MiB at L1
        x = inputs["x"][image].astype(np.float64).reshape(g, c // g, -1)
        length = x.shape[1] * x.shape[2]
        distance = np.abs(x - x.mean(axis=(1, 2), keepdims=True))
        std = np.sqrt((distance * distance).mean(axis=(1, 2), keepdims=True) + EPS)
        magnitude = gamma * (np.abs(x).mean(axis=(1, 2), keepdims=True) + distance) / std
        allowed[image] = (2.0 + ROUNDING_UNITS * np.sqrt(length)) * FP32_UNIT_ROUNDOFF * magnitude
        allowed[image] += 4.0 * FP32_UNIT_ROUNDOFF * beta
    return {"y": allowed.reshape(inputs["x"].shape)}


TASK = Task(
    name="groupnorm",
    description="group norm of NCHW fp32 in G groups, per-channel gamma and beta, eps 1e-5",
    sizes={"N": 32, "C": 256, "H": 64, "W": 64, "G": 32},
    l0_sizes=(
        {"N": 1, "C": 1, "H": 1, "W": 1, "G": 1},
        {"N": 2, "C": 6, "H": 5, "W": 7, "G": 3},
        {"N": 3, "C": 15, "H": 3, "W": 11, "G": 5},
        {"N": 1, "C": 4, "H": 17, "W": 1, "G": 1},
        {"N": 2, "C": 7, "H": 13, "W": 3, "G": 7},
    ),
    inputs=(X, GAMMA, BETA),
    outputs=(Y,),
    reference=reference,
    # per element, as layernorm: add for the mean, subtract + square + add for the
    # variance, subtract + scale + gamma multiply + beta add for the output
    flops=lambda s: 8.0 * s["N"] * s["C"] * s["H"] * s["W"],
    bytes=io_bytes(X, GAMMA, BETA, Y),
    naive_source=(Path(__file__).with_name("naive") / "groupnorm.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "groupnorm",
                "grid": ["cdiv(N * G, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "gamma", "beta", "y", "N", "C", "H", "W", "G", "f32:1e-5"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 64},
    },
    allowance=allowance,
    allowance_why="(2 + 5 sqrt(L)) u |gamma| (mean|x| + |x - mean|) / std + 4 u |beta|, u = 2**-24",
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
