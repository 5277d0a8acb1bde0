"""Hardware ceilings for the physics floor, and the timing statistics.

The floor must never reject an honest kernel, so it uses the vendor's datasheet peaks
(upper bounds), not our measured ceilings (which a good kernel can approach or pass):
no correct kernel moves its compulsory bytes faster than peak DRAM bandwidth, or does
its arithmetic faster than the fastest unit that could meet the task's tolerance. It
also fails closed: a GPU with no datasheet entry gets ceilings measured when its worker
starts, with margins that keep them above anything a kernel could reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ceilings:
    dram_bytes_per_s: float
    math_flops_per_s: dict[str, float]
    source: str
    # FP32 on the CUDA cores (an FFMA is two FLOP): the compute roof of the inspector's
    # roofline, where a kernel's plain fp32 arithmetic runs. None where it is not known.
    fp32_core_flops_per_s: float | None = None


# What a correct fp32 result can cost on tensor cores. Single-precision accuracy needs
# each product split into at least three lower-precision products (3xTF32; Ootomo &
# Yokota 2022 do it with FP16 and error correction, also three), so no fp32-accurate
# kernel does its products faster than a third of the fastest dense 16/19-bit tensor
# rate. Integer splitting schemes (Ozaki) need more products than that for 24 bits.
FP32_SPLIT_PRODUCTS = 3

# NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e; dense tensor TF32 494.7 TFLOP/s and
# FP16/BF16 989.4 TFLOP/s (twice that with sparsity); FP32 CUDA cores 67 TFLOP/s.
H200 = Ceilings(
    dram_bytes_per_s=4.8e12,
    math_flops_per_s={"fp32": 989.4e12 / FP32_SPLIT_PRODUCTS, "fp16": 989.4e12,
                      "bf16": 989.4e12},
    source="NVIDIA H200 SXM datasheet peaks",
    fp32_core_flops_per_s=67e12,
)
# H100 SXM datasheet: 3.35 TB/s HBM3, same math rates as the H200.
H100 = Ceilings(dram_bytes_per_s=3.35e12, math_flops_per_s=H200.math_flops_per_s,
                source="NVIDIA H100 SXM datasheet peaks", fp32_core_flops_per_s=67e12)

_BY_NAME = {"H200": H200, "H100": H100}

# For a GPU without a datasheet entry the worker measures a device-to-device copy and an
# FP32 FMA loop (measure.py) and bounds from above what the best kernel could reach:
# the copy reaches ~89 % of DRAM peak on an H200 (4.25 of 4.8 TB/s, GPU.md), so peak is
# taken as 1.25x the copy; dense 16-bit tensor rates are at most 16x the FP32 FMA rate
# on every NVIDIA part to date (H200: 989.4 / 67 = 14.8), hence 16x for fp16/bf16 and
# 16/3x for fp32 (split products, above).
MEASURED_DRAM_MARGIN = 1.25
TENSOR_OVER_FMA = 16.0


def ceilings_from_measurement(copy_bytes_per_s: float, fma_flops_per_s: float,
                              what: str) -> Ceilings:
    tensor = fma_flops_per_s * TENSOR_OVER_FMA
    return Ceilings(
        dram_bytes_per_s=copy_bytes_per_s * MEASURED_DRAM_MARGIN,
        math_flops_per_s={"fp32": max(fma_flops_per_s, tensor / FP32_SPLIT_PRODUCTS),
                          "fp16": tensor, "bf16": tensor},
        source=f"measured on this GPU ({what}), with margins (ceilings.py)",
    )


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
    # fp32's rate is not the FP32 cores' (67 TFLOP/s on an H200): it is what fp32-accurate
    # results can cost at best, on tensor cores (FP32_SPLIT_PRODUCTS), and the reason says so.
    how = ("for fp32-accurate results, a third of the 16-bit tensor rate" if math == "fp32"
           else f"for {math}")
    return math_ms, (f"{flops / 1e12:.3g} TFLOP at {ceilings.math_flops_per_s.get(math, 0) / 1e12:.1f} "
                     f"TFLOP/s {how} ({ceilings.source})")


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
