"""Helpers the task modules share: byte counts and magnitude-scaled comparisons.

Not a task itself (the registry skips modules whose names start with "_").
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..spec import Mismatch, Sizes, TensorSpec

# Unit roundoff of IEEE fp32 (round to nearest): 2**-24, half the gap after 1.0.
FP32_UNIT_ROUNDOFF = 2.0**-24


def io_bytes(*specs: TensorSpec) -> Callable[[Sizes], float]:
    """Compulsory DRAM traffic: each tensor read (input) or written (output) once.

    This is the count GPU.md's "effective bandwidth" uses for the vendor times.
    """

    def count(sizes: Sizes) -> float:
        return float(sum(spec.nbytes(sizes) for spec in specs))

    return count


def shape_mismatch(name: str, actual: np.ndarray, expected: np.ndarray) -> Mismatch | None:
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return Mismatch(
            output=name,
            message=f"got {actual.dtype}{list(actual.shape)}, "
            f"expected {expected.dtype}{list(expected.shape)}",
        )
    return None


def check_within(
    name: str, actual: np.ndarray, expected: np.ndarray, allowed: np.ndarray | float, why: str
) -> Mismatch | None:
    """Mismatch unless |actual - expected| <= allowed everywhere (NaN never passes)."""
    wrong = shape_mismatch(name, actual, expected)
    if wrong is not None:
        return wrong
    error = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    bad = ~(error <= allowed)  # written this way round so that NaN counts as bad
    count = int(np.count_nonzero(bad))
    if count == 0:
        return None
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    finite = np.where(np.isfinite(error), error, np.inf)
    scale = np.maximum(np.abs(expected.astype(np.float64)), np.finfo(np.float64).tiny)
    return Mismatch(
        output=name,
        message=f"{count} of {error.size} elements differ by more than {why}; first at "
        f"{first}: got {actual[first].item()!r}, expected {expected[first].item()!r}, "
        f"allowed {float(np.broadcast_to(allowed, error.shape)[first]):.3g}",
        max_abs_error=float(finite.max()),
        max_rel_error=float((finite / scale).max()),
        bad_elements=count,
        first_bad_index=first,
    )


# How many "probabilistic" standard units of rounding error a dot product may show.
# Each add rounds by at most u times its partial sum (<= the magnitude), independently
# and with mean zero, so the error's standard deviation is at most
# sqrt(length / 3) * u * magnitude: 5 * sqrt(length) * u * magnitude is 8.7 of those,
# a false alarm below 1e-15 per element over the 1.7e7 elements of an L1 sgemm. With
# 1 in place of 5, a correct heavy-tailed L1 conv2d on the H200 failed on one element
# (a huge early term keeps every partial sum large; error 1.14 units).
ROUNDING_UNITS = 5.0


def dot_product_allowance(magnitude: np.ndarray, length: int) -> np.ndarray:
    """Allowed error of an fp32 dot product of `length` terms, whatever its order.

    `magnitude` is sum_k |a_k * b_k| per output (|A| @ |B| for a matmul). The classical
    worst-case bound is length * u * magnitude; with independent rounding errors the
    error is, with high probability, under lambda * sqrt(length) * u * magnitude (Higham
    & Mary, "A new approach to probabilistic rounding error analysis", SIAM J. Sci.
    Comput. 2019), lambda = ROUNDING_UNITS. The "+ 2" covers the rounding of the float64
    reference to fp32 and a final bias add. Zero-mean data errs far less (about
    u * magnitude), so a correct fp32 kernel passes with a wide margin. TF32 rounds each
    input to a 10-bit mantissa (u = 2**-11): an error of about 4e-4 * sqrt(sum_k (a_k
    b_k)**2), i.e. ~6e-4 * magnitude / sqrt(length) for normal data, which is ~2 times
    this allowance at length 4096 (sgemm: ~5% of the elements fail) and ~40 times at
    576 (conv2d), more for heavy-tailed data.
    """
    # math.sqrt, a Python float: `magnitude` may be a torch tensor (gpuref.py), which a
    # numpy scalar would try to turn into an array.
    return (2.0 + ROUNDING_UNITS * math.sqrt(length)) * FP32_UNIT_ROUNDOFF * magnitude
