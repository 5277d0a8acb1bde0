"""What a kernel and its launch plan can be refused for before anything is queued.

`plan_problem`: the gate's own plan
check at every size the task runs (every name known, dimensions positive, arguments that
evaluate), the limits every CUDA GPU has (grid, block, shared memory), and the compile
options the policy allows. The API runs it when a run is created, so that a plan the
gate would refuse is a 400 naming the problem, not a queued run that ends "nothing
passed". What only the device knows (registers per thread, this GPU's opt-in shared
memory) is still the gate's to say (device.py).

`preflight`: the New session form's check before a run is created: `plan_problem`, then
the gate's CPU stage itself (gate.cpu_stage: the source policy, nvcc, the kernels the
plan names and their arguments), each problem as a finding the form shows by its field
and, for the compiler's, by the line of the kernel. A host without nvcc still checks the
plan and policy, and says that it could not compile.

No pycuda here: the web process and the CPU-only CI import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from profiling.harness import expr
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import check_plan, cpu_stage
from profiling.harness.policy import PolicyViolation, check_compile_options
from profiling.harness.spec import Task
from profiling.harness.verdict import ERROR, CompileReport

# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": the same
# for every compute capability the gate runs on (7.0-12.x).
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_BLOCK_THREADS = 1024
# The most shared memory any of them lets one block opt into (H100/H200: 227 KB); a plan
# over this cannot run anywhere. Each GPU's own, smaller, limit is checked on the device.
MAX_SHARED_BYTES = 227 * 1024


def plan_problem(task: Task, candidate: Candidate) -> str | None:
    """Why the gate would refuse this plan whatever the GPU, or None."""
    try:
        check_compile_options(candidate.compile_options)
        check_plan(task, candidate, dict(task.sizes))
    except (CandidateError, PolicyViolation) as error:
        return str(error)
    for sizes in (dict(task.sizes), *task.l0_sizes):
        names = {**sizes, **candidate.tunables}
        for index, launch in enumerate(candidate.launches):
            where = f"launches[{index}] ({launch.kernel}) at sizes {sizes}"
            try:
                grid = [expr.evaluate_int(d, names) for d in launch.grid]
                block = [expr.evaluate_int(d, names) for d in launch.block]
                shared = expr.evaluate_int(launch.shared_bytes, names)
            except expr.ExpressionError as error:
                return f"{where}: {error}"
            if any(g > limit for g, limit in zip(grid, MAX_GRID, strict=False)) or len(grid) > 3:
                return f"{where}: grid {grid} exceeds the limits of every GPU {list(MAX_GRID)}"
            threads = 1
            for b in block:
                threads *= b
            if any(b > limit for b, limit in zip(block, MAX_BLOCK, strict=False)) or len(block) > 3 \
                    or threads > MAX_BLOCK_THREADS:
                return (f"{where}: block {block} exceeds the limits of every GPU ({list(MAX_BLOCK)}, "
                        f"{MAX_BLOCK_THREADS} threads)")
            if shared > MAX_SHARED_BYTES:
                return (f"{where}: {shared} B of shared memory, more than any GPU gives a block "
                        f"({MAX_SHARED_BYTES} B)")
    return None


@dataclass(frozen=True)
class Finding:
    """One problem the gate would reject the candidate for, where the form shows it."""

    field: str  # "source" (the kernel) or "plan" (the launch plan)
    message: str
    line: int | None = None  # the kernel's line the compiler named, from 1


@dataclass(frozen=True)
class Preflight:
    findings: tuple[Finding, ...] = ()
    # Why nvcc did not run ("" when it did, or when a plan problem came first): the plan
    # is still checked, and a run may start; its compile is then the gate's.
    not_compiled: str = ""

    @property
    def ok(self) -> bool:
        return not self.findings


# The guards whose rejection is about the kernel's text; every other is about the plan.
_SOURCE_GUARDS = frozenset({"source_policy", "compile"})
# How the source policy names a line (policy.py: "line 12: ...").
_LINE = re.compile(r"^line (\d+): ")


def preflight(task: Task, candidate: Candidate, *, skip_compile: str = "") -> Preflight:
    """What the gate would reject `candidate` for before it reaches a GPU (compiling it
    with nvcc when this host has it: seconds, or nothing for a kernel compiled before).
    `skip_compile`: why not to compile this time; the plan is still checked."""
    problem = plan_problem(task, candidate)
    if problem:
        return Preflight(findings=(Finding("plan", f"launch plan: {problem}"),))
    if skip_compile:
        return Preflight(not_compiled=skip_compile)
    checked = cpu_stage(task, candidate, dict(task.sizes))
    if isinstance(checked, CompileReport):
        return Preflight()
    if checked.status == ERROR:  # this host cannot compile (CompilerUnavailable)
        return Preflight(not_compiled=checked.message)
    errors = checked.compile.errors if checked.compile is not None and checked.stage == "compile" else []
    if checked.guard == "compile" and errors:
        return Preflight(findings=tuple(Finding("source", e.message, e.line) for e in errors))
    if checked.guard not in _SOURCE_GUARDS:
        return Preflight(findings=(Finding("plan", checked.message),))
    line = _LINE.match(checked.message)
    return Preflight(findings=(Finding("source", checked.message, int(line.group(1)) if line else None),))
