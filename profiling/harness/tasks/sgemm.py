"""sgemm: C = A @ B, A (M, K), B (K, N), row-major fp32, 4096 cubed at L1.

The check scales each element's allowed error by (|A| @ |B|), the sum of the magnitudes
of the terms of its dot product, as rounding error analysis does (see
_common.dot_product_allowance): |C - ref| <= (2 + 5 sqrt(K)) * 2**-24 * (|A| @ |B|).

At K = 4096 that is 1.9e-5 * (|A| @ |B|). A correct fp32 kernel, in any summation order,
errs by about 4e-8 * (|A| @ |B|) on zero-mean data, and by under 1e-6 in the worst
heavy-tailed elements. TF32 (inputs rounded to 10 mantissa bits) errs by about
1e-5 * (|A| @ |B|) at K = 4096 for normal inputs, so ~5% of the 1.7e7 elements fail,
and far more at smaller K and for heavy-tailed inputs.
Hence `math = "fp32"`: tensor-core TF32 is not an acceptable shortcut for this task.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from array_api_compat import array_namespace

from ..spec import Arrays, Sizes, Task, TensorSpec, VendorReference
from ._common import dot_product_allowance, io_bytes

A = TensorSpec("A", "float32", ("M", "K"))
B = TensorSpec("B", "float32", ("K", "N"))
C = TensorSpec("C", "float32", ("M", "N"))


# The reference and the allowance are written against the array API (array_api_compat),
# so that the same lines run in numpy on the host and in torch on the GPU (gpuref.py).
def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    # float64 BLAS: at 4096 cubed ~1 s on 16 cores (milliseconds on the GPU), and exact
    # to ~1e-16 relative.
    a, b = inputs["A"], inputs["B"]
    xp = array_namespace(a, b)
    return {"C": xp.astype(xp.astype(a, xp.float64) @ xp.astype(b, xp.float64), xp.float32)}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    # The magnitudes only scale the allowance, so fp32 BLAS is accurate enough for them
    # (all terms positive: relative error ~1e-7).
    xp = array_namespace(inputs["A"], inputs["B"])
    magnitude = xp.abs(inputs["A"]) @ xp.abs(inputs["B"])
    return {"C": dot_product_allowance(xp.astype(magnitude, xp.float64), sizes["K"])}


TASK = Task(
    name="sgemm",
    description="C = A @ B, fp32 row-major, A M x K, B K x N",
    sizes={"M": 4096, "N": 4096, "K": 4096},
    l0_sizes=(
        {"M": 1, "N": 1, "K": 1},
        {"M": 17, "N": 33, "K": 65},
        {"M": 128, "N": 64, "K": 31},
        {"M": 3, "N": 257, "K": 1031},
    ),
    inputs=(A, B),
    outputs=(C,),
    reference=reference,
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"],  # one multiply and one add per term
    bytes=io_bytes(A, B, C),
    naive_source=(Path(__file__).with_name("naive") / "sgemm.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "sgemm_naive",
                "grid": ["cdiv(N, TILE)", "cdiv(M, TILE)"],
                "block": ["TILE", "TILE"],
                "shared_bytes": 0,
                "args": ["A", "B", "C", "M", "N", "K"],
            }
        ],
        "scratch": [],
        "tunables": {"TILE": 32},  # GPU.md's naive SGEMM: 32 x 32 blocks, 23.0 ms
    },
    allowance=allowance,
    allowance_why="(2 + 5 sqrt(K)) * 2**-24 * (|A| @ |B|)",
    reference_on_gpu=True,
    naive_ms=23.95,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(
        time_ms=2.711, what="torch 2.11 matmul (cuBLAS SGEMM, TF32 off), 4096^3 fp32, on H200 (GPU.md)"
    ),
    math="fp32",
)
