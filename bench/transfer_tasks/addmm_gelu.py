"""addmm_gelu: out = gelu(bias + A @ B), exact (erf) GELU, A 2048 x 2048, B 2048 x 2048, fp32.

gelu(z) = z / 2 * (1 + erf(z / sqrt(2))), torch's default (approximate="none"); the
tanh approximation differs by up to ~1e-3 and is not this task.

The check is sgemm's dot-product allowance for z = bias + A @ B, carried through GELU:
gelu' is at most GELU_SLOPE, and evaluating GELU in fp32 (erff within 2 ulp, the
division by sqrt(2), the add and the products) errs by under 4 units of |z|, which is
at most the magnitude |A| @ |B| + |bias|: allowed =
GELU_SLOPE * (2 + 5 sqrt(K)) * 2**-24 * magnitude + GELU_ROUNDING_UNITS * 2**-24 * magnitude.
As for sgemm, TF32 tensor cores exceed it (math = "fp32").
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import FP32_UNIT_ROUNDOFF, dot_product_allowance, io_bytes

# max over z of gelu'(z) = Phi(z) + z phi(z), reached at z = sqrt(2): 1.1289
GELU_SLOPE = 1.13
GELU_ROUNDING_UNITS = 8.0  # twice the ~4 units of |z| that fp32 GELU evaluation may err by

A = TensorSpec("A", "float32", ("M", "K"))
B = TensorSpec("B", "float32", ("K", "N"))
BIAS = TensorSpec("bias", "float32", ("N",))
OUT = TensorSpec("out", "float32", ("M", "N"))

_erf = np.vectorize(math.erf, otypes=[np.float64])  # numpy has no erf; 0.5 s at L1


def gelu(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    # float64 BLAS: ~0.3 s at 2048 cubed on 16 cores, exact to ~1e-16 relative
    z = inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)
    z += inputs["bias"].astype(np.float64)
    return {"out": gelu(z).astype(np.float32)}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    # The magnitudes only scale the allowance: fp32 BLAS is accurate enough (all terms positive).
    magnitude = (np.abs(inputs["A"]) @ np.abs(inputs["B"])).astype(np.float64)
    magnitude += np.abs(inputs["bias"])
    allowed = GELU_SLOPE * dot_product_allowance(magnitude, sizes["K"])
    allowed += GELU_ROUNDING_UNITS * FP32_UNIT_ROUNDOFF * magnitude
    return {"out": allowed}


TASK = Task(
    name="addmm_gelu",
    description="out = gelu(bias + A @ B), exact erf GELU, fp32 row-major, A M x K, B K x N",
    sizes={"M": 2048, "N": 2048, "K": 2048},
    l0_sizes=(
        {"M": 1, "N": 1, "K": 1},
        {"M": 17, "N": 33, "K": 65},
        {"M": 128, "N": 64, "K": 31},
        {"M": 3, "N": 257, "K": 1031},
        # short sums keep |z| and the allowance small: here the tanh GELU (off by up to
        # ~1e-4 near |z| ~ 2) fails, where at K = 2048 it hides in the allowance
        {"M": 33, "N": 67, "K": 3},
    ),
    inputs=(A, B, BIAS),
    outputs=(OUT,),
    reference=reference,
    # a multiply and an add per term; per output the bias add and GELU's divide, erf
    # (counted as one), add and two multiplies
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"] + 6.0 * s["M"] * s["N"],
    bytes=io_bytes(A, B, BIAS, OUT),
    naive_source=(Path(__file__).with_name("naive") / "addmm_gelu.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "addmm_gelu",
                "grid": ["cdiv(N, BLOCK_X)", "cdiv(M, BLOCK_Y)"],
                "block": ["BLOCK_X", "BLOCK_Y"],
                "shared_bytes": 0,
                "args": ["A", "B", "bias", "out", "M", "N", "K"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK_X": 16, "BLOCK_Y": 16},
    },
    allowance=allowance,
    allowance_why="1.13 (2 + 5 sqrt(K)) 2**-24 m + 8 * 2**-24 m, m = |A| @ |B| + |bias|",
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
    math="fp32",
)
