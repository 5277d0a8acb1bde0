"""The rule judge: reads a measurement, names the bottleneck, ranks the families that help.

No LLM and no randomness: the same profile always gives the same diagnosis, with every
number it used and the threshold it compared that number to, so a person can check it
against the Nsight Compute report. Rules generate nothing themselves (the deterministic
proposal sources do); they diagnose and they score.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from profiling.harness import profile

from .. import forms
from ..forms import cached
from ..types import FAMILIES, Diagnosis, Measurement, NodeContext, Proposal

# What a diagnosis may name. "failed": the measurement has no profile to read because
# the gate rejected the candidate (or the harness failed).
BOTTLENECKS = ("memory", "compute", "latency", "occupancy", "unknown", "failed")

# The families each class asks for before any other evidence is considered, best first.
CLASS_WANTS: dict[str, tuple[str, ...]] = {
    "memory": ("vectorize", "coalesce", "grid_stride", "restrict"),
    "memory_near_peak": ("fusion", "tile", "restrict"),
    "cache": ("tile", "coalesce", "vectorize", "restrict"),
    "occupancy": ("occupancy", "launch_bounds", "parallelism"),
    "latency": ("vectorize", "unroll", "grid_stride", "restrict"),
    "compute": ("fast_math", "unroll", "tile", "warp_reduce"),
    "unknown": ("vectorize", "coalesce", "grid_stride", "occupancy", "unroll"),
}

# Without a profile, what a kernel computes still says where a plain one loses: the
# family its kernel lifts to (search/engine/forms) and the cure that family's plain
# schedule asks for first. The generic "unknown" wants follow these.
FORM_WANTS: dict[str, tuple[tuple[str, ...], str]] = {
    forms.CONTRACTION: (("tile", "vectorize", "unroll"),
                        "a thread per output of a product reads a whole row and column from memory for "
                        "each output, so every input is read once per output that uses it: reuse "
                        "through shared memory and registers (tile) comes first"),
    forms.WINDOW: (("tile", "unroll", "coalesce"),
                   "a thread per output of a window reads inputs its neighbours read too: reuse (tile) "
                   "comes first"),
    forms.ROWS: (("coalesce", "parallelism", "warp_reduce", "vectorize"),
                 "a thread per row walks its row alone: a warp's threads read addresses a row apart "
                 "(coalesce), and there are as many threads as rows (parallelism)"),
    forms.FULL_REDUCE: (("warp_reduce", "grid_stride", "parallelism"),
                        "every element is added into one output: sums within warps and blocks first"),
    forms.PERMUTATION: (("coalesce", "tile"),
                        "a thread per element of a permutation reads along one coordinate and writes "
                        "along another: one side touches a new sector with every thread (coalesce), "
                        "which staging a tile in shared memory mends"),
    forms.SCAN: (("coalesce", "parallelism", "warp_reduce"),
                 "a thread per row carries its running value along the row alone: a warp's threads "
                 "read addresses a row apart (coalesce), and only as many threads as rows run (parallelism)"),
    forms.MAP: (("vectorize", "grid_stride", "unroll", "restrict"),
                "an elementwise map moves each byte once: fewer, wider accesses (vectorize) first"),
}
# Several launches: the family whose plain schedule loses most is read first.
FORM_ORDER = (forms.CONTRACTION, forms.WINDOW, forms.ROWS, forms.SCAN, forms.FULL_REDUCE, forms.PERMUTATION,
              forms.MAP)

SUMMARIES = {
    "memory": "memory-bound: the memory system is the busiest unit, and DRAM bandwidth is "
              "left unused, so move the same bytes in fewer, wider, contiguous accesses",
    "memory_near_peak": "memory-bound near the roofline: DRAM is close to its peak, so only "
                        "moving fewer bytes (fusion, reuse) makes it faster",
    "cache": "memory-bound in the caches: L1/L2 are busy while DRAM is not, so data is re-read "
             "through the cache; keep reused data in shared memory or registers",
    "occupancy": "occupancy-bound: too few warps are resident to hide memory and instruction "
                 "latency, and every unit is mostly idle",
    "latency": "latency-bound: enough warps are resident but neither the SMs nor memory are "
               "busy, so warps stall; give each thread more independent work",
    "compute": "compute-bound: the SMs are the busiest unit; execute fewer or cheaper "
               "instructions",
    "unknown": "no profile to read: the candidate passed, but no ncu metrics came with it",
}


class RuleJudge:
    """Diagnosis from the gate's profile and compile resources; scores by family match.

    Keyword arguments (thresholds):
        dram_near_peak_pct: DRAM throughput, % of peak, at or above which a kernel counts
            as on the bandwidth roofline. The vendor relu in
            bench/results/2026-11-29-h200-suite.json moves 4.22 TB/s, about 88 % of the
            H200's 4.8 TB/s; Nsight Compute's guidance calls >80 % of peak good utilisation.
        sm_count: streaming multiprocessors on the target GPU (the H200 SXM has 132).
        min_blocks_per_sm: a grid under this many blocks per SM leaves SMs idle or with a
            single block each (Nsight Compute's launch-statistics rule warns on grids
            smaller than the SM count; 2 gives each SM a block to swap in while one stalls).
        min_block_threads: blocks smaller than this cap occupancy, because sm_90 keeps at
            most 32 blocks (and 64 warps) per SM: 32 blocks x 64 threads = 2048 threads.
        register_budget: registers per thread above which occupancy is capped under 50 %:
            65,536 registers per SM / 2,048 threads = 32 at full, 64 at half occupancy.
        l1_reread_ratio: L1 global-load traffic (sectors x 32 B) over DRAM read bytes above
            which sectors are fetched many times: a coalesced one-pass kernel sits at 1
            (the naive relu on the H200 reads 1.00x), a warp that touches 32 rows
            (uncoalesced) or data re-read without tiling shows 8x and more.
        base_score: score of a proposal whose families the diagnosis does not ask for.
        rank_decay: how fast a want's weight falls with its rank (see `score`).
        read_forms: without a profile, rank the wants of the family the kernel lifts to
            first (FORM_WANTS); False is the judge before 2026-12-06 (night), for the
            replays of runs recorded with it.
    """

    name = "rules"

    def __init__(
        self,
        *,
        dram_near_peak_pct: float = 80.0,
        sm_count: int = 132,
        min_blocks_per_sm: int = 2,
        min_block_threads: int = 64,
        register_budget: int = 64,
        l1_reread_ratio: float = 4.0,
        base_score: float = 0.1,
        rank_decay: float = 0.7,
        read_forms: bool = True,
    ) -> None:
        if not 0 < base_score <= 1 or not 0 < rank_decay <= 1:
            raise ValueError("base_score and rank_decay must lie in (0, 1]")
        self.dram_near_peak_pct = dram_near_peak_pct
        self.sm_count = sm_count
        self.min_blocks_per_sm = min_blocks_per_sm
        self.min_block_threads = min_block_threads
        self.register_budget = register_budget
        self.l1_reread_ratio = l1_reread_ratio
        self.base_score = base_score
        self.rank_decay = rank_decay
        self.read_forms = read_forms

    # --- diagnose -------------------------------------------------------------------

    def diagnose(self, context: NodeContext) -> Diagnosis:
        m = context.measurement
        if m is None:
            return self._from_form(context, "not measured yet: nothing to read", ())
        if not m.passed:
            return self._failed(m)
        if not m.metrics and context.profiled_ancestor is not None:
            return self._inherited(m, *context.profiled_ancestor)
        if not m.metrics:
            return self._from_form(context, SUMMARIES["unknown"], tuple(self._resources(m)))
        metrics = m.metrics
        bottleneck = m.bottleneck if m.bottleneck in BOTTLENECKS[:4] else profile.classify(metrics)[0]
        flavour = self._flavour(bottleneck, metrics)
        evidence = [*self._throughput(metrics), *self._occupancy(metrics)]
        lead, signals = [], []
        lead += self._grid(metrics, evidence)
        signals += self._block(metrics, evidence)
        signals += self._reread(metrics, evidence)
        lead += self._registers_and_spills(m, metrics, evidence)
        signals += self._atomics(context.candidate.source, evidence)
        by_class = CLASS_WANTS[flavour]
        if not context.tolerance_allows_fast_math:  # it would fail the correctness gate
            by_class = tuple(w for w in by_class if w != "fast_math")
        wants = _rank(lead, by_class, signals)
        if m.time_ms is not None:
            evidence.insert(0, f"time {m.time_ms:.4g} ms (CUDA events, median)")
        return Diagnosis(bottleneck, SUMMARIES[flavour], tuple(evidence), wants, self.name)

    def _from_form(self, context: NodeContext, summary: str, evidence: tuple[str, ...]) -> Diagnosis:
        """No profile to read: the wants of the family the kernel lifts to, then the
        generic ones (a kernel that lifts to none gets those alone)."""
        plan = json.dumps(context.candidate.plan_dict(), sort_keys=True)
        family = lifted_family(context.candidate.source, plan) if self.read_forms else None
        if family is None:
            return Diagnosis("unknown", summary, evidence, CLASS_WANTS["unknown"], source=self.name)
        wants, why = FORM_WANTS[family]
        ordered = tuple(dict.fromkeys((*wants, *CLASS_WANTS["unknown"])))
        return Diagnosis("unknown", f"{summary}; the kernel lifts to a {family} form: {why}",
                         (*evidence, f"lifted (search/engine/forms): {family}"), ordered, source=self.name)

    def _inherited(self, m: Measurement, node_id: int, ancestor: Diagnosis) -> Diagnosis:
        """No profile of its own (the search's screen does not profile): the nearest
        profiled ancestor's reading, said to be that, with this kernel's own time."""
        level = "screened, not profiled" if m.level == "screen" else "not profiled"
        evidence = [f"time {m.time_ms:.4g} ms (CUDA events, median, {level})"] if m.time_ms else []
        evidence += [f"node {node_id}: {line}" for line in ancestor.evidence]
        return Diagnosis(ancestor.bottleneck, f"{level}; the profile of node {node_id}, its nearest "
                         f"profiled ancestor, read: {ancestor.summary}", (*evidence, *self._resources(m)),
                         ancestor.wants, source=self.name)

    def _failed(self, m: Measurement) -> Diagnosis:
        guard = m.guard or "none named"
        what = "was rejected by the gate" if m.status == "rejected" else f"ended in {m.status}"
        summary = f"the candidate {what} (guard: {guard}): {m.message or 'no message'}"
        evidence = (f"status {m.status}", f"guard {guard}", f"message: {m.message}")
        return Diagnosis("failed", summary, evidence, (), self.name)

    def _flavour(self, bottleneck: str, metrics: dict[str, float]) -> str:
        """Memory-bound splits three ways, because the cure differs: at the DRAM roofline
        only fewer bytes help; with the caches busy and DRAM not, reuse (tiling) helps."""
        if bottleneck != "memory":
            return bottleneck
        if metrics.get("sol_dram_pct", 0.0) >= self.dram_near_peak_pct:
            return "memory_near_peak"
        if self._reread_ratio(metrics) > self.l1_reread_ratio:
            return "cache"
        return "memory"

    def _throughput(self, metrics: dict[str, float]) -> list[str]:
        busy, peak = profile.BUSY_PCT, self.dram_near_peak_pct
        sm, dram = metrics.get("sol_sm_pct", 0.0), metrics.get("sol_dram_pct", 0.0)
        memory = metrics.get("sol_memory_pct", dram)
        lines = [f"SM throughput {sm:.1f}% of peak {'>=' if sm >= busy else '<'} {busy:.0f}% "
                 f"(busy): {'the SMs are a limiter' if sm >= busy else 'the SMs are mostly idle'}",
                 f"memory throughput {memory:.1f}% of peak {'>=' if memory >= busy else '<'} "
                 f"{busy:.0f}% (busy)"]
        if dram >= peak:
            lines.append(f"DRAM throughput {dram:.1f}% of peak >= {peak:.0f}%: near the roofline")
        else:
            lines.append(f"DRAM throughput {dram:.1f}% of peak < {peak:.0f}%: bandwidth is left unused")
        for key, unit in (("sol_l1tex_pct", "L1"), ("sol_l2_pct", "L2")):
            if metrics.get(key, 0.0) >= busy and metrics[key] > dram:
                lines.append(f"{unit} throughput {metrics[key]:.1f}% of peak >= {busy:.0f}% while "
                             f"DRAM is at {dram:.1f}%: the {unit} cache is busier than DRAM")
        return lines

    def _occupancy(self, metrics: dict[str, float]) -> list[str]:
        low = profile.LOW_OCCUPANCY_PCT
        lines = []
        if "achieved_occupancy_pct" in metrics:
            occ = metrics["achieved_occupancy_pct"]
            lines.append(f"achieved occupancy {occ:.1f}% < {low:.0f}%: too few warps to hide latency"
                         if occ < low else f"achieved occupancy {occ:.1f}% >= {low:.0f}%: enough warps")
        theoretical = metrics.get("theoretical_occupancy_pct")
        if theoretical is not None and theoretical < 99.5:  # 99.99 is 100 measured over launches
            lines.append(f"theoretical occupancy {theoretical:.1f}% < 100%: registers, shared "
                         "memory or the block size cap the resident warps")
        return lines

    def _grid(self, metrics: dict[str, float], evidence: list[str]) -> list[str]:
        grid = metrics.get("grid_size")
        enough = self.min_blocks_per_sm * self.sm_count
        if grid is None or grid >= enough:
            return []
        evidence.append(f"grid of {grid:.0f} blocks < {enough} ({self.min_blocks_per_sm} x "
                        f"{self.sm_count} SMs): most SMs have no work")
        return ["parallelism"]

    def _block(self, metrics: dict[str, float], evidence: list[str]) -> list[str]:
        block = metrics.get("block_size")
        if block is None or block >= self.min_block_threads:
            return []
        evidence.append(f"block of {block:.0f} threads < {self.min_block_threads}: the 32-blocks-"
                        "per-SM limit caps occupancy")
        return ["occupancy"]

    def _reread_ratio(self, metrics: dict[str, float]) -> float:
        read = metrics.get("dram_read_bytes", 0.0)
        sectors = metrics.get("l1_global_load_sectors", 0.0)
        return sectors * 32.0 / read if read > 0 else 0.0

    def _reread(self, metrics: dict[str, float], evidence: list[str]) -> list[str]:
        ratio = self._reread_ratio(metrics)
        if ratio <= self.l1_reread_ratio:
            return []
        sectors = metrics["l1_global_load_sectors"]
        evidence.append(f"L1 global load sectors {sectors:.4g} x 32 B = {ratio:.1f}x the DRAM read "
                        f"bytes > {self.l1_reread_ratio:.0f}x: each sector is fetched many times "
                        "(uncoalesced, or re-read without tiling)")
        return ["coalesce", "tile"]

    def _registers_and_spills(self, m: Measurement, metrics: dict[str, float],
                              evidence: list[str]) -> list[str]:
        evidence.extend(self._resources(m))
        registers = m.registers or int(metrics.get("registers_per_thread", 0))
        spills = m.spill_bytes or _compile_spills(m.verdict)
        wants = []
        if spills > 0:
            evidence.append(f"{spills} bytes of register spills > 0: registers overflow to local memory")
            wants += ["launch_bounds", "occupancy"]
        if registers > self.register_budget:
            evidence.append(f"{registers} registers per thread > {self.register_budget}: occupancy "
                            "is capped under 50% (65,536 registers per SM)")
            wants += ["launch_bounds", "occupancy"]
        return wants

    def _resources(self, m: Measurement) -> list[str]:
        """One line per compiled kernel, from ptxas, so the diagnosis shows what nvcc did."""
        kernels = ((m.verdict or {}).get("compile") or {}).get("kernels") or []
        return [f"{k.get('kernel', '?')}: {k.get('registers', 0)} registers, "
                f"{k.get('spill_store_bytes', 0) + k.get('spill_load_bytes', 0)} bytes spilled, "
                f"{k.get('shared_static_bytes', 0)} bytes static shared memory (ptxas)"
                for k in kernels]

    def _atomics(self, source: str, evidence: list[str]) -> list[str]:
        if "atomicAdd" not in source:
            return []
        evidence.append("the source uses atomicAdd: reducing within a warp first (shuffles) cuts "
                        "the atomics 32-fold")
        return ["warp_reduce"]

    # --- propose and score --------------------------------------------------------------

    def propose(self, context: NodeContext, diagnosis: Diagnosis) -> list[Proposal]:
        """Rules have no generator of their own: the deterministic sources propose."""
        return []

    def score(self, proposal: Proposal, diagnosis: Diagnosis) -> float:
        """Prior in (0, 1] from how highly the diagnosis ranks the proposal's families.

            score = base + (1 - base) * max over the proposal's families f in wants
                                          of rank_decay ** rank(f)

        rank 0 (the top want) scores 1.0; with the defaults rank 1 scores 0.73, rank 2
        0.54, rank 3 0.41; a proposal of no wanted family (or of none) scores `base`.
        The proposer's own measured expectation, where it has one (a skill card's effect),
        scales that (evidence_weight). A proposal measured from this very kernel
        (Proposal.reaches) scores its evidence weight alone, whatever the families.
        """
        if proposal.reaches is not None:
            # Measured from this very kernel (a lineage's recorded step at its own state):
            # a measurement outranks what the diagnosis infers from the families.
            return evidence_weight(proposal.best_expectation())
        ranks = [diagnosis.wants.index(f) for f in proposal.families if f in diagnosis.wants]
        wanted = self.base_score if not ranks else \
            self.base_score + (1.0 - self.base_score) * self.rank_decay ** min(ranks)
        return wanted * evidence_weight(proposal.best_expectation())


# The expected speed-up at which a proposer's evidence weighs fully; below it the weight
# falls with the square root, to a floor at EVIDENCE_FLOOR times it.
EVIDENCE_FULL = 4.0
EVIDENCE_FLOOR = 1 / 16
NO_EXPECTATION = 1.0  # what an unmeasured proposal is taken to expect


def evidence_weight(expected_speedup: float | None) -> float:
    """How a proposer's measured expectation scales the judge's prior, in (0, 1]:
    sqrt(s / 4) for s between 4/16 and 4, so 4x or more weighs 1, 2x 0.71, an
    unchanged 1x 0.5 and 0.5x (it was slower where it was measured) 0.35. A proposal
    with no expectation (a rewrite, a tunable: never measured) weighs as an unchanged
    1x. (It weighed 1 until 2026-12-01, which put every measured card below every
    unmeasured rewrite: the transfer run on the H200 spent its budget on tunables.)"""
    if expected_speedup is None or expected_speedup != expected_speedup:  # None or NaN
        expected_speedup = NO_EXPECTATION
    share = min(max(expected_speedup / EVIDENCE_FULL, EVIDENCE_FLOOR), 1.0)
    return math.sqrt(share)


def lifted_family(source: str, plan_json: str) -> str | None:
    """The family the plan's kernel lifts to (of several launches, the first in
    FORM_ORDER that any launch lifts to), or None."""
    found = {form.family for _, form in cached.lifted_launches(source, plan_json)
             if isinstance(form, forms.Form)}
    return next((family for family in FORM_ORDER if family in found), None)


def _rank(lead: Iterable[str], by_class: tuple[str, ...], signals: Iterable[str]) -> tuple[str, ...]:
    """Evidence that names a cure outright (a tiny grid, spills) goes first; then the
    class's top want; then the other signals; then the rest of the class's list."""
    ordered = [*lead, *by_class[:1], *signals, *by_class[1:]]
    return tuple(f for i, f in enumerate(ordered) if f in FAMILIES and f not in ordered[:i])


def _compile_spills(verdict: dict[str, Any]) -> int:
    kernels = ((verdict or {}).get("compile") or {}).get("kernels") or []
    return sum(k.get("spill_store_bytes", 0) + k.get("spill_load_bytes", 0) for k in kernels)
