"""Correctness guards over plain arrays: what the GPU wrote versus what it should have.

Pure numpy, so every guard is tested on a CPU. The worker calls `check_run` after each
launch with the buffers it read back; the first guard that fires names the verdict.
Order matters: memory-safety guards first (they explain later symptoms), values last.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .spec import Mismatch, Tolerance

POISON_BYTE = 0xFF  # all-ones: NaN for floats, -1 for signed ints
CANARY_BYTE = 0xA5  # guard regions around every buffer
GUARD_BYTES = 4096  # per side; a multiple of 256 keeps the user pointer aligned for float4


@dataclass(frozen=True)
class GuardFailure:
    guard: str
    message: str
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0


def poison_like(dtype: np.dtype, count: int) -> np.ndarray:
    return np.full(count * np.dtype(dtype).itemsize, POISON_BYTE, dtype=np.uint8).view(dtype)


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(values: np.ndarray) -> np.ndarray:
    """The raw bit patterns, one unsigned integer per element (no copy)."""
    return values.reshape(-1).view(_UINT[values.dtype.itemsize])


def _is_poison(values: np.ndarray) -> np.ndarray:
    """Elementwise: does this element still hold the exact poison bit pattern?"""
    return _bits(values) == np.iinfo(_UINT[values.dtype.itemsize]).max


def check_canaries(name: str, guard_before: np.ndarray, guard_after: np.ndarray) -> GuardFailure | None:
    """The bytes just before and after a buffer must still be the canary (each side as long
    as the buffer has: 4 KiB in one allocation, the rest of its mapping in a guarded range)."""
    for side, region in (("before", guard_before), ("after", guard_after)):
        bad = np.flatnonzero(region != CANARY_BYTE)
        if bad.size:
            offset = (region.size - bad[-1]) if side == "before" else bad[0] + 1
            return GuardFailure(
                "out_of_bounds_write",
                f"{bad.size} byte(s) {side} buffer '{name}' were overwritten "
                f"(up to {offset} bytes past its {'start' if side == 'before' else 'end'})",
            )
    return None


def check_input_unchanged(name: str, before: np.ndarray, after: np.ndarray) -> GuardFailure | None:
    """`before is after` where the worker has shown the input unchanged already (a keyed
    checksum on the GPU, or a timed run's inputs drawn again from their seed): comparing an
    array with itself would read a gigabyte for nothing."""
    if before is after:
        return None
    old, new = _bits(before), _bits(after)
    if old.size == new.size and all(_map_chunks(lambda s: np.array_equal(old[s], new[s]), old.size)):
        return None
    if old.size != new.size:
        return GuardFailure("input_mutated", f"input '{name}' came back with {new.size} elements, "
                                             f"not {old.size}")
    changed = np.flatnonzero(old != new)
    return GuardFailure(
        "input_mutated",
        f"input '{name}' changed during the run ({changed.size} element(s), first at "
        f"{_first_index(int(changed[0]), before.shape)})",
    )


def check_written(name: str, out: np.ndarray, ref: np.ndarray) -> GuardFailure | None:
    if not any(_map_chunks(lambda s: bool(_is_poison(out.reshape(-1)[s]).any()), out.size)):
        return None
    unwritten = _is_poison(out)
    unwritten &= ~_is_poison(ref.astype(out.dtype, copy=False))
    count = int(unwritten.sum())
    if count:
        return GuardFailure(
            "output_unwritten",
            f"{count} of {out.size} elements of '{name}' were never written (they still hold "
            f"the poison set before the run; first at "
            f"{_first_index(int(np.flatnonzero(unwritten)[0]), out.shape)})",
        )
    return None


def _chunks(size: int) -> list[slice]:
    return [slice(start, min(start + _CHUNK, size)) for start in range(0, size, _CHUNK)]


def _map_chunks(fn, size: int) -> list:
    """numpy ufuncs release the GIL, so threads over slices use every core of the host."""
    slices = _chunks(size)
    if len(slices) <= 1:
        return [fn(s) for s in slices]
    with ThreadPoolExecutor(max_workers=min(len(slices), os.cpu_count() or 1)) as pool:
        return list(pool.map(fn, slices))


def _chunk_errors(o: np.ndarray, r: np.ndarray, tol: Tolerance) -> tuple[bool, float, float]:
    """(all within tolerance?, max abs error, max rel error) for one slice, in fp32/fp64.
    Integer outputs (an argmax's indices) are compared exactly where the tolerance is zero
    and their errors measured in float64: their difference would wrap, and numpy will not
    divide it into an integer array."""
    exact = None
    if o.dtype.kind in "iub":
        exact = bool(np.array_equal(o, r)) if tol.atol == 0 and tol.rtol == 0 else None
        o, r = o.astype(np.float64), r.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(o - r)
        magnitude = np.abs(r)
        within = bool((diff <= tol.atol + tol.rtol * magnitude).all())
        finite = np.isfinite(diff)
        max_abs = float(diff.max(initial=0.0, where=finite))
        rel = np.divide(diff, magnitude, out=np.zeros_like(diff), where=finite & (magnitude > 0))
        return within if exact is None else exact, max_abs, float(rel.max(initial=0.0))


def error_stats(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """Largest absolute and relative error over elements where both are finite."""
    flat_out, flat_ref = out.reshape(-1), ref.reshape(-1)
    tol = Tolerance(atol=0.0, rtol=0.0)
    results = _map_chunks(lambda s: _chunk_errors(flat_out[s], flat_ref[s], tol), flat_out.size)
    return (max((r[1] for r in results), default=0.0), max((r[2] for r in results), default=0.0))


def compare_values(name: str, out: np.ndarray, ref: np.ndarray, tol: Tolerance
                   ) -> tuple[GuardFailure | None, float, float]:
    """NaN/Inf only where the reference has them; finite values within tolerance.

    Returns the failure (or None) and the largest absolute and relative errors.
    """
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return GuardFailure("wrong_values", f"'{name}' is {out.dtype}{list(out.shape)}, "
                            f"expected {ref.dtype}{list(ref.shape)}"), 0.0, 0.0
    # Fast path (outputs reach 1 GB): NaN, Inf and tolerance misses all make `within`
    # false, and only then is the slower float64 diagnosis needed.
    flat_out, flat_ref = out.reshape(-1), ref.reshape(-1)
    results = _map_chunks(lambda s: _chunk_errors(flat_out[s], flat_ref[s], tol), flat_out.size)
    max_abs = max((r[1] for r in results), default=0.0)
    max_rel = max((r[2] for r in results), default=0.0)
    if all(r[0] for r in results):
        return None, max_abs, max_rel
    failure = _diagnose(name, out, ref, tol)  # None: NaN/Inf only where the reference has them
    if failure is None and out.dtype.kind in "iub":  # integers past 2**53: float64 cannot tell them apart
        failure = GuardFailure("wrong_values", f"'{name}' differs from the reference (integers beyond "
                               "float64's precision)")
    return failure, max_abs, max_rel


_CHUNK = 1 << 22  # elements per slice: bounds each temporary at ~32 MB


def _diagnose(name: str, out: np.ndarray, ref: np.ndarray, tol: Tolerance) -> GuardFailure | None:
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return _diagnose_values(name, out.astype(np.float64), ref.astype(np.float64), tol)


def _diagnose_values(name: str, out64: np.ndarray, ref64: np.ndarray, tol: Tolerance
                     ) -> GuardFailure | None:
    ref_nan, out_nan = np.isnan(ref64), np.isnan(out64)
    ref_inf, out_inf = np.isinf(ref64), np.isinf(out64)
    stray = (out_nan & ~ref_nan) | (out_inf & ~ref_inf)
    if stray.any():
        first = _first(stray)
        return GuardFailure(
            "nonfinite",
            f"'{name}' has {int(stray.sum())} NaN/Inf value(s) where the reference is finite "
            f"(first at {first}: {out64[first]!r} vs {ref64[first]!r})",
        )
    missing = (ref_nan & ~out_nan) | (ref_inf & (out64 != ref64))
    if missing.any():
        first = _first(missing)
        return GuardFailure(
            "wrong_values", f"'{name}' should be {ref64[first]!r} at {first} but is {out64[first]!r}")
    finite = np.isfinite(ref64)
    diff = np.abs(out64 - ref64, where=finite, out=np.zeros_like(out64))
    bad = diff > tol.atol + tol.rtol * np.abs(ref64)
    if not bad.any():
        return None  # NaN and Inf where the reference has them, the rest within tolerance
    max_abs, max_rel = float(diff.max()), float(np.max(diff / np.maximum(np.abs(ref64), 1e-300)))
    first = _first(bad)
    return GuardFailure(
        "wrong_values",
        f"{int(bad.sum())} of {out64.size} elements of '{name}' are outside atol={tol.atol:g}, "
        f"rtol={tol.rtol:g} (max abs error {max_abs:.3g}; first at {first}: "
        f"{out64[first]!r} vs {ref64[first]!r})",
        max_abs_error=max_abs, max_rel_error=max_rel,
    )


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return _first_index(int(np.flatnonzero(mask)[0]), mask.shape)


def _first_index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


@dataclass
class RunBuffers:
    """What the worker read back after one launch of the plan."""

    inputs_before: Mapping[str, np.ndarray]
    inputs_after: Mapping[str, np.ndarray]
    outputs: Mapping[str, np.ndarray]
    reference: Mapping[str, np.ndarray]
    guards: Mapping[str, tuple[np.ndarray, np.ndarray]]  # buffer name -> (before, after) bytes
    # The inputs a task's custom comparison reads, when they are not all in inputs_before
    # (the screen checks unchanged inputs on the GPU and brings back only what changed).
    compare_inputs: Mapping[str, np.ndarray] | None = None


CustomCompare = Callable[..., Mismatch | None]


def check_run(
    buffers: RunBuffers,
    tolerance_for: Callable[[str], Tolerance],
    sizes: Mapping[str, int],
    custom_compare: CustomCompare | None = None,
) -> tuple[GuardFailure | None, float, float]:
    """Run every guard in order; return the first failure and the worst errors seen."""
    for name, (before, after) in buffers.guards.items():
        if failure := check_canaries(name, before, after):
            return failure, 0.0, 0.0
    for name, before in buffers.inputs_before.items():
        if failure := check_input_unchanged(name, before, buffers.inputs_after[name]):
            return failure, 0.0, 0.0
    for name, ref in buffers.reference.items():
        out = buffers.outputs[name]
        if out.shape != ref.shape or out.dtype != ref.dtype:
            return GuardFailure("wrong_values", f"'{name}' is {out.dtype}{list(out.shape)}, "
                                f"expected {ref.dtype}{list(ref.shape)}"), 0.0, 0.0
        if failure := check_written(name, out, ref):
            return failure, 0.0, 0.0
    if custom_compare is not None:
        inputs = buffers.inputs_before if buffers.compare_inputs is None else buffers.compare_inputs
        # The reference as given: an inputs.Expected carries the allowance kept with it.
        mismatch = custom_compare(dict(buffers.outputs), buffers.reference, dict(inputs), sizes)
        if mismatch is not None:
            return GuardFailure("wrong_values", f"'{mismatch.output}': {mismatch.message}",
                                mismatch.max_abs_error, mismatch.max_rel_error), \
                mismatch.max_abs_error, mismatch.max_rel_error
        return None, 0.0, 0.0
    worst_abs = worst_rel = 0.0
    for name, ref in buffers.reference.items():
        failure, max_abs, max_rel = compare_values(
            name, buffers.outputs[name], ref, tolerance_for(str(ref.dtype)))
        if failure:
            return failure, max_abs, max_rel
        worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
    return None, worst_abs, worst_rel
