"""Which kernels run the same binary, so that the search refines each binary once.

A rewrite that changes only the text (a comment, a renamed local, a `#define` nobody
reads, `const` on a pointer the compiler already knew was read-only) compiles to the
same cubin, and with the same launches the GPU runs exactly the same thing: measuring it
again only measures noise, and refining it again clones the other node's subtree. In the
committed H200 recordings half of maxpool3d's evaluations were such repeats.

A node's binary is the cubin's SHA-256 (from the verdict's compile report: what nvcc
produced, so compile options are in it) with every launch resolved at every size the
gate runs the kernel at (L0's and L1's: grid, block, dynamic shared memory and the
arguments, evaluated from the plan's expressions with the sizes and the tunables) and
the scratch buffers resolved likewise. Two nodes with the same key are the same
program on the same inputs. A verdict without a cubin hash has no key.

Before a candidate is evaluated, `compiled_binary` compiles it here (a CPU is enough;
nvcc's output is cached by content, so the gate finds it compiled) and gives its key:
the web path's CPU workers (search.measuring.candidate_binary) and the command line's
loop (search.run_search) both ask it, and tell the search (Search.tell_binary).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from profiling.harness import expr
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.compile import CompilerUnavailable, compile_candidate
from profiling.harness.policy import PolicyViolation
from profiling.harness.spec import Task

from .types import Measurement

logger = logging.getLogger(__name__)


def gate_sizes(task: Task) -> list[dict[str, int]]:
    """The sizes the gate runs a task's kernels at: its L0 shapes, then L1's full size."""
    return [*(dict(s) for s in task.l0_sizes), dict(task.sizes)]


def compiled_binary(candidate: Candidate, sizes: Sequence[Mapping[str, int]]) -> str | None:
    """The binary of this candidate, compiled here; None when it cannot be told: nvcc
    refused it, the policy did, or this host cannot compile. The gate then says why."""
    try:
        report = compile_candidate(candidate)
    except (PolicyViolation, CompilerUnavailable, CandidateError) as error:
        logger.info("no binary for candidate %s: %s", candidate.content_hash()[:12], error)
        return None
    return binary_key(candidate, report.cubin_sha256 if report.ok else None, sizes)


def measured_binary(candidate: Candidate, measurement: Measurement,
                    sizes: Sequence[Mapping[str, int]]) -> str | None:
    """The binary a measured node ran: from its verdict's compile report."""
    cubin = ((measurement.verdict or {}).get("compile") or {}).get("cubin_sha256")
    return binary_key(candidate, cubin, sizes)


def binary_key(candidate: Candidate, cubin_sha256: str | None,
               sizes: Sequence[Mapping[str, int]]) -> str | None:
    """The binary (see the module docstring) of this candidate compiled to this cubin, or
    None when it cannot be told: no cubin, or a plan expression that does not evaluate at
    a size."""
    cubin = cubin_sha256
    if not cubin or not sizes:
        return None
    try:
        resolved = [_resolved(candidate, {**at, **candidate.tunables}) for at in sizes]
    except expr.ExpressionError:
        return None
    text = json.dumps([cubin, resolved], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _resolved(candidate: Candidate, names: Mapping[str, int]) -> dict[str, Any]:
    return {
        "launches": [{"kernel": launch.kernel,
                      "grid": [expr.evaluate_int(d, names) for d in launch.grid],
                      "block": [expr.evaluate_int(d, names) for d in launch.block],
                      "shared": expr.evaluate_int(launch.shared_bytes, names),
                      "args": [_argument(a, names) for a in launch.args]}
                     for launch in candidate.launches],
        "scratch": [[s.name, s.dtype, expr.evaluate_int(s.count, names)] for s in candidate.scratch],
    }


def _argument(arg: str | int | float, names: Mapping[str, int]) -> Any:
    """As the gate passes it (profiling/harness/signature.py, device.py): a buffer by its
    name, "f32:<literal>" as the float, "i64:<expr>" and any other expression evaluated."""
    if isinstance(arg, int | float):
        return arg
    if arg.startswith("f32:"):
        return ["f32", arg[4:]]
    text = arg[4:] if arg.startswith("i64:") else arg
    try:
        return ["i64" if arg.startswith("i64:") else "i32", expr.evaluate_int(text, names)]
    except expr.ExpressionError:
        return ["buffer", arg]  # a name the sizes do not hold: a tensor or scratch buffer
