"""reduce_sum: y[0] = sum(x) over 2**28 fp32 values.

The tolerance is relative to sum(|x|), not to the sum itself, because summation
rounding scales with the terms, not with their (possibly cancelling) total: fp32
summation in any order errs by at most (n - 1) * u * sum|x| (u = 2**-24), far less for
a tree or for zero-mean data (about u * sum|x| even for one sequential accumulator).
An fp16 accumulator (u = 2**-11, largest value 65504) stops absorbing small terms once
the running sum grows and is off by orders of magnitude more.

The price: zero-mean data sums to ~sqrt(n) while sum|x| grows like n, so at L1 the
allowance (~64 for normal data) would not notice a kernel that skipped a few elements.
The L0 sizes catch such indexing bugs: at n = 1000 the allowance is ~0.001.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..spec import Arrays, Mismatch, Sizes, Task, TensorSpec, VendorReference
from ._common import check_within, io_bytes

X = TensorSpec("x", "float32", ("n",))
Y = TensorSpec("y", "float32", (1,))

# |y - sum| <= RELATIVE * sum|x| + ABSOLUTE. For zero-mean data a sequential fp32 sum
# errs by about u * sigma * n / sqrt(2) ~ 1.5e-8 * sum|x| at 2**28, a block tree far
# less; RELATIVE = 3e-7 leaves that a 20x margin. Per-thread fp16 accumulation of m
# terms errs by about u16 * sigma * sqrt(n * m) (u16 = 2**-11): at n = 2**24, m = 1024
# that is ~45 against an allowance of ~4, so it fails, as it should.
RELATIVE = 3e-7
ABSOLUTE = 1e-3  # for n = 1 and other tiny sums, where sum|x| itself is ~1
_CHUNK = 2**24  # elements per float64 pass: bounds the temporaries to 128 MiB


def _sum_abs(x: np.ndarray) -> float:
    return float(sum(np.abs(x[i : i + _CHUNK]).sum(dtype=np.float64) for i in range(0, x.size, _CHUNK)))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    # np.sum with dtype=float64 converts buffer by buffer (no 2 GiB copy) and sums
    # pairwise, so the reference itself errs by ~log2(n) * 2**-53 * sum|x|.
    total = np.sum(inputs["x"], dtype=np.float64)
    return {"y": np.array([total], dtype=np.float32)}


def compare(outputs: Arrays, expected: Arrays, inputs: Arrays, sizes: Sizes) -> Mismatch | None:
    # The reference's own rounding to fp32 (u * |sum| <= u * sum|x|) is lost in RELATIVE.
    allowed = RELATIVE * _sum_abs(inputs["x"]) + ABSOLUTE
    why = f"{RELATIVE:g} * sum|x| + {ABSOLUTE:g} = {allowed:.3g}"
    return check_within("y", outputs["y"], expected["y"], allowed, why)


TASK = Task(
    name="reduce_sum",
    description="y[0] = sum(x), fp32 in, fp32 out",
    sizes={"n": 2**28},
    l0_sizes=({"n": 1}, {"n": 1000}, {"n": 4099}, {"n": 65537}, {"n": 1_000_003}),
    inputs=(X,),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: float(s["n"]),  # one add per element
    bytes=io_bytes(X, Y),
    naive_source=(Path(__file__).with_name("naive") / "reduce_sum.cu").read_text(),
    naive_plan={
        "launches": [
            {"kernel": "zero_output", "grid": [1], "block": [1], "shared_bytes": 0, "args": ["y"]},
            {
                "kernel": "block_sum",
                "grid": ["cdiv(n, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "y", "n"],
            },
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    compare=compare,
    naive_ms=1.896,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(time_ms=0.2588, what="torch 2.11 sum, 2**28 fp32, on H200 (GPU.md)"),
)
