"""Small stand-ins for the search engine's protocols, for tests of the engine's mechanics.

SYNTHETIC NUMBERS. The measurement table below was made up for these tests: a smooth,
deterministic function of three tunables (BLOCK, UNROLL, VEC) anchored at the real H200
time of the naive relu kernel (0.8062 ms, bench/results/2026-11-29-h200-suite.json),
with a few failures and one missing recording sprinkled in. It exercises selection,
widening, dedup, rewards and replay; it says nothing about how fast any real kernel is.
Real H200 recordings (RecordingEvaluator on the GPU host) replace it for anything that
claims a speedup.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.types import Diagnosis, JudgeError, Measurement, NodeContext, Proposal

ROOT = Candidate.from_source_and_plan(tasks.get("relu").naive_source, tasks.get("relu").naive_plan)
KNOBS = {"BLOCK": (64, 128, 256, 512, 1024), "UNROLL": (1, 2, 4, 8), "VEC": (1, 2, 4)}
DEFAULTS = {"BLOCK": 256, "UNROLL": 1, "VEC": 1}
FAMILY = {"BLOCK": "occupancy", "UNROLL": "unroll", "VEC": "vectorize"}
SYNTHETIC_GPU = "synthetic table (not a GPU)"
NAIVE_MS = 0.8062  # the real naive relu median on the H200, the table's anchor


def knobs_of(candidate: Candidate) -> dict[str, int]:
    return {name: candidate.tunables.get(name, default) for name, default in DEFAULTS.items()}


def variant(base: Candidate, **knobs: int) -> Candidate:
    """The base kernel with these knob values; knobs at their default are left out, so
    the default variant *is* the base kernel (same content hash)."""
    values = {**knobs_of(base), **knobs}
    tunables = {"BLOCK": values["BLOCK"]}
    tunables.update({k: v for k, v in values.items() if k != "BLOCK" and v != DEFAULTS[k]})
    return dataclasses.replace(base, tunables=tunables)


class StepSource:
    """Proposes each knob one step up and one step down from the parent's value."""

    name = "steps"

    def propose(self, context: NodeContext) -> list[Proposal]:
        current = knobs_of(context.candidate)
        proposals = []
        for knob, values in KNOBS.items():
            index = values.index(current[knob])
            for new_index in (index + 1, index - 1):
                if 0 <= new_index < len(values):
                    value = values[new_index]
                    proposals.append(Proposal(
                        source="tunable", title=f"{knob} {current[knob]}->{value}",
                        rationale=f"try {knob}={value}", families=(FAMILY[knob],),
                        candidate=variant(context.candidate, **{knob: value}),
                        params={knob: value}))
        return proposals


class FixedJudge:
    """Diagnoses from the measurement's bottleneck; proposes nothing itself; scores a
    proposal 0.6 when its family is wanted (vectorize, unroll), 0.3 otherwise."""

    name = "fixed"

    def __init__(self, wants: tuple[str, ...] = ("vectorize", "unroll")) -> None:
        self.wants = wants

    def diagnose(self, context: NodeContext) -> Diagnosis:
        m = context.measurement
        bottleneck = (m.bottleneck if m else None) or "unknown"
        return Diagnosis(bottleneck=bottleneck, summary=f"{bottleneck}-bound",
                         evidence=(f"DRAM {m.metrics.get('sol_dram_pct', 0):.1f}% of peak",),
                         wants=self.wants, source="rules")

    def propose(self, context: NodeContext, diagnosis: Diagnosis) -> list[Proposal]:
        return []

    def score(self, proposal: Proposal, diagnosis: Diagnosis) -> float:
        return 0.6 if set(proposal.families) & set(diagnosis.wants) else 0.3


class FailingJudge(FixedJudge):
    """A judge whose every call fails, as an LLM behind a dead endpoint would."""

    name = "llm:unreachable"

    def diagnose(self, context: NodeContext) -> Diagnosis:
        raise JudgeError("timed out after 30 s")


def synthetic_measurement(block: int, unroll: int, vec: int) -> Measurement | None:
    """The made-up table (see the module docstring). None: deliberately not recorded."""
    if (block, unroll, vec) == (1024, 4, 4):
        return None
    if unroll == 8 and vec == 4:
        return Measurement(status="rejected", guard="compile", gpu=SYNTHETIC_GPU,
                           message="line 4: too many resources requested (synthetic)")
    if (block, unroll, vec) == (64, 4, 2):
        return Measurement(status="rejected", guard="wrong_values", gpu=SYNTHETIC_GPU,
                           message="outputs differ from the reference (synthetic)")
    block_factor = {64: 1.30, 128: 1.08, 256: 1.0, 512: 0.97, 1024: 1.02}[block]
    unroll_factor = {1: 1.0, 2: 0.93, 4: 0.90, 8: 0.95}[unroll]
    vec_factor = {1: 1.0, 2: 0.82, 4: 0.68}[vec]
    time_ms = NAIVE_MS * block_factor * unroll_factor * vec_factor
    sol_dram = min(95.0, 55.2 * NAIVE_MS / time_ms)
    occupancy = {64: 45.0, 128: 60.0, 256: 70.0, 512: 72.0, 1024: 65.0}[block] - 5 * math.log2(unroll)
    metrics = {
        "sol_dram_pct": sol_dram, "sol_sm_pct": 24.0 / vec, "sol_l1tex_pct": 18.4 * vec ** 0.5,
        "dram_bytes": 2.128e9 * (1.0 if vec == 1 else 0.999),
        "l1_global_load_sectors": 3.36e7 * (1.1 if vec == 1 else 1.0),
        "l1_global_store_sectors": 3.36e7,
        "instructions_executed": 2.0e8 / (vec * unroll ** 0.5),
        "achieved_occupancy_pct": occupancy, "block_size": float(block),
    }
    return Measurement(status="passed", time_ms=time_ms, spread_ms=time_ms * 1e-3, metrics=metrics,
                       bottleneck="memory" if sol_dram >= 60 else "latency",
                       registers=10 + 2 * unroll + 2 * vec,
                       spill_bytes=64 if unroll == 8 and vec == 2 else 0, gpu=SYNTHETIC_GPU)


def synthetic_recordings(base: Candidate = ROOT) -> dict[str, Any]:
    recorded = {}
    for block in KNOBS["BLOCK"]:
        for unroll in KNOBS["UNROLL"]:
            for vec in KNOBS["VEC"]:
                measurement = synthetic_measurement(block, unroll, vec)
                if measurement is not None:
                    candidate = variant(base, BLOCK=block, UNROLL=unroll, VEC=vec)
                    recorded[candidate.content_hash()] = measurement.to_dict()
    return {"gpu": SYNTHETIC_GPU, "task": "relu", "note": "synthetic numbers for engine tests",
            "recorded": recorded}


def write_recordings(path: Path, base: Candidate = ROOT) -> Path:
    path.write_text(json.dumps(synthetic_recordings(base)))
    return path
