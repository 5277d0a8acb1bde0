"""A full gate's outputs compared with their reference on the GPU first, the host after.

Comparing a candidate's outputs with the reference in numpy was most of a later full
gate's time: relu's (1 GB output) took 17.8 s on an H100, 5.2 s of it in its five L1
checks and 8.3 s verifying eight timed runs, and a sampling profile of five tasks' gates
put 356 of the worker's 640 thread-seconds in `checks.compare_values`
(bench/results/2026-12-07-h100-gate-cost/). The screen already compares on the GPU
(worker.Session.check_resident); with `GateOptions(compare_on_gpu=True)` the full gate
does too (off by default until tests/gpu/test_gpu_compare.py and the hardening tests
have passed with it on a GPU), under these rules:

- **Only after the candidate.** The reference is copied into a fresh allocation once the
  context is synchronized, so none of the candidate's code runs while it is on the GPU,
  and the comparison is the harness's own kernel (refresh.cu, `optiml_compare_f32`),
  never the candidate's module.
- **Only what the kernel judges as the host does.** Float32 outputs, after the canaries
  and the inputs were found intact, and no element still holding the poison: compared
  elementwise with the task's tolerance (NaN and Inf only where the reference has them,
  finite values within atol + rtol |reference|, `optiml_compare_f32`), or, for a task with
  an allowance, each element's |out - ref| within its allowance in float64, NaN never
  (`optiml_within_allowance_f32`, as tasks._common.check_within). A task's own comparison
  (`compare`: reduce_sum, topk) stays on the host.
- **Clean passes; anything else goes to the host.** An element out of tolerance or
  unwritten, an output of another type, no room on the GPU for the reference: the host's
  guards (checks.check_run) then judge exactly as before and name the guard and the
  element. So a verdict the GPU does not pass is the host's, and the GPU can only save
  time on a kernel the host would also pass (its differences are computed in float64,
  the host's in float32: at a boundary the GPU's are the exact ones).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .checks import check_canaries

if TYPE_CHECKING:
    from .worker import Session


@dataclass(frozen=True)
class OnGpu:
    """An output on the GPU where the comparison reads it: a Buffer, or a timed run's copy."""

    ptr: int
    nbytes: int


def comparable(session: Session) -> bool:
    """Whether this task's outputs are judged by what the GPU's comparison computes: float32
    outputs under the elementwise tolerance or the task's allowance, not a comparison of
    the task's own."""
    task = session.task
    return (bool(session.options.get("compare_on_gpu")) and session.harness_module is not None
            and task.compare is None and all(t.dtype == "float32" for t in task.outputs))


def within_on_gpu(session: Session, outputs: dict, reference) -> tuple[float, float] | None:
    """(largest absolute error, largest relative error) when every output (name -> an
    object with `ptr` and `nbytes`) is written and within tolerance (or allowance) of
    `reference`; None when the GPU does not pass them (the host judges)."""
    if not comparable(session):
        return None
    started = time.monotonic()
    try:
        return _within(session, outputs, reference)
    finally:
        session.add_seconds("compare_on_gpu", started)


def _within(session: Session, outputs: dict, reference) -> tuple[float, float] | None:
    task = session.task
    allowed = getattr(reference, "allowed", None)
    if task.allowance is not None and allowed is None:
        return None  # worked out from the inputs on the host (spec._within_allowance)
    worst_abs = worst_rel = 0.0
    for t in task.outputs:
        expected = np.ascontiguousarray(reference[t.name])
        out = outputs[t.name]
        if expected.dtype != np.float32 or expected.nbytes != out.nbytes:
            return None
        if not expected.nbytes:
            continue
        found = _compare(session, t, out, expected, None if task.allowance is None else allowed[t.name])
        if found is None:
            return None
        worst_abs, worst_rel = max(worst_abs, found[0]), max(worst_rel, found[1])
    return worst_abs, worst_rel


def _compare(session: Session, t, out, expected: np.ndarray, allowed) -> tuple[float, float] | None:
    """One output on the GPU: its reference (and allowance) copied there now, compared by
    the harness's kernel, freed; None unless every element passed."""
    from . import device

    bound = None
    if allowed is not None and np.ndim(allowed) != 0:
        bound = np.ascontiguousarray(allowed, dtype=np.float64)
        if bound.size != expected.size:
            return None  # a broadcast allowance: the host's (check_within broadcasts it)
    copies = []
    try:
        copies.append(device.cuda.mem_alloc(expected.nbytes))
        device.cuda.memcpy_htod(copies[0], expected)
        if bound is not None:
            copies.append(device.cuda.mem_alloc(bound.nbytes))
            device.cuda.memcpy_htod(copies[1], bound)
        if allowed is None:
            tolerance = session.task.tolerance_for(t.dtype)
            unwritten, outside, max_abs, max_rel = device.compare_f32(
                session.harness_module, session.gpu, out, copies[0], tolerance.atol, tolerance.rtol)
        else:
            unwritten, outside, max_abs, max_rel = device.within_allowance_f32(
                session.harness_module, session.gpu, out, copies[0],
                copies[1] if bound is not None else None, 0.0 if bound is not None else float(allowed))
    except device.cuda.MemoryError:
        return None
    finally:
        for copy in copies:
            copy.free()
    return None if unwritten or outside else (max_abs, max_rel)


def check_on_gpu(session: Session, buffers: dict, inputs_intact: bool, reference
                 ) -> tuple[float, float] | None:
    """One correctness check's outputs passed on the GPU, when the canaries around every
    buffer are intact and the inputs were shown unchanged (`inputs_intact`); None: the
    host judges the check."""
    if not inputs_intact or not comparable(session):
        return None
    if any(check_canaries(name, *b.guards()) is not None for name, b in buffers.items()):
        return None
    return within_on_gpu(session, {t.name: buffers[t.name] for t in session.task.outputs}, reference)
