"""What computing the spot checks' references on the GPU (gpuref.py) saves a full gate.

    python bench/gpu_references.py --out $OUT/gpu-references.json \\
        [--tasks self_attention,sgemm] [--reps 2]

Runs on a GPU host (pycuda and torch; no Django). For each task, its naive kernel goes
through the standard full gate (sanitizers on, profile off) as a search's later
candidates do: one fixed seed and an input cache that already holds the L0 and L1 seeds
(a first gate builds it and is not counted). Then `reps` gates with the references on
the GPU and `reps` on the host, alternating. Before each, the cache's timed-run
references (inputs.run_reference) are removed, so that each gate computes all 8 of its
verified runs' references as a search's gate mostly does (its 8 are drawn at random
from 30, so it rarely finds them cached). Per gate it keeps the worker's stage seconds,
the gate's whole time, and the verdict's `environment.references`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import write_gpu_report  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate  # noqa: E402

SEED = 20261204
KEPT = ("worker_correctness", "worker_reference_cross_checks_wait", "worker_timed_runs",
        "worker_verify_timed_runs", "worker_gpu_references", "worker_check_after_timing",
        "sanitize_wait", "gpu")


def one_gate(task_name: str, cache: Path, on_gpu: bool) -> dict:
    task = tasks.get(task_name)
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    shutil.rmtree(cache / "runs", ignore_errors=True)
    verdict = evaluate(task_name, candidate, GateOptions(profile=False, seed=SEED, input_cache=str(cache),
                                                         gpu_references=on_gpu))
    return {"gpu_references": on_gpu, "status": verdict.status, "guard": verdict.guard,
            "message": verdict.message[:300], "seconds": round(verdict.seconds, 3),
            "median_ms": verdict.timing.median_ms if verdict.timing else None,
            "spot_checks": verdict.timing.spot_checks if verdict.timing else None,
            "references": verdict.environment.references,
            "stage_seconds": {k: round(v, 3) for k, v in verdict.stage_seconds.items() if k in KEPT}}


def summary(gates: list[dict], on_gpu: bool, key: str) -> float | None:
    values = [g["stage_seconds"].get(key) if key != "seconds" else g["seconds"]
              for g in gates if g["gpu_references"] == on_gpu]
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tasks", default="self_attention,sgemm")
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for name in args.tasks.split(","):
        cache = Path(tempfile.mkdtemp(prefix=f"optiml-bench-{name}-"))
        warm = one_gate(name, cache, on_gpu=True)
        gates = [one_gate(name, cache, on_gpu=rep % 2 == 0) for rep in range(2 * args.reps)]
        row = {"task": name, "sizes": tasks.get(name).sizes, "warm_up_gate": warm, "gates": gates,
               "median": {side: {key: summary(gates, on_gpu, key) for key in ("seconds", *KEPT)}
                          for side, on_gpu in (("gpu", True), ("host", False))}}
        rows.append(row)
        print(json.dumps({"task": name, "median": row["median"]}), flush=True)
        shutil.rmtree(cache, ignore_errors=True)
    write_gpu_report(args.out, "the standard full gate (sanitizers on, profile off) of each task's naive "
                     "kernel, with the verified timed runs' references on the GPU (gpuref.py) and on "
                     "the host", seed=SEED, tasks=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
