"""mse_loss: loss[0] = mean((a - b)**2) over two vectors of 2**26 fp32 values.

Every term is non-negative, so sum|terms| is the sum itself and the default relative
tolerance (1e-4) is a bound on the summation error relative to the terms, as
reduce_sum's is. A sum in fp32 partials errs far less: the naive kernel's (2**18
grid-stride partials of 256 terms each, added atomically) errs by 2e-6 (normal) and
8e-6 (heavy-tailed) at L1, measured with numpy in the same order. One running fp32
sum of all 2**26 terms (an atomicAdd per element, say) is off by 18%: once the sum
passes 2**24 typical terms, each new term is under half an ulp of it and is lost.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from profiling.harness.spec import Arrays, Sizes, Task, TensorSpec
from profiling.harness.tasks._common import io_bytes

A = TensorSpec("a", "float32", ("n",))
B = TensorSpec("b", "float32", ("n",))
LOSS = TensorSpec("loss", "float32", (1,))

_CHUNK = 2**24  # elements per float64 pass: bounds the temporaries to 128 MiB


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    a, b, n = inputs["a"], inputs["b"], sizes["n"]
    total = 0.0
    for start in range(0, n, _CHUNK):
        d = a[start : start + _CHUNK].astype(np.float64) - b[start : start + _CHUNK]
        total += float(np.dot(d, d))
    return {"loss": np.array([total / n], dtype=np.float32)}


TASK = Task(
    name="mse_loss",
    description="loss[0] = mean((a - b)**2) over n fp32 values (reduction='mean')",
    sizes={"n": 2**26},
    l0_sizes=({"n": 1}, {"n": 1000}, {"n": 4099}, {"n": 65537}, {"n": 1_000_003}),
    inputs=(A, B),
    outputs=(LOSS,),
    reference=reference,
    flops=lambda s: 3.0 * s["n"],  # subtract, square, add per element
    bytes=io_bytes(A, B, LOSS),
    naive_source=(Path(__file__).with_name("naive") / "mse_loss.cu").read_text(),
    naive_plan={
        "launches": [
            {"kernel": "zero_loss", "grid": [1], "block": [1], "shared_bytes": 0, "args": ["loss"]},
            {
                "kernel": "mse_accumulate",
                # ITEMS elements per thread: 2**18 threads, so 2**18 atomicAdds, at L1
                "grid": ["cdiv(n, BLOCK * ITEMS)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["a", "b", "loss", "n"],
            },
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256, "ITEMS": 256},
    },
    vendor=None,  # not yet timed on a GPU: bench/transfer_tasks/vendor.py says what to time
    naive_ms=None,
)
