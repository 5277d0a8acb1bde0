"""Where a search's later full gates spend their time, task by task.

    python bench/gate_cost.py --out $OUT/gate-cost.json [--tasks relu,softmax] \\
        [--task-dir bench/transfer_tasks] [--reps 2]

Runs on a GPU host (pycuda; no Django). For each task its naive kernel goes through the
standard full gate as a search's later candidates do: one fixed seed and an input cache
that a first gate (the root's, not counted) filled. Then `reps` pairs of gates more, each
reported with the worker's stage seconds and the gate's whole time, alternately with the
outputs compared on the host alone and on the GPU first (GateOptions.compare_on_gpu). Run it under a
sampling profiler (py-spy record --subprocesses) to see the functions inside a stage.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import write_gpu_report  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate  # noqa: E402

SEED = 20261207


def one_gate(task_name: str, cache: Path, *, compare_on_gpu: bool = False) -> dict:
    task = tasks.get(task_name)
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    verdict = evaluate(task_name, candidate, GateOptions(seed=SEED, input_cache=str(cache),
                                                         compare_on_gpu=compare_on_gpu))
    return {"compare_on_gpu": compare_on_gpu, "status": verdict.status, "guard": verdict.guard,
            "message": verdict.message[:300],
            "seconds": round(verdict.seconds, 3),
            "median_ms": verdict.timing.median_ms if verdict.timing else None,
            "inputs": verdict.environment.inputs, "references": verdict.environment.references,
            "stage_seconds": {k: round(v, 3) for k, v in sorted(verdict.stage_seconds.items())
                              if v >= 0.05}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tasks", default="relu,softmax")
    parser.add_argument("--task-dir", action="append", default=[],
                        help="another directory of task modules, as OPTIML_TASK_PATH")
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    for directory in args.task_dir:
        tasks.add_directory(Path(directory).resolve())
    rows = []
    for name in args.tasks.split(","):
        cache = Path(tempfile.mkdtemp(prefix=f"optiml-gate-cost-{name}-"))
        try:
            first = one_gate(name, cache)
            later = [one_gate(name, cache, compare_on_gpu=on_gpu)
                     for _ in range(args.reps) for on_gpu in (False, True)]
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        row = {"task": name, "sizes": tasks.get(name).sizes, "first_gate": first, "later_gates": later}
        rows.append(row)
        print(json.dumps({"task": name, "first": first["seconds"],
                          "later, host then GPU comparison": [g["seconds"] for g in later],
                          "later_stages": later[-1]["stage_seconds"]}), flush=True)
    write_gpu_report(args.out, "the standard full gate of each task's naive kernel: the root's (first) "
                     "and later candidates' (the input cache filled), outputs compared on the host "
                     "alone and on the GPU first, alternately", seed=SEED, tasks=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
