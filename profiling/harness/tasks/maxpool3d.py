"""maxpool3d: 3-D max pooling, kernel 3, stride 2, padding 1, on NCDHW fp32.

Padding acts as -inf (it never wins), as in torch.nn.MaxPool3d. Each output side is
floor((side + 2 * 1 - 3) / 2) + 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..spec import Arrays, Sizes, Task, TensorSpec, Tolerance, VendorReference
from ._common import io_bytes

KERNEL, STRIDE, PADDING = 3, 2, 1
OD, OH, OW = "(D + 2 - 3) // 2 + 1", "(H + 2 - 3) // 2 + 1", "(W + 2 - 3) // 2 + 1"

X = TensorSpec("x", "float32", ("N", "C", "D", "H", "W"))
Y = TensorSpec("y", "float32", ("N", "C", OD, OH, OW))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    x = inputs["x"]
    pad = ((0, 0), (0, 0)) + ((PADDING, PADDING),) * 3
    padded = np.pad(x, pad, constant_values=-np.inf)  # a new array: x is left alone
    out_shape = Y.resolve_shape(sizes)
    od, oh, ow = out_shape[2:]
    y = np.full(out_shape, -np.inf, dtype=np.float32)
    # The max over the 27 window offsets, each a strided view of the padded input.
    for kd in range(KERNEL):
        for kh in range(KERNEL):
            for kw in range(KERNEL):
                window = padded[
                    :,
                    :,
                    kd : kd + STRIDE * od : STRIDE,
                    kh : kh + STRIDE * oh : STRIDE,
                    kw : kw + STRIDE * ow : STRIDE,
                ]
                np.maximum(y, window, out=y)
    return {"y": y}


def _output_elements(sizes: Sizes) -> int:
    return int(np.prod(Y.resolve_shape(sizes), dtype=np.int64))


TASK = Task(
    name="maxpool3d",
    description="3-D max pooling, kernel 3, stride 2, padding 1, NCDHW fp32",
    sizes={"N": 16, "C": 32, "D": 64, "H": 64, "W": 64},
    l0_sizes=(
        {"N": 1, "C": 1, "D": 1, "H": 1, "W": 1},
        {"N": 2, "C": 3, "D": 5, "H": 7, "W": 9},
        {"N": 1, "C": 2, "D": 4, "H": 6, "W": 8},
        {"N": 3, "C": 5, "D": 11, "H": 2, "W": 17},
    ),
    inputs=(X,),
    outputs=(Y,),
    reference=reference,
    flops=lambda s: 27.0 * _output_elements(s),  # one compare per window element
    bytes=io_bytes(X, Y),
    naive_source=(Path(__file__).with_name("naive") / "maxpool3d.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "maxpool3d_k3s2p1",
                "grid": [f"cdiv(N * C * ({OD}) * ({OH}) * ({OW}), BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "y", "N", "C", "D", "H", "W", OD, OH, OW],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 256},
    },
    # A maximum is one of its inputs, copied: any difference is a bug.
    tolerances={"float32": Tolerance(atol=0.0, rtol=0.0)},
    naive_ms=0.2999,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(
        time_ms=0.514, what="torch 2.11 max_pool3d(3, 2, 1), 16x32x64^3 fp32, on H200 (GPU.md)"
    ),
)
