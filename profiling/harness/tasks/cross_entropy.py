"""cross_entropy: per-row loss = logsumexp(logits[b]) - logits[b, labels[b]].

Per-row losses rather than their mean, so that every row is checked on its own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..spec import Arrays, Sizes, Task, TensorSpec, Tolerance, VendorReference
from ._common import io_bytes

_ROWS_PER_PASS = 256  # float64 rows at a time: 256 x 32000 x 8 B = 62 MiB of temporaries


def make_labels(
    rng: np.random.Generator, shape: tuple[int, ...], distribution: str, sizes: Sizes
) -> np.ndarray:
    # Uniform class labels whatever the distribution; matches refresh "int:0:C".
    return rng.integers(0, sizes["C"], size=shape, dtype=np.int32)


LOGITS = TensorSpec("logits", "float32", ("B", "C"))
LABELS = TensorSpec("labels", "int32", ("B",), generate=make_labels, refresh="int:0:C")
LOSS = TensorSpec("loss", "float32", ("B",))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    logits, labels = inputs["logits"], inputs["labels"]
    loss = np.empty(logits.shape[0], dtype=np.float64)
    for start in range(0, logits.shape[0], _ROWS_PER_PASS):
        block = logits[start : start + _ROWS_PER_PASS].astype(np.float64)
        row_max = block.max(axis=1)
        picked = block[np.arange(block.shape[0]), labels[start : start + _ROWS_PER_PASS]]
        block -= row_max[:, None]
        np.exp(block, out=block)
        loss[start : start + block.shape[0]] = np.log(block.sum(axis=1)) + (row_max - picked)
    return {"loss": loss.astype(np.float32)}


TASK = Task(
    name="cross_entropy",
    description="per-row softmax cross entropy of B x C fp32 logits and int32 labels",
    sizes={"B": 8192, "C": 32000},
    l0_sizes=(
        {"B": 1, "C": 1},
        {"B": 7, "C": 1000},
        {"B": 3, "C": 32003},
        {"B": 65, "C": 17},
    ),
    inputs=(LOGITS, LABELS),
    outputs=(LOSS,),
    reference=reference,
    # per logit: max compare, subtract, exp, add (exp counted as one)
    flops=lambda s: 4.0 * s["B"] * s["C"],
    bytes=io_bytes(LOGITS, LABELS, LOSS),
    naive_source=(Path(__file__).with_name("naive") / "cross_entropy.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "cross_entropy_rows",
                "grid": ["cdiv(B, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["logits", "labels", "loss", "B", "C"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 128},
    },
    # When the label holds the row maximum, loss = lse - max cancels and keeps lse's
    # absolute rounding, ulp(|lse|) / 2: ~1.2e-4 for the largest heavy-tailed rows
    # (max ~ 2600 over 2.6e8 Student-t samples), over the default atol of 1e-4.
    tolerances={"float32": Tolerance(atol=3e-4, rtol=1e-4)},
    naive_ms=5.215,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(
        time_ms=0.8487,
        what="torch 2.11 cross_entropy, 8192x32000 fp32, on H200 (GPU.md)",
    ),
)
