"""What a launch plan can be refused for before anything is queued: the gate's own plan
check at every size the task runs (every name known, dimensions positive, arguments that
evaluate), the limits every CUDA GPU has (grid, block, shared memory), and the compile
options the policy allows. The API runs it when a run is created, so that a plan the
gate would refuse is a 400 naming the problem, not a queued run that ends "nothing
passed". What only the device knows (registers per thread, this GPU's opt-in shared
memory) is still the gate's to say (device.py).

No pycuda here: the web process and the CPU-only CI import it.
"""

from __future__ import annotations

from profiling.harness import expr
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import check_plan
from profiling.harness.policy import PolicyViolation, check_compile_options
from profiling.harness.spec import Task

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
