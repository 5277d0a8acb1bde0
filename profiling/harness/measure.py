"""Ceilings for a GPU without a datasheet entry, measured once per GPU and driver.

The physics floor must not be zero on an unknown GPU (a kernel that skips its work
would pass any floor of zero), so the worker measures a device copy and an FP32 FMA
loop the first time it meets such a GPU and keeps the numbers in
`$OPTIML_CACHE_DIR/ceilings.json`; ceilings.ceilings_from_measurement turns them into
upper bounds with margins.
"""

from __future__ import annotations

import json
from pathlib import Path

from .ceilings import Ceilings, ceilings_from_measurement
from .jsonfile import write_json_atomically


def cache_path() -> Path:
    from .compile import default_cache_dir

    return default_cache_dir().parent / "ceilings.json"


def measured_ceilings(gpu, harness) -> Ceilings:
    from . import device

    key = f"{gpu.name} / driver {gpu.environment()['driver_api']}"
    path = cache_path()
    known = _read(path)
    if key not in known:
        copy_bps, fma_flops = device.measure_ceilings(harness, gpu)
        known[key] = {"copy_bytes_per_s": copy_bps, "fma_flops_per_s": fma_flops}
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomically(path, known)
    entry = known[key]
    return ceilings_from_measurement(entry["copy_bytes_per_s"], entry["fma_flops_per_s"], key)


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)
            and all(isinstance(v.get(f), int | float) and v[f] > 0
                    for f in ("copy_bytes_per_s", "fma_flops_per_s"))}
