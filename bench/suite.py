"""Evaluate every task's naive kernel through the gate, and its vendor reference, in one run.

    python bench/suite.py --out bench/results/$(date +%F)-h200-suite.json [--tasks relu,softmax]

Runs on a GPU host (pycuda, torch, ncu; no Django). Writes results as it goes, so a run
cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.vendor import time_vendor  # noqa: E402
from profiling.harness import HARNESS_VERSION, tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.ceilings import summarize  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate  # noqa: E402

# Measured on this H200 (../shared/GPU.md): the share-of-ceiling columns use these.
COPY_CEILING_BYTES_PER_S = 4.25e12  # torch copy_ of 4 GiB
SGEMM_CEILING_FLOPS = 50.7e12  # cuBLAS fp32, TF32 off, 4096^3
COMPUTE_BOUND = {"sgemm", "self_attention", "conv2d"}


def gpu_facts() -> dict:
    query = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    name, driver, memory = (x.strip() for x in subprocess.run(
        query, capture_output=True, text=True, check=True).stdout.splitlines()[0].split(","))
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    return {"gpu": name, "driver": driver, "memory": memory,
            "cuda": nvcc.strip().splitlines()[-1] if nvcc else "?",
            "host": platform.node(), "python": platform.python_version()}


def rates(task, median_ms: float) -> dict:
    seconds = median_ms * 1e-3
    moved, flops = task.bytes(task.sizes), task.flops(task.sizes)
    out = {"effective_gbs": moved / seconds / 1e9, "tflops": flops / seconds / 1e12}
    if task.name in COMPUTE_BOUND:
        out["share_of_ceiling"] = flops / seconds / SGEMM_CEILING_FLOPS
        out["ceiling"] = "cuBLAS fp32 SGEMM 50.7 TFLOP/s"
    else:
        out["share_of_ceiling"] = moved / seconds / COPY_CEILING_BYTES_PER_S
        out["ceiling"] = "device copy 4.25 TB/s"
    return out


def bench_task(task, workdir: Path, profile: bool) -> dict:
    naive = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    verdict = evaluate(task.name, naive, GateOptions(profile=profile, workdir=str(workdir / task.name)))
    entry: dict = {"naive": {"status": verdict.status, "guard": verdict.guard,
                             "message": verdict.message, "seconds": round(verdict.seconds, 1)}}
    if verdict.timing:
        t = verdict.timing
        entry["naive"].update(median_ms=t.median_ms, spread_ms=t.spread_ms, p10_ms=t.p10_ms,
                              p90_ms=t.p90_ms, runs=t.runs, floor_ms=t.floor_ms,
                              **rates(task, t.median_ms))
    if verdict.profile:
        entry["naive"]["bottleneck"] = verdict.profile.bottleneck
        entry["naive"]["metrics"] = verdict.profile.metrics
    samples = time_vendor(task.name, task.sizes)
    stats = summarize(samples)
    entry["vendor"] = {"what": task.vendor.what if task.vendor else "", "median_ms": stats.median,
                       "spread_ms": (stats.p90 - stats.p10) / 2, "runs": stats.runs,
                       **rates(task, stats.median)}
    if verdict.timing:
        entry["naive_vs_vendor"] = stats.median / verdict.timing.median_ms
    return entry


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--tasks", default="")
    parser.add_argument("--workdir", default="/tmp/optiml-bench")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--keep-reports", help="copy each .ncu-rep and its CSV here")
    args = parser.parse_args()
    names = [n for n in args.tasks.split(",") if n] or [t.name for t in tasks.all_tasks()]
    result = {"command": " ".join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "harness_version": HARNESS_VERSION, "environment": gpu_facts(),
              "method": "gate: L0+L1 correctness x5 seeds, 3 warm-up + 30 timed runs, CUDA events, "
                        "L2 flushed (256 MB) and inputs refreshed before each run; vendor: same "
                        "timing around the torch call", "tasks": {}}
    workdir = Path(args.workdir)
    for name in names:
        print(f"== {name}", flush=True)
        try:
            result["tasks"][name] = bench_task(tasks.get(name), workdir, not args.no_profile)
        except Exception as error:  # record and go on: one task must not lose the others
            result["tasks"][name] = {"error": f"{type(error).__name__}: {error}"}
        print(json.dumps(result["tasks"][name], default=str)[:600], flush=True)
        Path(args.out).write_text(json.dumps(result, indent=2, default=str))
    if args.keep_reports:
        keep = Path(args.keep_reports)
        keep.mkdir(parents=True, exist_ok=True)
        for report in workdir.glob("*/*.ncu-rep"):
            shutil.copy2(report, keep / report.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
