"""How far a kernel's output may be from the module's float64 reference: one rule per dtype.

KernelBench's current main checks `torch.allclose(out, ref, atol=t, rtol=t)` against
the module run in the kernel's own precision, with t = 1e-4 for fp32 and 1e-2 for fp16
and bf16 (src/kernelbench/eval.py, get_tolerance_for_precision, ScalingIntelligence/
KernelBench commit 0d12226; v0 and v0.1 used 1e-2 for fp32). Those are our atol and
rtol, never larger, and our reference is the module in float64, not in float32:

    |out - ref| <= atol + rtol * |ref| + ROUNDING_FACTOR * max |ref32 - ref|

per element of a float32 or float16 output, where ref32 is the module itself run in
float32 on the same inputs (TF32 off) and the max is over the whole output. Integer
outputs must be equal; float64 outputs get atol = rtol = 1e-10 and no rounding term.

The last term is ~0 wherever torch's own float32 forward is exact to the tolerance
(elementwise maps, norms, short reductions): there the check is KernelBench's, against
a better reference. It matters only where float32 itself cannot reach the tolerance (a
long sum of numbers of both signs: a matmul or convolution on normal data); there
KernelBench's own reference carries that error, and its check asks a kernel to round as
torch does. It is written as an allowance (spec.Task.allowance), the project's style for
data-dependent bounds, so it is worked out once per seed and kept with the reference.
"""

from __future__ import annotations

import numpy as np

from ..spec import Tolerance

KERNELBENCH_COMMIT = "0d1222636478e6c238dc9886b6ba4be975b22efe"
TOLERANCES = {
    "float32": Tolerance(atol=1e-4, rtol=1e-4),  # KernelBench main: fp32 1e-4
    "float16": Tolerance(atol=1e-2, rtol=1e-2),  # KernelBench main: fp16 and bf16 1e-2
    "float64": Tolerance(atol=1e-10, rtol=1e-10),  # not in KernelBench; float64 rounding is ~1e-16
    "int32": Tolerance(atol=0, rtol=0),
    "int64": Tolerance(atol=0, rtol=0),
}
# A kernel may err by this many times the worst error torch's own float32 forward makes on
# the same inputs. Not 1: another summation order errs as much, and its worst element
# lands elsewhere; a sequential sum of K terms errs ~sqrt(K / b) times a blocked one of
# block b (4 at K = 4096, b = 256). Still ~9 times stricter than the project's own
# dot-product allowance at K = 4096 (tasks/_common.py: (2 + 5 sqrt(K)) u |A||B|, about 36
# times torch's worst error on normal data there).
ROUNDING_FACTOR = 4.0
ROUNDED = ("float32", "float16")  # the dtypes whose allowance has the rounding term


def tolerance(dtype: str) -> Tolerance:
    return TOLERANCES[dtype]


def worst_error(reference, low) -> float:
    """max |low - reference| over the elements where both are finite (numpy or torch)."""
    if isinstance(reference, np.ndarray) or np.isscalar(reference):
        difference = np.abs(np.asarray(low, np.float64) - np.asarray(reference, np.float64))
        finite = difference[np.isfinite(difference)]
        return float(finite.max()) if finite.size else 0.0
    difference = (low.double() - reference.double()).abs()
    finite = difference[difference.isfinite()]
    return float(finite.max()) if finite.numel() else 0.0


def allowed(dtype: str, reference, low):
    """How far each element of an output of `dtype` may be from `reference`, given the
    module's float32 run `low` on the same inputs (numpy or torch, as the reference)."""
    tol = TOLERANCES[dtype]
    if tol.atol == 0 and tol.rtol == 0:
        return 0.0
    magnitude = abs(reference.astype(np.float64) if isinstance(reference, np.ndarray) else reference.double())
    slack = ROUNDING_FACTOR * worst_error(reference, low) if dtype in ROUNDED else 0.0
    return tol.atol + slack + tol.rtol * magnitude


def disagreement(name: str, dtype: str, reference: np.ndarray, low: np.ndarray) -> str | None:
    """Why the module's float32 run is not within the tolerance (no rounding term) of its
    float64 run, or None: the cross-check at L0."""
    tol = TOLERANCES[dtype]
    ref, other = np.asarray(reference), np.asarray(low)
    if ref.shape != other.shape:
        return f"{name}: float32 gives shape {list(other.shape)}, float64 {list(ref.shape)}"
    ref64, other64 = ref.astype(np.float64), other.astype(np.float64)
    error = np.abs(other64 - ref64)
    bound = tol.atol + tol.rtol * np.abs(ref64)
    bad = ~((error <= bound) | (np.isnan(ref64) & np.isnan(other64)) | (ref64 == other64))
    if not bad.any():
        return None
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{name}: {int(bad.sum())} of {bad.size} elements of the float32 run differ from the float64 "
            f"run by more than {tol.atol:g} + {tol.rtol:g} |ref|; first at {first}: {other64[first]!r} "
            f"against {ref64[first]!r}")


def describe() -> dict[str, str]:
    """The rule per dtype, in words, for the CLI and the task's description."""
    words = {}
    for dtype, tol in TOLERANCES.items():
        if tol.atol == 0 and tol.rtol == 0:
            words[dtype] = "equal to the float64 reference's"
        elif dtype in ROUNDED:
            words[dtype] = (f"|out - ref| <= {tol.atol:g} + {tol.rtol:g} |ref| + {ROUNDING_FACTOR:g} "
                            "max|ref32 - ref| (ref: the module in float64; ref32: in float32; "
                            f"KernelBench main: atol = rtol = {tol.atol:g})")
        else:
            words[dtype] = f"|out - ref| <= {tol.atol:g} + {tol.rtol:g} |ref|"
    return words
