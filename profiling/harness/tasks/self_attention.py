"""self_attention: out = softmax(q k^T / sqrt(D)) v per batch and head, no mask, fp32.

q, k, v and out are (B, H, S, D), contiguous.

The check follows the error through the computation instead of a fixed rtol, which
heavy-tailed inputs break: their scores reach the hundreds, where fp32 rounds them by
~1e-4, and two near-tied keys then move an output that cancels (-7.5 * 0.72 +
18.5 * 0.28 = -0.30, say) by ~7e-4, five times the default allowance, in a correct
fp32 kernel. An error ds_j in score j moves out by sum_j p_j (ds_j - mean ds)(v_j - out),
at most 2 max|ds| * (P @ |V| + |out|). Hence, per output element,

    allowed = 2 * score_error * (P @ |V| + |out|) + 2 * (2 + 5 sqrt(S)) * u * (P @ |V|)

where score_error = (2 + 5 sqrt(D)) * u * max_j (|q_i| . |k_j|) / sqrt(D) + EXP_SLACK is
the dot-product allowance of _common.py for the scores, and the last term covers the
fp32 sum of S weighted values and the normalisation. TF32 scores err ~20 times more
than score_error allows, so the check rejects them, as sgemm's does.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from array_api_compat import array_namespace, device

from ..spec import Arrays, Sizes, Task, TensorSpec, VendorReference
from ._common import FP32_UNIT_ROUNDOFF as U
from ._common import dot_product_allowance, io_bytes

SHAPE = ("B", "H", "S", "D")
Q = TensorSpec("q", "float32", SHAPE)
K = TensorSpec("k", "float32", SHAPE)
V = TensorSpec("v", "float32", SHAPE)
OUT = TensorSpec("out", "float32", SHAPE)


# Score error, in score units, for exp itself: expf is within 2 ulp, fast-math __expf
# within 2 + 1.2|x| ulp, and an online softmax rescales its sums once per key block.
EXP_SLACK = 64 * U


def _probabilities(q, k):
    """softmax(q k^T / sqrt(D)) in float64 for one batch: (H, S, D) -> (H, S, S)."""
    xp = array_namespace(q, k)
    scores = xp.astype(q, xp.float64) @ xp.matrix_transpose(xp.astype(k, xp.float64))
    scores *= 1.0 / math.sqrt(q.shape[-1])
    scores -= xp.max(scores, axis=-1, keepdims=True)
    scores = xp.exp(scores)
    scores /= xp.sum(scores, axis=-1, keepdims=True)
    return scores


# The reference and the allowance are written against the array API (array_api_compat),
# so that the same lines run in numpy on the host and in torch on the GPU
# (gpuref.py; reference_on_gpu below).
def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    xp = array_namespace(q, k, v)
    out = xp.empty(q.shape, dtype=xp.float32, device=device(q))
    # One batch at a time: the float64 scores of all heads of one batch take
    # H * S * S * 8 B = 128 MiB at L1, all batches at once would take 1 GiB.
    for b in range(q.shape[0]):
        out[b, ...] = xp.astype(_probabilities(q[b, ...], k[b, ...]) @ xp.astype(v[b, ...], xp.float64),
                                xp.float32)
    return {"out": out}


def allowance(inputs: Arrays, expected: Arrays, sizes: Sizes) -> dict[str, np.ndarray]:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    xp = array_namespace(q, k, v)
    s, d = q.shape[2], q.shape[3]
    allowed = xp.empty(q.shape, dtype=xp.float64, device=device(q))
    for b in range(q.shape[0]):
        # fp32 is accurate enough for magnitudes, which only scale the allowance.
        magnitude = xp.abs(q[b, ...]) @ xp.matrix_transpose(xp.abs(k[b, ...]))  # (H, S, S)
        score_error = (dot_product_allowance(xp.astype(xp.max(magnitude, axis=-1), xp.float64), d)
                       / math.sqrt(d) + EXP_SLACK)
        weighted = _probabilities(q[b, ...], k[b, ...]) @ xp.astype(xp.abs(v[b, ...]), xp.float64)
        spread = weighted + xp.astype(xp.abs(expected["out"][b, ...]), xp.float64)
        allowed[b, ...] = 2 * score_error[..., None] * spread + 2 * dot_product_allowance(weighted, s)
    return {"out": allowed}


TASK = Task(
    name="self_attention",
    description="softmax(q k^T / sqrt(D)) v over (B, H, S, D) fp32, no mask",
    sizes={"B": 8, "H": 16, "S": 1024, "D": 64},
    l0_sizes=(
        {"B": 1, "H": 1, "S": 1, "D": 1},
        {"B": 2, "H": 3, "S": 17, "D": 64},
        {"B": 1, "H": 2, "S": 129, "D": 7},
        {"B": 1, "H": 1, "S": 1000, "D": 33},
    ),
    inputs=(Q, K, V),
    outputs=(OUT,),
    reference=reference,
    # Two matmuls of 2 * S * S * D each per (batch, head); the softmax is not counted.
    flops=lambda s: 4.0 * s["B"] * s["H"] * s["S"] * s["S"] * s["D"],
    bytes=io_bytes(Q, K, V, OUT),
    naive_source=(Path(__file__).with_name("naive") / "self_attention.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "attention_scores",
                "grid": ["cdiv(B * H * S * S, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["q", "k", "scores", "B * H", "S", "D"],
            },
            {
                "kernel": "softmax_rows_inplace",
                "grid": ["cdiv(B * H * S, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["scores", "B * H * S", "S"],
            },
            {
                "kernel": "attention_output",
                "grid": ["cdiv(B * H * S * D, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["scores", "v", "out", "B * H", "S", "D"],
            },
        ],
        "scratch": [{"name": "scores", "dtype": "float32", "count": "B * H * S * S"}],
        "tunables": {"BLOCK": 256},
    },
    allowance=allowance,
    allowance_why="the error propagated from fp32 scores (see self_attention.py)",
    reference_on_gpu=True,
    naive_ms=41.96,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(
        time_ms=1.0266,
        what="torch 2.11 attention, 8x16x1024x64 fp32 (the fp32 row), on H200 (GPU.md)",
    ),
)
