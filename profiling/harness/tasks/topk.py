"""topk: the k largest values of each row, sorted descending, with their indices.

Ties are not broken away: the inputs are the default float generator's, and with
32768 normal fp32 values a row has about one tie in its top 64 every few thousand
rows. The check accepts any tied index, so it needs no tie-free data: the values must
equal the reference's exactly (they are copies, sorted descending), and each index
must lie in [0, N), be unique within its row, and point at the value returned beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..spec import Arrays, Mismatch, Sizes, Task, TensorSpec, VendorReference
from ._common import check_within, io_bytes, shape_mismatch

X = TensorSpec("x", "float32", ("M", "N"))
VALUES = TensorSpec("values", "float32", ("M", "k"))
INDICES = TensorSpec("indices", "int32", ("M", "k"))


def reference(inputs: Arrays, sizes: Sizes) -> Arrays:
    x, k = inputs["x"], sizes["k"]
    n = x.shape[1]
    top = np.argpartition(x, n - k, axis=1)[:, n - k :]  # the k largest, unordered
    top_values = np.take_along_axis(x, top, axis=1)
    # Descending by value, ascending by index among ties (any tie order is accepted).
    order = np.lexsort((top, -top_values), axis=1)
    return {
        "values": np.take_along_axis(top_values, order, axis=1),
        "indices": np.take_along_axis(top, order, axis=1).astype(np.int32),
    }


def _bad_rows(name: str, bad: np.ndarray, message: str) -> Mismatch:
    rows = np.flatnonzero(bad)
    return Mismatch(
        output=name,
        message=f"{rows.size} rows {message}; first row {rows[0]}",
        bad_elements=int(rows.size),
        first_bad_index=(int(rows[0]),),
    )


def compare(outputs: Arrays, expected: Arrays, inputs: Arrays, sizes: Sizes) -> Mismatch | None:
    x, values, indices = inputs["x"], outputs["values"], outputs["indices"]
    for name in ("values", "indices"):
        wrong = shape_mismatch(name, outputs[name], expected[name])
        if wrong is not None:
            return wrong
    # Exact: a top-k value is a copy of an input, and the multiset of the k largest
    # values is unique even when indices tie.
    wrong = check_within("values", values, expected["values"], 0.0, "0 (values are copies)")
    if wrong is not None:
        return wrong
    out_of_range = (indices < 0) | (indices >= x.shape[1])
    if out_of_range.any():
        return _bad_rows("indices", out_of_range.any(axis=1), "hold an index outside [0, N)")
    ordered = np.sort(indices, axis=1)
    repeated = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
    if repeated.any():
        return _bad_rows("indices", repeated, "repeat an index")
    pointed = np.take_along_axis(x, indices.astype(np.int64), axis=1)
    mismatched = ~(pointed == values)
    if mismatched.any():
        return _bad_rows("indices", mismatched.any(axis=1), "hold an index whose x differs from its value")
    return None


TASK = Task(
    name="topk",
    description="top-k per row (k largest, descending) with int32 indices, fp32",
    sizes={"M": 4096, "N": 32768, "k": 64},
    l0_sizes=(
        {"M": 1, "N": 1, "k": 1},
        {"M": 2, "N": 64, "k": 64},
        {"M": 7, "N": 1000, "k": 7},
        {"M": 5, "N": 4099, "k": 64},
    ),
    inputs=(X,),
    outputs=(VALUES, INDICES),
    reference=reference,
    # a heap of k per row: about log2(k) compares per input element
    flops=lambda s: float(s["M"] * s["N"]) * float(np.log2(max(s["k"], 2))),
    bytes=io_bytes(X, VALUES, INDICES),
    naive_source=(Path(__file__).with_name("naive") / "topk.cu").read_text(),
    naive_plan={
        "launches": [
            {
                "kernel": "topk_rows",
                "grid": ["cdiv(M, BLOCK)"],
                "block": ["BLOCK"],
                "shared_bytes": 0,
                "args": ["x", "values", "indices", "M", "N", "k"],
            }
        ],
        "scratch": [],
        "tunables": {"BLOCK": 128},
    },
    compare=compare,
    naive_ms=203,  # bench/results/2026-11-29-h200-suite.json
    vendor=VendorReference(
        time_ms=1.615, what="torch 2.11 topk(64, sorted), 4096x32768 fp32, on H200 (GPU.md)"
    ),
)
