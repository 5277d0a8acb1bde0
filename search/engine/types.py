"""The shared vocabulary of the search: what is proposed, measured, diagnosed and scored.

Everything here is plain, JSON-serialisable data (to_dict / from_dict), so a whole run
can be stored, resumed after a restart, and replayed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Protocol

from profiling.harness.candidate import Candidate


@dataclass(frozen=True)
class Proposal:
    """One change to a parent kernel, materialised as a full candidate.

    `source` says who proposed it, always: "root", "tunable", "rewrite:<name>",
    "llm:<model>", "skill:<card id>". `families` name the optimisation kinds it belongs
    to (see FAMILIES), which the judge matches against its diagnosis to score it.
    """

    source: str
    title: str
    rationale: str
    candidate: Candidate
    families: tuple[str, ...] = ()
    diff: str = ""  # unified diff of source and plan against the parent
    params: dict[str, Any] = field(default_factory=dict)
    # The speed-up the proposer's own evidence expects (a skill card's measured effect),
    # which the judge weighs into its prior; None when the proposer has no measurements.
    expected_speedup: float | None = None
    # The speed-up over the parent measured reachable through this proposal from this
    # very kernel: a lineage's step proposed at the state it was recorded from, times
    # the best its recorded steps reached after it. None when nothing was measured from
    # this kernel: an expectation carried over from other kernels (a card's median) is
    # never counted on. The judge weighs it like expected_speedup; the search counts on
    # it before repeating the measurement (SearchConfig.lookahead).
    reaches: float | None = None

    def best_expectation(self) -> float | None:
        """The larger of the step's own expected speed-up and what it measured reachable."""
        known = [s for s in (self.expected_speedup, self.reaches) if s is not None and s == s]
        return max(known) if known else None

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not dataclasses.asdict: that deep-copies the candidate only for it
        # to be replaced. The dict shares `params` with the proposal: copy it to change it.
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["candidate"] = self.candidate.to_dict()
        data["families"] = list(self.families)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Proposal:
        return cls(**{**data, "candidate": Candidate.from_dict(data["candidate"]),
                      "families": tuple(data.get("families", ()))})


# Optimisation families a diagnosis can ask for and a proposal can belong to.
FAMILIES = (
    "vectorize",       # wider loads/stores (float4), fewer memory instructions
    "coalesce",        # contiguous accesses across a warp
    "grid_stride",     # fewer, longer-lived threads; amortised index math
    "tile",            # reuse through shared memory or registers
    "unroll",          # instruction-level parallelism, fewer branches
    "occupancy",       # more warps resident: block size, registers, shared memory
    "parallelism",     # more threads/blocks for the work (e.g. a block per row, not a thread)
    "warp_reduce",     # shuffles instead of shared-memory trees
    "restrict",        # const __restrict__: read-only cache, fewer reloads
    "launch_bounds",   # register budget matched to the block size
    "fast_math",       # cheaper transcendentals where the tolerance allows
    "fusion",          # fewer launches, fewer round trips to DRAM
)


@dataclass(frozen=True)
class Measurement:
    """What an evaluation says about one candidate, reduced from the gate's Verdict."""

    status: str  # "passed", "rejected", "error"
    guard: str | None = None
    message: str = ""
    time_ms: float | None = None
    spread_ms: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # profile.METRICS keys
    bottleneck: str | None = None  # memory | compute | latency | occupancy | unknown
    registers: int | None = None  # the most any kernel of the plan uses
    spill_bytes: int = 0
    replayed: bool = False  # True when served from recorded measurements, not measured now
    gpu: str = ""
    verdict: dict[str, Any] = field(default_factory=dict)  # the full Verdict.to_dict()
    # "full": the whole gate said this. "screen": only the search's screen did
    # (profiling/harness/screen.py): fewer seeds and runs, no profile.
    level: str = "full"
    # For a full measurement that the screen promoted: what the screen saw first
    # ({"time_ms", "seconds"}), so a run can account for both looks.
    screen: dict[str, Any] | None = None

    def after_screen(self, screened: Measurement) -> Measurement:
        """This full-gate measurement, keeping what the screen saw before it."""
        return replace(self, screen={"time_ms": screened.time_ms, "seconds": screened.seconds})

    @property
    def seconds(self) -> float:
        """Time spent measuring this kernel on the GPU host, both looks included."""
        return float(self.verdict.get("seconds") or 0.0) + float((self.screen or {}).get("seconds") or 0.0)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        """Field by field: the dict shares the verdict, metrics and screen dicts with the
        measurement (a step serialises thousands; dataclasses.asdict deep-copies each
        verdict). Copy them before changing them."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        return cls(**data)


@dataclass(frozen=True)
class Diagnosis:
    """The judge's reading of a measurement, in plain words with the numbers it used."""

    bottleneck: str
    summary: str
    evidence: tuple[str, ...] = ()  # "DRAM throughput 55% < 80% of peak", ...
    wants: tuple[str, ...] = ()  # FAMILIES the judge expects to help, best first
    source: str = "rules"  # "rules" or "llm:<model>"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "evidence": list(self.evidence), "wants": list(self.wants)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnosis:
        return cls(**{**data, "evidence": tuple(data.get("evidence", ())),
                      "wants": tuple(data.get("wants", ()))})


@dataclass(frozen=True)
class NodeContext:
    """What a proposal source sees of the node it proposes children for."""

    task: str
    candidate: Candidate
    measurement: Measurement | None
    diagnosis: Diagnosis | None
    tolerance_allows_fast_math: bool = False
    history: tuple[str, ...] = ()  # titles of the proposals on the path from the root
    # For a node measured without a profile (the screen's): the nearest ancestor's
    # diagnosis that read one, as (node id, diagnosis).
    profiled_ancestor: tuple[int, Diagnosis] | None = None


class ProposalSource(Protocol):
    """Contract: `propose` returns proposals whose candidates differ from the parent's
    (same content hash = no proposal), each with its source, rationale and diff. A
    source never raises for a kernel it cannot change: it returns nothing."""

    name: str

    def propose(self, context: NodeContext) -> list[Proposal]: ...


class Judge(Protocol):
    """diagnose -> propose -> score. A failing judge (an LLM that times out) raises
    JudgeError; the search then falls back to the rule judge and says so."""

    name: str

    def diagnose(self, context: NodeContext) -> Diagnosis: ...

    def propose(self, context: NodeContext, diagnosis: Diagnosis) -> list[Proposal]: ...

    def score(self, proposal: Proposal, diagnosis: Diagnosis) -> float: ...


class JudgeError(RuntimeError):
    """The judge could not answer (timeout, malformed reply, quota): a state, not a crash."""


class Evaluator(Protocol):
    """Measures candidates. `submit` may return before the work is done; `collect`
    returns finished (candidate hash, Measurement) pairs as they arrive."""

    def submit(self, task: str, candidate: Candidate) -> None: ...

    def collect(self, timeout_s: float) -> list[tuple[str, Measurement]]: ...
