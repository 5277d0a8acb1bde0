"""The composite reward of a child kernel against its parent, term by term.

    reward = ln(t_parent / t_child)                              runtime, measured by CUDA events
           + sum_m  w[class(parent)][m] * gain_m(parent, child)   hardware proxies, from ncu
           - guardrail penalties                                  registers, spills, occupancy

gain_m = ln(parent_m / child_m) for counts where lower is better (DRAM bytes, L1 sectors,
instructions executed) and (child_m - parent_m) / 100 for percentages of peak (SOL SM,
DRAM, L1/texture). The weights follow the *parent's* bottleneck class: the parent's
profile says what was worth fixing, so a memory-bound parent rewards less traffic and a
compute-bound one fewer instructions and more SM throughput. A child that failed (did not
compile, was rejected by the gate, or could not be measured) gets a fixed negative
reward instead. The terms are returned with the total so a person can see why a node
scored what it did; docs/search.md "Search reward" states the same formula and constants.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .types import Measurement

# Counts where less is better, and the key their gain is reported under.
LOWER_IS_BETTER = ("dram_bytes", "l1_sectors", "instructions_executed")
# Percent-of-peak rates where more is better (profile.METRICS keys).
HIGHER_PCT = ("sol_sm_pct", "sol_dram_pct", "sol_l1tex_pct", "achieved_occupancy_pct")

# Proxy weights by the parent's bottleneck class (profile.classify's names). Runtime
# keeps weight 1 and these stay small (at most 0.4 in all), because ncu counters explain
# and never rank (ARCHITECTURE.md, "Profile"): they break ties between kernels of similar
# speed and favour changes that remove the diagnosed cause, they never outvote a real
# slow-down. Memory-bound: traffic (bytes, sectors) and DRAM throughput; compute-bound:
# instructions and SM throughput (the Nsight Compute "Speed Of Light" reading of which
# unit limits the kernel); latency- and occupancy-bound parents get a balanced mix, and
# occupancy-bound ones also credit achieved occupancy. Our choice, to be tuned on recorded
# H200 runs.
PROXY_WEIGHTS: Mapping[str, Mapping[str, float]] = {
    "memory": {"dram_bytes": 0.15, "l1_sectors": 0.10, "sol_dram_pct": 0.10,
               "sol_l1tex_pct": 0.05},
    "compute": {"instructions_executed": 0.15, "sol_sm_pct": 0.10, "l1_sectors": 0.05,
                "dram_bytes": 0.05},
    "latency": {"dram_bytes": 0.05, "l1_sectors": 0.05, "instructions_executed": 0.10,
                "sol_dram_pct": 0.05, "sol_sm_pct": 0.05},
    "occupancy": {"instructions_executed": 0.05, "l1_sectors": 0.05, "sol_dram_pct": 0.05,
                  "sol_sm_pct": 0.05, "achieved_occupancy_pct": 0.10},
    "unknown": {"dram_bytes": 0.05, "l1_sectors": 0.05, "instructions_executed": 0.05},
}


@dataclass(frozen=True)
class Guardrails:
    """Penalties for a child that got faster in a way that is likely to hurt later.

    register_growth: registers per thread may grow by this fraction before it costs
        anything. On sm_90 an SM has 65,536 registers, so occupancy falls in steps as
        registers per thread rise (CUDA C++ Programming Guide, "Hardware
        Multithreading"); 25 % growth is about one such step for a 32-64 register
        kernel. Our choice.
    register_penalty: subtracted when registers grew past that.
    spill_penalty: subtracted when spills appear or grow (local memory traffic goes
        through L1/L2 to DRAM: CUDA C++ Best Practices Guide, "Local Memory").
    occupancy_floor: a child whose achieved occupancy is below this fraction of the
        parent's has collapsed its latency hiding; occupancy_penalty is subtracted.
    compile_failure / rejected / error: the fixed reward of a failed child. A kernel
        that computes the wrong answer (rejected) is worse than one that did not build;
        an error says nothing about the kernel (the host failed, or a replay had no
        recording), so it costs least. For scale: ln 2 = 0.69 is one halving of the
        time, and a typical unhelpful proposal costs 0.05-0.25 (5-25 % slower), so a
        wrong kernel (-0.5) weighs like a 1.65x slow-down. Kept that small on purpose:
        returns are averaged up the tree, and one failed attempt below a good kernel
        should not bury it. Our choice.
    """

    register_growth: float = 0.25
    register_penalty: float = 0.05
    spill_penalty: float = 0.10
    occupancy_floor: float = 0.5
    occupancy_penalty: float = 0.10
    compile_failure: float = -0.3
    rejected: float = -0.5
    error: float = -0.1


COMPILE_GUARDS = ("compile", "compile_policy", "source_policy", "candidate", "plan")


def reward(parent: Measurement, child: Measurement, *,
           weights: Mapping[str, Mapping[str, float]] = PROXY_WEIGHTS,
           guardrails: Guardrails = Guardrails()) -> tuple[float, dict[str, float]]:
    """The child's reward against its parent, and the terms that sum to it."""
    if not child.passed:
        return _failure(child, guardrails)
    terms: dict[str, float] = {}
    if parent.time_ms and child.time_ms:
        terms["log_speedup"] = math.log(parent.time_ms / child.time_ms)
    bottleneck = parent.bottleneck if parent.bottleneck in weights else "unknown"
    gains = metric_gains(parent.metrics, child.metrics)
    for key, weight in weights.get(bottleneck, {}).items():
        if key in gains and weight:
            terms[key] = weight * gains[key]
    terms.update(_penalties(parent, child, guardrails))
    return sum(terms.values()), terms


def _failure(child: Measurement, guardrails: Guardrails) -> tuple[float, dict[str, float]]:
    if child.status == "rejected" and child.guard in COMPILE_GUARDS:
        return guardrails.compile_failure, {"compile_failure": guardrails.compile_failure}
    if child.status == "rejected":
        return guardrails.rejected, {"rejected": guardrails.rejected}
    return guardrails.error, {"error": guardrails.error}


def metric_gains(parent: Mapping[str, float], child: Mapping[str, float]) -> dict[str, float]:
    """Unweighted gains, positive when the child is better, for metrics both sides have."""
    parent, child = _with_l1_sectors(parent), _with_l1_sectors(child)
    gains = {}
    for key in LOWER_IS_BETTER:
        if parent.get(key, 0) > 0 and child.get(key, 0) > 0:
            gains[key] = math.log(parent[key] / child[key])
    for key in HIGHER_PCT:
        if key in parent and key in child:
            gains[key] = (child[key] - parent[key]) / 100.0
    return gains


def _with_l1_sectors(metrics: Mapping[str, float]) -> dict[str, float]:
    loads, stores = metrics.get("l1_global_load_sectors"), metrics.get("l1_global_store_sectors")
    merged = dict(metrics)
    if loads is not None or stores is not None:
        merged["l1_sectors"] = (loads or 0.0) + (stores or 0.0)
    return merged


def _penalties(parent: Measurement, child: Measurement, guardrails: Guardrails) -> dict[str, float]:
    terms = {}
    if parent.registers and child.registers and (
            child.registers > parent.registers * (1 + guardrails.register_growth)):
        terms["registers_grew"] = -guardrails.register_penalty
    if child.spill_bytes > parent.spill_bytes:
        terms["spills"] = -guardrails.spill_penalty
    before = parent.metrics.get("achieved_occupancy_pct")
    after = child.metrics.get("achieved_occupancy_pct")
    if before and after is not None and after < guardrails.occupancy_floor * before:
        terms["occupancy_collapse"] = -guardrails.occupancy_penalty
    return terms


# Metrics whose change is the proposal itself, not an effect of it, or repeats the time.
_NOT_EFFECTS = ("duration_ns", "grid_size", "block_size")


def ratios(before: Measurement, after: Measurement) -> dict[str, float]:
    """after / before for the time and every metric both have (nonzero before): 0.5 = halved."""
    if not (before.passed and after.passed):
        return {}
    result = {}
    if before.time_ms and after.time_ms is not None:
        result["time"] = after.time_ms / before.time_ms
    if before.registers and after.registers is not None:
        result["registers"] = after.registers / before.registers
    for key, value in before.metrics.items():
        if key not in _NOT_EFFECTS and value and key in after.metrics:
            result[key] = after.metrics[key] / value
    return result
