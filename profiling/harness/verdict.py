"""What the gate says about a candidate: plain, JSON-serialisable records.

Every rejection names the guard that caught it (see GUARDS), so a person can see which
check fired and why, and a test can assert it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# guard name -> what it protects against, in words shown to users.
GUARDS = {
    "candidate": "the candidate or its launch plan is malformed",
    "source_policy": "the source uses something the gate forbids (file includes, device-side launches)",
    "compile_policy": "a compiler option the gate forbids",
    "compile": "nvcc could not compile the source",
    "plan": "the launch plan does not fit the compiled kernels or the task",
    "resources": "the launch asks for more than the GPU has (threads, shared memory, device memory)",
    "launch": "the kernel failed to launch or faulted (a trap, a misaligned access)",
    "timeout": "the candidate ran past its time limit and its process group was killed",
    "crash": "the evaluation process died without a verdict",
    "output_unwritten": "output elements still hold the poison written before the run",
    "out_of_bounds_write": "the canary around an output or scratch buffer was overwritten",
    "out_of_bounds_access": "a kernel touched memory outside its buffers and faulted (an illegal "
                            "address: unmapped guard regions surround every buffer)",
    "input_mutated": "an input buffer changed during the run",
    "nonfinite": "NaN or Inf where the reference has a finite value",
    "wrong_values": "outputs differ from the reference beyond the task's tolerance",
    "timed_output": "an output from a timed run (fresh inputs) was wrong",
    "physics_floor": "the time is below what the GPU's bandwidth or arithmetic peak allows",
    "out_of_bounds": "compute-sanitizer's memcheck saw an access outside an allocation or misaligned",
    "race": "compute-sanitizer's racecheck saw a shared-memory hazard between threads",
    "uninitialized_read": "compute-sanitizer's initcheck saw a read of global memory never written",
    "sync_error": "compute-sanitizer's synccheck saw a barrier misused (divergent or bad mask)",
    "internal": "the harness itself failed; this is our bug, not the candidate's",
}

PASSED = "passed"
REJECTED = "rejected"
# Compiled and checked statically, but not run: this host has no GPU. Not a judgement
# of the candidate, so no guard is named.
INCOMPLETE = "incomplete"
# The harness failed (our bug, or the host's): says nothing about the candidate.
ERROR = "error"


@dataclass
class KernelResources:
    kernel: str
    registers: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_frame_bytes: int = 0
    shared_static_bytes: int = 0
    constant_bytes: int = 0
    barriers: int = 0
    # Parameter types from the PTX (".param .u64" -> "u64", "f32", "b8[16]", ...), checked
    # against the plan's arguments (signature.py); None when not recorded.
    params: list[str] | None = None


@dataclass
class CompileError:
    line: int | None
    message: str


@dataclass
class CompileReport:
    ok: bool
    seconds: float = 0.0
    cached: bool = False
    kernels: list[KernelResources] = field(default_factory=list)
    errors: list[CompileError] = field(default_factory=list)
    log: str = ""
    cubin_path: str | None = None
    cubin_sha256: str | None = None
    # How nvcc was confined (confine.py): "bwrap" (a sandbox with no network and no view
    # of the project) or "rlimits" (limits, minimal environment and empty folder only).
    sandbox: str = ""


@dataclass
class CheckRecord:
    """One correctness run: a level (L0/L1), a size assignment, a seed, a distribution."""

    level: str
    sizes: dict[str, int]
    seed: int
    distribution: str
    passed: bool
    guard: str | None = None
    detail: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0


@dataclass
class TimingReport:
    runs: int
    median_ms: float
    mean_ms: float
    stdev_ms: float
    min_ms: float
    max_ms: float
    p10_ms: float
    p90_ms: float
    floor_ms: float
    floor_reason: str
    bytes: float
    flops: float
    spot_checks: int = 0

    @property
    def spread_ms(self) -> float:
        """Half the 10-90 percentile range: the +- shown beside the median."""
        return (self.p90_ms - self.p10_ms) / 2

    def effective_bandwidth_gbs(self) -> float:
        return self.bytes / (self.median_ms * 1e-3) / 1e9

    def flop_rate_tflops(self) -> float:
        return self.flops / (self.median_ms * 1e-3) / 1e12


@dataclass
class ProfileReport:
    metrics: dict[str, float]
    per_kernel: list[dict[str, Any]]
    bottleneck: str
    evidence: list[str]
    report_path: str | None = None


@dataclass
class Environment:
    gpu: str = ""
    driver: str = ""
    cuda: str = ""
    harness_version: str = ""
    hostname: str = ""
    # Where the timed runs' spot-check references were computed, and why (gpuref.py).
    references: str = ""
    # Where the correctness checks' inputs were generated (inputs.generated_on_gpu).
    inputs: str = ""
    # How the candidate's buffers were guarded: each in its own range between unmapped
    # guard regions, or canaries only and why (worker.Session.choose_buffers).
    buffers: str = ""


@dataclass
class Verdict:
    task: str
    candidate_hash: str
    status: str  # PASSED, REJECTED, INCOMPLETE or ERROR
    guard: str | None = None
    message: str = ""
    stage: str = ""  # where it ended: compile, correctness, timing, profile, done
    compile: CompileReport | None = None
    correctness: list[CheckRecord] = field(default_factory=list)
    timing: TimingReport | None = None
    profile: ProfileReport | None = None
    environment: Environment = field(default_factory=Environment)
    seconds: float = 0.0
    # "full": the whole gate. "screen": the search's cheaper first look (screen.py), which
    # decides only what the full gate looks at again, never what a search keeps.
    level: str = "full"
    # The gate settings this verdict was measured with (GateOptions.identity()): part of
    # what a stored verdict is looked up by, so a weaker measurement never stands in for
    # the standard gate.
    settings: dict[str, Any] = field(default_factory=dict)
    # The correctness and timing seeds the worker used. Operator-only: reproduces the
    # verdict, and must never be served to users (the inputs would then be public).
    seeds: dict[str, Any] = field(default_factory=dict)
    # Wall seconds per stage of the gate (compile, gpu, sanitize, profile, second_gate):
    # what each guard costs, for bench/guard_costs.py.
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # What its time was compared with, on the GPU that ran it (comparisons.Comparison's
    # to_dict(): the vendor's and the naive kernel's times, the GPU they were measured on
    # and where they came from); empty for verdicts from before (issue 33).
    comparison: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        data = dict(data)
        if data.get("compile"):
            c = dict(data["compile"])
            c["kernels"] = [KernelResources(**k) for k in c.get("kernels", [])]
            c["errors"] = [CompileError(**e) for e in c.get("errors", [])]
            data["compile"] = CompileReport(**c)
        data["correctness"] = [CheckRecord(**r) for r in data.get("correctness", [])]
        if data.get("timing"):
            data["timing"] = TimingReport(**data["timing"])
        if data.get("profile"):
            data["profile"] = ProfileReport(**data["profile"])
        data["environment"] = Environment(**data.get("environment", {}))
        return cls(**data)


def rejected(task: str, candidate_hash: str, guard: str, message: str, stage: str, **rest: Any) -> Verdict:
    if guard not in GUARDS:
        raise ValueError(f"unknown guard {guard!r}")
    return Verdict(task=task, candidate_hash=candidate_hash, status=REJECTED, guard=guard,
                   message=message, stage=stage, **rest)
