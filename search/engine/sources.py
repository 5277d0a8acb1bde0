"""Proposal sources that need no model: tunable neighbours and compile-flag variants.

`TunableSource` moves each size-like tunable (BLOCK, TILE, UNROLL, ...) one power of two
up or down, within the range its name suggests, and keeps only plans the harness would
accept at every size of the task. It also proposes compiler flags: --use_fast_math when
the task's tolerance allows it, and a --maxrregcount cap when the measurement shows that
registers, not the work, limit how many warps an SM can hold.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from profiling.harness import expr, tasks
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import check_plan
from profiling.harness.spec import Task
from search.engine.diffs import candidate_diff

from .types import Measurement, NodeContext, Proposal

# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (9.0).
MAX_BLOCK_THREADS = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 227 * 1024  # per block, with the opt-in carve-out on sm_90
WARP_SIZE = 32
REGISTERS_PER_SM = 65536
MAX_WARPS_PER_SM = 64
MAX_BLOCKS_PER_SM = 32
REGISTER_UNIT = 256  # registers are allocated per warp in units of 256 (CUDA Occupancy Calculator)
MIN_REGISTER_CAP = 32  # below this ptxas spills on almost any kernel
FAST_MATH = "--use_fast_math"
# Fast-math intrinsics (__expf, ...) err by a few ulp; a task whose fp32 tolerance is at
# least this relative error can afford them (fp32 ulp is 1.2e-7, so 1e-4 is ~800 ulp).
FAST_MATH_RTOL = 1e-4


@dataclass(frozen=True)
class TunableKind:
    low: int
    high: int
    families: tuple[str, ...]
    up: str  # why a larger value may help, in plain words
    down: str


_BLOCK_LIKE = TunableKind(
    32, MAX_BLOCK_THREADS, ("occupancy", "parallelism"),
    "more warps per block to hide memory latency, and fewer blocks to schedule",
    "more, smaller blocks to spread over the SMs, and finer residency when registers or "
    "shared memory limit how many blocks fit",
)
_KINDS: tuple[tuple[re.Pattern[str], TunableKind], ...] = (
    (re.compile(r"UNROLL\w*"), TunableKind(
        1, 16, ("unroll",), "more independent work per loop iteration to overlap latency",
        "fewer registers per thread and a smaller loop body")),
    (re.compile(r"VEC\w*"), TunableKind(
        1, 16, ("vectorize",), "wider memory accesses, fewer load and store instructions",
        "narrower accesses: fewer registers and fewer alignment demands")),
    (re.compile(r"ITEMS\w*"), TunableKind(
        1, 16, ("parallelism", "grid_stride"), "more elements per thread, amortising index math",
        "fewer elements per thread, more threads in flight")),
    (re.compile(r"WARPS\w*"), TunableKind(
        1, 32, ("occupancy", "parallelism"), _BLOCK_LIKE.up, _BLOCK_LIKE.down)),
    (re.compile(r"(ROWS|COLS)\w*"), TunableKind(
        1, MAX_BLOCK_THREADS, ("parallelism",), "more rows or columns per block, more reuse",
        "fewer rows or columns per block, more blocks")),
    (re.compile(r"TILE\w*"), TunableKind(
        1, MAX_BLOCK_THREADS, ("tile", "occupancy"), "larger tiles: more reuse of each loaded value",
        "smaller tiles: less shared memory and fewer registers per block, more blocks resident")),
    (re.compile(r"(BLOCK|THREADS)\w*|\w+_SIZE"), _BLOCK_LIKE),
)


def tunable_kind(name: str) -> TunableKind | None:
    """The range and meaning a tunable's name suggests, or None for names we do not know."""
    return next((kind for pattern, kind in _KINDS if pattern.fullmatch(name.upper())), None)


def launch_limits_problem(task: Task, candidate: Candidate) -> str | None:
    """Why a launch would be refused by the driver at some size of the task, or None."""
    for sizes in (task.sizes, *task.l0_sizes):
        names = {**sizes, **candidate.tunables}
        for index, launch in enumerate(candidate.launches):
            block = [expr.evaluate_int(d, names) for d in launch.block]
            grid = [expr.evaluate_int(d, names) for d in launch.grid]
            shared = expr.evaluate_int(launch.shared_bytes, names)
            if any(not 1 <= b <= most for b, most in zip(block, MAX_BLOCK_DIMS, strict=False)) or (
                    math.prod(block) > MAX_BLOCK_THREADS):
                return f"launches[{index}]: a block of {block} threads at {sizes} is outside the limits"
            if any(not 1 <= g <= most for g, most in zip(grid, MAX_GRID_DIMS, strict=False)):
                return f"launches[{index}]: a grid of {grid} blocks at {sizes} is outside the limits"
            if not 0 <= shared <= MAX_SHARED_BYTES:
                return f"launches[{index}]: {shared} bytes of shared memory at {sizes}"
    return None


def _smallest_block_using(candidate: Candidate, name: str, sizes: dict[str, int]) -> int | None:
    """The fewest threads of any block whose size the tunable sets (None: it sets none)."""
    names = {**sizes, **candidate.tunables}
    blocks = [math.prod(expr.evaluate_int(d, names) for d in launch.block) for launch in candidate.launches
              if any(name in expr.names_in(d) for d in launch.block)]
    return min(blocks) if blocks else None


def neighbour_problem(task: Task, child: Candidate, name: str) -> str | None:
    """Why the child's plan (one tunable moved) would not run at every size, or None."""
    try:
        check_plan(task, child, task.sizes)
        problem = launch_limits_problem(task, child)
        smallest = _smallest_block_using(child, name, task.sizes)
        if problem is None and smallest is not None and smallest < WARP_SIZE:
            problem = f"a block of {smallest} threads leaves lanes of every warp idle"
        return problem
    except (CandidateError, expr.ExpressionError) as error:
        return str(error)


def resident_warps(registers: int, threads: int) -> int:
    """Warps one SM holds for blocks of `threads` threads using `registers` each (sm_90)."""
    warps = math.ceil(threads / WARP_SIZE)
    per_warp = math.ceil(registers * WARP_SIZE / REGISTER_UNIT) * REGISTER_UNIT
    blocks = min(REGISTERS_PER_SM // per_warp // warps, MAX_WARPS_PER_SM // warps, MAX_BLOCKS_PER_SM)
    return blocks * warps


def register_cap(measurement: Measurement | None, threads: int, *,
                 low_occupancy_pct: float = 50.0) -> int | None:
    """The largest --maxrregcount that lets one more block fit on an SM, when registers
    are what limits occupancy, nothing spills yet and achieved occupancy is low.

    low_occupancy_pct: below half the SM's warp slots, latency hiding usually suffers
    (CUDA C++ Best Practices Guide, "Occupancy"); above it a cap rarely pays for the
    extra instructions it costs.
    """
    if measurement is None or measurement.registers is None or measurement.spill_bytes:
        return None
    achieved = measurement.metrics.get("achieved_occupancy_pct")
    if achieved is None or achieved >= low_occupancy_pct or threads < 1:
        return None
    current = resident_warps(measurement.registers, threads)
    warps = math.ceil(threads / WARP_SIZE)
    if current >= min(MAX_WARPS_PER_SM // warps, MAX_BLOCKS_PER_SM) * warps:
        return None  # threads or blocks per SM are the limit, not registers
    for cap in range(measurement.registers - 1, MIN_REGISTER_CAP - 1, -1):
        if resident_warps(cap, threads) > current:
            return cap
    return None


class TunableSource:
    """Neighbouring tunable values and compile-flag variants of a candidate."""

    name = "tunable"

    def propose(self, context: NodeContext) -> list[Proposal]:
        task = tasks.get(context.task)
        proposals = self.tunable_proposals(task, context.candidate) + self.flag_proposals(task, context)
        parent_hash = context.candidate.content_hash()
        return [p for p in proposals if p.candidate.content_hash() != parent_hash]

    def tunable_proposals(self, task: Task, parent: Candidate) -> list[Proposal]:
        proposals = []
        for name, value in sorted(parent.tunables.items()):
            kind = tunable_kind(name)
            if kind is None:
                continue
            for new in (value * 2, value // 2 if value % 2 == 0 else None):
                if new is None or not kind.low <= new <= kind.high:
                    continue
                child = replace(parent, tunables={**parent.tunables, name: new})
                if neighbour_problem(task, child, name) is None:
                    proposals.append(self._tunable_proposal(parent, child, name, value, new, kind))
        return proposals

    @staticmethod
    def _tunable_proposal(parent: Candidate, child: Candidate, name: str, old: int, new: int,
                          kind: TunableKind) -> Proposal:
        why = kind.up if new > old else kind.down
        return Proposal(
            source="tunable", title=f"{name} {old} → {new}",
            rationale=f"{name} from {old} to {new}: {why}. The plan stays valid at every L1 and L0 size.",
            candidate=child, families=kind.families, diff=candidate_diff(parent, child),
            params={"tunable": name, "from": old, "to": new},
        )

    def flag_proposals(self, task: Task, context: NodeContext) -> list[Proposal]:
        parent = context.candidate
        proposals = []
        if context.tolerance_allows_fast_math and not any(o.lstrip("-") == FAST_MATH[2:] for o in
                                                          parent.compile_options):
            child = replace(parent, compile_options=(*parent.compile_options, FAST_MATH))
            proposals.append(Proposal(
                source="flags", title="--use_fast_math",
                rationale="The task's tolerance admits approximate math: fast intrinsics for expf, "
                          "logf, sinf and friends, approximate division and square root, denormals "
                          "flushed to zero.",
                candidate=child, families=("fast_math",), diff=candidate_diff(parent, child),
                params={"flag": FAST_MATH}))
        if context.measurement is not None:
            names = {**task.sizes, **parent.tunables}
            threads = max(math.prod(expr.evaluate_int(d, names) for d in launch.block)
                          for launch in parent.launches)
            cap = register_cap(context.measurement, threads)
            if cap is not None:
                proposals.append(self._register_proposal(parent, cap, threads, context.measurement))
        return proposals

    @staticmethod
    def _register_proposal(parent: Candidate, cap: int, threads: int, measurement: Measurement) -> Proposal:
        options = tuple(o for o in parent.compile_options if "maxrregcount" not in o)
        child = replace(parent, compile_options=(*options, f"--maxrregcount={cap}"))
        registers = measurement.registers or 0
        before, after = resident_warps(registers, threads), resident_warps(cap, threads)
        return Proposal(
            source="flags", title=f"--maxrregcount={cap}",
            rationale=(f"Each thread uses {registers} registers, so an SM holds only {before} of its "
                       f"{MAX_WARPS_PER_SM} warps for blocks of {threads} threads (achieved occupancy "
                       f"{measurement.metrics.get('achieved_occupancy_pct', 0):.0f}%). Capping at {cap} "
                       f"fits {after} warps; nothing spills today, and the reward's spill guard will show "
                       "if the cap costs spills."),
            candidate=child, families=("occupancy",), diff=candidate_diff(parent, child),
            params={"flag": f"--maxrregcount={cap}", "from": registers, "to": cap},
        )


def fast_math_allowed(task: Task) -> bool:
    floats = [t.dtype for t in task.outputs if t.dtype.startswith("float")]
    return bool(floats) and all(task.tolerance_for(d).rtol >= FAST_MATH_RTOL for d in floats)
