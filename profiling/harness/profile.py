"""Nsight Compute: collect a chosen metric list, parse it, name the bottleneck.

ncu counters explain; they never rank. Time comes from CUDA events (worker.py). The
`.ncu-rep` file is kept so a user can open it in the Nsight Compute GUI.
"""

from __future__ import annotations

import csv
import io
import shutil
from dataclasses import dataclass

# Names checked on the H200's ncu 2025.3 (GPU.md), plus the occupancy/launch ones ncu
# documents for sm_90.
METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sol_sm_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "sol_memory_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "sol_dram_pct",
    "l1tex__throughput.avg.pct_of_peak_sustained_active": "sol_l1tex_pct",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "sol_l2_pct",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "l1_global_load_sectors",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": "l1_global_store_sectors",
    "smsp__inst_executed.sum": "instructions_executed",
    "launch__registers_per_thread": "registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__grid_size": "grid_size",
    "launch__block_size": "block_size",
    # The hierarchical roofline (Nsight Compute's): bytes through L1 and L2 (DRAM's are
    # above), FP32 work, and each ceiling as the counter's peak per cycle times its
    # unit's clock. Names checked on the H200's ncu 2025.3.1 with
    # bench/ncu_roofline_probe.py (bench/results/2026-12-03-h200-ncu-roofline.json).
    "l1tex__t_bytes.sum": "l1_bytes",
    "lts__t_bytes.sum": "l2_bytes",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": "ffma_thread_inst",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": "fadd_thread_inst",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": "fmul_thread_inst",
    "l1tex__t_bytes.sum.peak_sustained": "l1_peak_bytes_per_cycle",
    "lts__t_bytes.sum.peak_sustained": "l2_peak_bytes_per_cycle",
    "dram__bytes.sum.peak_sustained": "dram_peak_bytes_per_cycle",
    "l1tex__cycles_elapsed.avg.per_second": "l1_cycles_per_s",
    "lts__cycles_elapsed.avg.per_second": "l2_cycles_per_s",
    "dram__cycles_elapsed.avg.per_second": "dram_cycles_per_s",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained": "ffma_peak_per_cycle",
    "sm__cycles_elapsed.avg.per_second": "sm_cycles_per_s",
}

# Percent of peak at which a unit counts as the limiter. Nsight Compute's own
# "Speed Of Light" guidance treats >= 60 % of peak as high utilisation.
BUSY_PCT = 60.0
# Below this achieved occupancy with idle units, too few warps hide latency.
LOW_OCCUPANCY_PCT = 25.0


def ncu_command(report_path: str, kernels: list[str], target: list[str]) -> list[str]:
    ncu = shutil.which("ncu") or "/opt/nvidia/nsight-compute/2025.3.1/ncu"
    names = "|".join(sorted(set(kernels)))
    return [
        ncu, "--target-processes", "all", "--clock-control", "none",
        "--kernel-name-base", "function", "--kernel-name", f"regex:^({names})$",
        "--metrics", ",".join(METRICS), "--export", report_path, "--force-overwrite", *target,
    ]


def import_command(report_path: str) -> list[str]:
    ncu = shutil.which("ncu") or "/opt/nvidia/nsight-compute/2025.3.1/ncu"
    return [ncu, "--import", report_path, "--csv", "--page", "raw"]


@dataclass(frozen=True)
class KernelProfile:
    kernel: str
    metrics: dict[str, float]


def parse_raw_csv(text: str) -> list[KernelProfile]:
    """Rows of `ncu --import X --csv --page raw`: a header, a units row, one row per launch."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if len(lines) < 2:
        raise ValueError("no kernel rows in the ncu CSV (did the kernel filter match?)")
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, units, data = rows[0], rows[1], rows[2:]
    scale = {name: _unit_scale(unit) for name, unit in zip(header, units, strict=False)}
    profiles = []
    for row in data:
        record = dict(zip(header, row, strict=False))
        metrics = {}
        for metric, key in METRICS.items():
            value = record.get(metric, "")
            if value not in ("", "n/a"):
                metrics[key] = float(value.replace(",", "")) * scale.get(metric, 1.0)
        profiles.append(KernelProfile(kernel=record.get("Kernel Name", "?"), metrics=metrics))
    return profiles


def _unit_scale(unit: str) -> float:
    """Normalise to bytes, nanoseconds and hertz, whatever unit ncu chose for the column.
    A rate scales by its numerator: "Kbyte/cycle" is 1e3 bytes per cycle."""
    numerator = unit.strip().split("/")[0]
    return {
        "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
        "KB": 1e3, "MB": 1e6, "GB": 1e9,
        "nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
        "ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9,
        "hz": 1, "Khz": 1e3, "Mhz": 1e6, "Ghz": 1e9, "Hz": 1, "KHz": 1e3, "MHz": 1e6, "GHz": 1e9,
    }.get(numerator, 1.0)


_SUMMED = ("duration_ns", "dram_read_bytes", "dram_write_bytes", "l1_global_load_sectors",
           "l1_global_store_sectors", "instructions_executed", "l1_bytes", "l2_bytes",
           "ffma_thread_inst", "fadd_thread_inst", "fmul_thread_inst")


def aggregate(profiles: list[KernelProfile]) -> dict[str, float]:
    """One plan, possibly several launches: counts add up; rates are time-weighted."""
    if not profiles:
        return {}
    total_ns = sum(p.metrics.get("duration_ns", 0.0) for p in profiles) or 1.0
    merged: dict[str, float] = {}
    for key in METRICS.values():
        values = [(p.metrics[key], p.metrics.get("duration_ns", 0.0)) for p in profiles
                  if key in p.metrics]
        if not values:
            continue
        if key in _SUMMED:
            merged[key] = sum(v for v, _ in values)
        elif key == "registers_per_thread":
            merged[key] = max(v for v, _ in values)
        else:
            merged[key] = sum(v * w for v, w in values) / total_ns
    merged["dram_bytes"] = merged.get("dram_read_bytes", 0.0) + merged.get("dram_write_bytes", 0.0)
    return merged


def classify(metrics: dict[str, float]) -> tuple[str, list[str]]:
    """memory / compute / occupancy / latency, with the numbers that decided it."""
    sm = metrics.get("sol_sm_pct", 0.0)
    memory = max(metrics.get("sol_memory_pct", 0.0), metrics.get("sol_dram_pct", 0.0))
    dram = metrics.get("sol_dram_pct", 0.0)
    occupancy = metrics.get("achieved_occupancy_pct")
    evidence = [f"SM throughput {sm:.1f}% of peak", f"memory throughput {memory:.1f}% of peak "
                f"(DRAM {dram:.1f}%)"]
    if max(sm, memory) >= BUSY_PCT:
        if memory >= sm:
            evidence.append(f"memory is the busier unit and above {BUSY_PCT:.0f}%: memory-bound")
            return "memory", evidence
        evidence.append(f"the SM is the busier unit and above {BUSY_PCT:.0f}%: compute-bound")
        return "compute", evidence
    if occupancy is not None:
        evidence.append(f"achieved occupancy {occupancy:.1f}%")
        if occupancy < LOW_OCCUPANCY_PCT:
            evidence.append(f"both units under {BUSY_PCT:.0f}% and occupancy under "
                            f"{LOW_OCCUPANCY_PCT:.0f}%: too few warps to hide latency")
            return "occupancy", evidence
    evidence.append(f"both units under {BUSY_PCT:.0f}% with enough warps: stalls dominate, "
                    "latency-bound")
    return "latency", evidence


# (level, its bytes, its peak bytes per cycle, its clock) for the hierarchical roofline
ROOFLINE_LEVELS = (("L1", "l1_bytes", "l1_peak_bytes_per_cycle", "l1_cycles_per_s"),
                   ("L2", "l2_bytes", "l2_peak_bytes_per_cycle", "l2_cycles_per_s"),
                   ("DRAM", "dram_bytes", "dram_peak_bytes_per_cycle", "dram_cycles_per_s"))


def hierarchical_roofline(metrics: dict[str, float]) -> dict | None:
    """The kernel on Nsight Compute's hierarchical roofline, from what ncu counted: its
    FP32 work (an FFMA is two FLOP), the bytes through L1, L2 and DRAM, and each
    ceiling as its counter's peak per cycle times its unit's clock, so the ceilings
    are the profiled GPU's own. None for a profile without these counters (taken
    before 2026-12-03)."""
    if "ffma_thread_inst" not in metrics or not metrics.get("duration_ns"):
        return None
    flops = (2 * metrics["ffma_thread_inst"] + metrics.get("fadd_thread_inst", 0.0)
             + metrics.get("fmul_thread_inst", 0.0))
    seconds = metrics["duration_ns"] / 1e9
    peak, clock = metrics.get("ffma_peak_per_cycle"), metrics.get("sm_cycles_per_s")
    levels = []
    for name, moved, per_cycle, hertz in ROOFLINE_LEVELS:
        count, ceiling = metrics.get(moved), None
        if metrics.get(per_cycle) and metrics.get(hertz):
            ceiling = metrics[per_cycle] * metrics[hertz]
        levels.append({"level": name, "bytes": count, "ceiling_bytes_per_s": ceiling,
                       "intensity": flops / count if flops and count else None,
                       "achieved_bytes_per_s": count / seconds if count else None})
    return {"flops": flops, "seconds": seconds, "achieved_flops_per_s": flops / seconds,
            "fp32_flops_per_s": 2 * peak * clock if peak and clock else None, "levels": levels}
