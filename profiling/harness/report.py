"""A verdict as a person reads it: what ran, what passed, how fast, and why."""

from __future__ import annotations

from . import comparisons
from .comparisons import Comparison
from .spec import Task
from .verdict import GUARDS, PASSED, Verdict


def compared_with(verdict: Verdict, task: Task) -> Comparison:
    """What the verdict's time is compared with on the GPU that ran it: the comparison it
    keeps when that was measured there, else the task's recorded numbers only if they were
    recorded on a GPU of this name, else nothing (comparisons.for_gpu)."""
    kept = Comparison.from_dict(verdict.comparison) if verdict.comparison else None
    return comparisons.for_gpu(task, verdict.environment.gpu, kept)


def speedups(verdict: Verdict, task: Task, naive_ms: float | None) -> dict[str, float]:
    """The verdict's time against the vendor's on the same GPU (none when this GPU has no
    vendor time) and against `naive_ms`, the naive kernel's on the same GPU."""
    if verdict.timing is None:
        return {}
    median = verdict.timing.median_ms
    out = {}
    vendor_ms = compared_with(verdict, task).vendor_ms
    if vendor_ms:
        out["vs_vendor"] = vendor_ms / median
    if naive_ms:
        out["vs_naive"] = naive_ms / median
    return out


def render(verdict: Verdict, task: Task, naive_ms: float | None = None) -> str:
    env = verdict.environment
    lines = [
        f"Task {task.name}: {task.description}",
        f"Candidate {verdict.candidate_hash[:12]}"
        + (f" on {env.gpu} (CUDA {env.cuda})" if env.gpu else "")
        + f", harness {env.harness_version or '?'}",
        _headline(verdict),
    ]
    lines += _compile_lines(verdict)
    lines += _correctness_lines(verdict)
    lines += _timing_lines(verdict, task, naive_ms)
    lines += _profile_lines(verdict)
    return "\n".join(lines)


def _headline(verdict: Verdict) -> str:
    if verdict.status == PASSED:
        return "Verdict: PASSED"
    if verdict.guard:
        return (f"Verdict: {verdict.status.upper()} by guard '{verdict.guard}' "
                f"({GUARDS.get(verdict.guard, '')})\n  {verdict.message}")
    return f"Verdict: {verdict.status.upper()}: {verdict.message}"


def _compile_lines(verdict: Verdict) -> list[str]:
    report = verdict.compile
    if report is None:
        return []
    if not report.ok:
        lines = ["Compile: FAILED"]
        lines += [f"  line {e.line}: {e.message}" if e.line else f"  {e.message}"
                  for e in report.errors[:10]]
        return lines
    lines = [f"Compile: ok in {report.seconds:.2f} s{' (cached)' if report.cached else ''}"]
    for k in report.kernels:
        spills = k.spill_store_bytes + k.spill_load_bytes
        lines.append(f"  {k.kernel}: {k.registers} registers, {spills} B spilled, "
                     f"{k.shared_static_bytes} B static shared, {k.stack_frame_bytes} B stack")
    return lines


def _correctness_lines(verdict: Verdict) -> list[str]:
    if not verdict.correctness:
        return []
    lines = ["Correctness:"]
    if verdict.environment.buffers:  # guard regions, or canaries only and why
        lines.append(f"  buffers: {verdict.environment.buffers}")
    for r in verdict.correctness:
        sizes = ", ".join(f"{k}={v}" for k, v in r.sizes.items())
        outcome = (f"pass (max abs error {r.max_abs_error:.2g})" if r.passed
                   else f"FAIL [{r.guard}] {r.detail}")
        lines.append(f"  {r.level} {sizes:<28} seed {r.seed:<12} {r.distribution:<12} {outcome}")
    return lines


def _timing_lines(verdict: Verdict, task: Task, naive_ms: float | None) -> list[str]:
    t = verdict.timing
    if t is None:
        return []
    lines = [f"Timing: {t.median_ms:.4f} ms +- {t.spread_ms:.4f} (median of {t.runs}, half the "
             f"p10-p90 range; min {t.min_ms:.4f}, max {t.max_ms:.4f}); "
             f"{t.spot_checks} timed runs verified",
             f"  floor {t.floor_ms:.4f} ms: {t.floor_reason}"]
    rate = f"  {t.effective_bandwidth_gbs():.0f} GB/s effective"
    if t.flops:
        rate += f", {t.flop_rate_tflops():.2f} TFLOP/s"
    lines.append(rate)
    ratios = speedups(verdict, task, naive_ms)
    compared = compared_with(verdict, task)
    if "vs_vendor" in ratios:
        lines.append(f"  {ratios['vs_vendor']:.2f}x the vendor reference "
                     f"({compared.vendor_ms:.4f} ms, {compared.vendor_what}; {compared.describe()})")
    elif task.vendor is not None:
        lines.append(f"  no vendor ratio: the vendor reference was {compared.describe()}")
    if "vs_naive" in ratios:
        lines.append(f"  {ratios['vs_naive']:.2f}x the naive kernel ({naive_ms:.4f} ms)")
    return lines


def _profile_lines(verdict: Verdict) -> list[str]:
    p = verdict.profile
    if p is None:
        return []
    m = p.metrics
    lines = [f"Profile: {p.bottleneck}-bound" if p.bottleneck != "unknown" else "Profile: unavailable"]
    if m:
        lines.append(
            f"  SOL SM {m.get('sol_sm_pct', 0):.1f}%, SOL memory {m.get('sol_memory_pct', 0):.1f}%, "
            f"SOL DRAM {m.get('sol_dram_pct', 0):.1f}%, SOL L1/tex {m.get('sol_l1tex_pct', 0):.1f}%")
        lines.append(
            f"  DRAM {m.get('dram_bytes', 0) / 1e9:.3f} GB, L1 global sectors "
            f"{m.get('l1_global_load_sectors', 0) + m.get('l1_global_store_sectors', 0):.3g}, "
            f"instructions {m.get('instructions_executed', 0):.3g}, "
            f"{m.get('registers_per_thread', 0):.0f} registers, achieved occupancy "
            f"{m.get('achieved_occupancy_pct', 0):.1f}%")
    lines += [f"  - {e}" for e in p.evidence]
    if p.report_path:
        lines.append(f"  report: {p.report_path}")
    return lines
