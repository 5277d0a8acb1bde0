"""Which Nsight Compute counters give a roofline with L1, L2 and DRAM ceilings on this
GPU, and what they read (issue 12), on a GPU host:

    python bench/ncu_roofline_probe.py --out $OUT/ncu-roofline.json

Profile code may only name counters that exist: one unknown name and ncu refuses the
whole profile. So this asks ncu which of the candidate names the chip has
(`--query-metrics --chip`), reads the names Nsight Compute's own hierarchical roofline
section uses, then profiles two small kernels (a float4 copy, memory-bound; an FMA
chain, compute-bound) with the names that exist and records every value. The
ceilings are the counters' own `peak_sustained` (per cycle) times their unit's clock
(`cycles_elapsed.avg.per_second`), as Nsight Compute draws them.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

NCU = shutil.which("ncu") or "/opt/nvidia/nsight-compute/2025.3.1/ncu"

# Bytes through each level, their peaks per cycle, and each unit's clock; FP32 work
# (one FFMA is two FLOP) with its peak. The names of Nsight Compute's roofline charts.
CANDIDATES = [
    "l1tex__t_bytes.sum", "lts__t_bytes.sum", "dram__bytes.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "l1tex__t_bytes.sum.peak_sustained", "lts__t_bytes.sum.peak_sustained",
    "dram__bytes.sum.peak_sustained",
    "l1tex__cycles_elapsed.avg.per_second", "lts__cycles_elapsed.avg.per_second",
    "dram__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second",
    "smsp__cycles_elapsed.avg.per_second",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "gpu__time_duration.sum",
]

KERNELS = r'''
import cupy as cp
copy = cp.RawKernel(r"""
extern "C" __global__ void probe_copy(const float4* x, float4* y, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = x[i];
}""", "probe_copy")
fma = cp.RawKernel(r"""
extern "C" __global__ void probe_fma(float* y, int steps) {
    float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 1e-4f;
    for (int i = 0; i < steps; ++i) { a = fmaf(a, b, c); b = fmaf(b, a, c); }
    y[blockIdx.x * blockDim.x + threadIdx.x] = a + b;
}""", "probe_fma")
n = 1 << 26
x = cp.ones(n * 4, dtype=cp.float32); y = cp.empty_like(x)
copy((132 * 8,), (256,), (x, y, cp.int64(n)))
z = cp.empty(132 * 8 * 256, dtype=cp.float32)
fma((132 * 8,), (256,), (z, cp.int32(4096)))
cp.cuda.runtime.deviceSynchronize()
'''


def known_metrics(chip: str) -> tuple[set[str], str]:
    out = subprocess.run([NCU, "--query-metrics", "--chip", chip], capture_output=True, text=True)
    bases = {line.split()[0] for line in out.stdout.splitlines() if line.strip() and "__" in line.split()[0]}
    return bases, out.stderr[-400:]


def section_names() -> dict[str, list[str]]:
    """The metric names in the installed roofline section files."""
    found: dict[str, list[str]] = {}
    root = Path(NCU).resolve().parent / "sections"
    for path in sorted(root.glob("*Roofline*.section")):
        names = sorted(set(re.findall(r'Name:\s*"([a-z0-9_]+__[a-z0-9_.]+)"', path.read_text())))
        found[path.name] = names
    return found


def profile(names: list[str], workdir: Path) -> dict:
    script = workdir / "kernels.py"
    script.write_text(KERNELS)
    report = workdir / "probe"
    run = subprocess.run([NCU, "--clock-control", "none", "--metrics", ",".join(names),
                          "--export", str(report), "--force-overwrite", sys.executable, str(script)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return {"returncode": run.returncode, "stderr": run.stderr[-2000:], "stdout": run.stdout[-2000:]}
    raw = subprocess.run([NCU, "--import", f"{report}.ncu-rep", "--csv", "--page", "raw"],
                         capture_output=True, text=True)
    lines = [line for line in raw.stdout.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, units, data = rows[0], rows[1], rows[2:]
    kernels = {}
    for row in data:
        record = dict(zip(header, row, strict=False))
        kernels[record.get("Kernel Name", "?")] = {
            name: {"value": record.get(name), "unit": units[header.index(name)] if name in header else None}
            for name in names}
    return {"returncode": 0, "kernels": kernels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--chip", default="gh100")
    args = parser.parse_args()
    bases, query_err = known_metrics(args.chip)
    exists = {name: name.split(".")[0] in bases for name in CANDIDATES}
    usable = [name for name in CANDIDATES if exists[name]]
    with tempfile.TemporaryDirectory() as tmp:
        measured = profile(usable, Path(tmp))
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    result = {
        "command": "python " + " ".join(sys.argv), "date": datetime.datetime.now(datetime.UTC).isoformat(),
        "gpu_and_driver": smi, "ncu": NCU, "python": platform.python_version(), "chip": args.chip,
        "query_stderr": query_err, "known_bases": len(bases), "exists": exists,
        "roofline_sections": section_names(), "profile": measured,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({"exists": exists, "returncode": measured.get("returncode")}, indent=1))


if __name__ == "__main__":
    main()
