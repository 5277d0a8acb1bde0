"""layernorm: y = (x - mean) / sqrt(var + eps) * gamma + beta over rows of 8192 x 4096.

The variance is the biased one (divide by N), as torch.nn.LayerNorm computes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..spec import Arrays, Sizes, Task, TensorSpec, VendorReference
from ._common import io_bytes

EPS = 1e-5  # torch.nn.LayerNorm's default; passed to the kernel as "f32:1e-5"

X = TensorSpec("x", "float32", ("M", "N"))
GAMMA = TensorSpec("gamma", "float32", ("N",))
BETA = TensorSpec("beta", "float32", ("N",))
Y = TensorSpec("y", "float32", ("M", "N"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    x = inputs["x"].astype(np.float64)  # a copy; centred and scaled in place below
    n = x.shape[1]
    x -= x.mean(axis=1, keepdims=True)
    variance = np.einsum("ij,ij->i", x, x) / n  # no M x N temporary
    x *= (1.0 / np.sqrt(variance + EPS))[:, None]
    x *= inputs["gamma"].astype(np.float64)
    x += inputs["beta"].astype(np.float64)
    return {"y": x.astype(np.float32)}


TASK = Task(
    name="layernorm",
    description="layer norm over the last dimension, eps 1e-5, biased variance, fp32",
    sizes={"M": 8192, "N": 4096},
    l0_sizes=(
        {"M": 1, "N": 1},
        {"M": 7, "N": 1000},
        {"M": 3, "N": 4099},
        {"M": 33, "N": 17},
    ),
    inputs=(X, GAMMA, BETA),
    outputs=(Y,),
    reference=reference,
    # per element: add for the mean, subtract + square + add for the variance,
    # subtract + scale + gamma multiply + beta add for the output
    flops=lambda s: 8.0 * s["M"] * s["N"],
    bytes=io_bytes(X, GAMMA, BETA, Y),
    naive_source=(Path(__file__).with_name("naive") / "layernorm.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "layernorm_rows",
                "grid": ["cdiv(M, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "gamma", "beta", "y", "M", "N", "f32:1e-5"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 128},
    },
    naive_ms=1.378,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(time_ms=0.0955, what="torch 2.11 layer_norm, 8192x4096 fp32, on H200 (GPU.md)"),
)
