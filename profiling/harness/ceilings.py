"""Hardware ceilings for the physics floor, and the timing statistics.

The floor must never reject an honest kernel, so it uses the vendor's datasheet peaks
(upper bounds), not our measured ceilings (which a good kernel can approach or pass):
no correct kernel moves its compulsory bytes faster than peak DRAM bandwidth, or does
its arithmetic faster than the fastest unit that could meet the task's tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ceilings:
    dram_bytes_per_s: float
    math_flops_per_s: dict[str, float]
    source: str


# NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e; dense TF32 tensor 494.7 TFLOP/s (989.4 with
# sparsity), FP32 CUDA cores 67 TFLOP/s. "fp32" uses the TF32 tensor rate because
# split-precision schemes (3xTF32) reach fp32 accuracy on tensor cores.
H200 = Ceilings(
    dram_bytes_per_s=4.8e12,
    math_flops_per_s={"fp32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12},
    source="NVIDIA H200 SXM datasheet peaks",
)
# H100 SXM datasheet: 3.35 TB/s HBM3, same math rates as the H200.
H100 = Ceilings(dram_bytes_per_s=3.35e12, math_flops_per_s=H200.math_flops_per_s,
                source="NVIDIA H100 SXM datasheet peaks")

_BY_NAME = {"H200": H200, "H100": H100}


def ceilings_for(gpu_name: str) -> Ceilings | None:
    for key, ceilings in _BY_NAME.items():
        if key in gpu_name.upper():
            return ceilings
    return None


def physics_floor_ms(bytes_moved: float, flops: float, math: str, ceilings: Ceilings) -> tuple[float, str]:
    """The least time any correct kernel could take, and which ceiling sets it."""
    memory_ms = bytes_moved / ceilings.dram_bytes_per_s * 1e3
    math_ms = flops / ceilings.math_flops_per_s.get(math, max(ceilings.math_flops_per_s.values())) * 1e3
    if memory_ms >= math_ms:
        return memory_ms, (f"{bytes_moved / 1e9:.3g} GB at {ceilings.dram_bytes_per_s / 1e12:.2f} TB/s "
                           f"({ceilings.source})")
    return math_ms, (f"{flops / 1e12:.3g} TFLOP at {ceilings.math_flops_per_s.get(math, 0) / 1e12:.1f} "
                     f"TFLOP/s {math} ({ceilings.source})")


@dataclass(frozen=True)
class Stats:
    runs: int
    median: float
    mean: float
    stdev: float
    min: float
    max: float
    p10: float
    p90: float


def summarize(samples_ms: list[float]) -> Stats:
    if not samples_ms:
        raise ValueError("no timing samples")
    values = np.asarray(samples_ms, dtype=np.float64)
    return Stats(
        runs=len(values), median=float(np.median(values)), mean=float(values.mean()),
        stdev=float(values.std(ddof=1)) if len(values) > 1 else 0.0,
        min=float(values.min()), max=float(values.max()),
        p10=float(np.percentile(values, 10)), p90=float(np.percentile(values, 90)),
    )
