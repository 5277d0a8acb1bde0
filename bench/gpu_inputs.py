"""What generating the L1 inputs on the GPU (inputs.generated_on_gpu) saves a search.

    python bench/gpu_inputs.py --out $OUT/gpu-inputs.json [--tasks relu,softmax,self_attention]

Runs on a GPU host (pycuda; no Django). For each task, its naive kernel goes through the
standard full gate (sanitizers on, profile off) as a search's candidates do: one fixed
seed and an input cache, empty before the first candidate. With the L1 inputs generated
on the host (the gate before this change: five seeds built in parallel processes before
the worker starts, then mapped from the cache) and on the GPU (drawn by the harness's
kernel in the worker, downloaded once; only their references are cached), in fresh
caches, two gates each: the search's first candidate (it builds the cache) and its
second (it finds it). Per gate: the whole time, the worker's stage seconds, the time
spent before the worker started (prepare_inputs), and the verdict's `environment.inputs`.

With --screen, the start of a screened search instead (the web app's default): the root
through the screen (one serving process: its L1 seed built, then kept), a second
candidate through the same screen, then the root's full gate, which shares the screen's
input cache (the screen's L1 seed is the full gate's first).
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

SEED = 20261205
KEPT = ("prepare_inputs", "worker_correctness", "worker_generate_inputs", "worker_seed_references",
        "worker_timed_runs", "worker_verify_timed_runs", "worker_check_after_timing", "gpu")


def one_gate(task_name: str, cache: Path, on_gpu: bool) -> dict:
    task = tasks.get(task_name)
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    verdict = evaluate(task_name, candidate, GateOptions(profile=False, seed=SEED, input_cache=str(cache),
                                                         gpu_inputs=on_gpu))
    return {**summary(verdict),
            "l1_checks_passed": sum(r.passed for r in verdict.correctness if r.level == "L1"),
            "stage_seconds": {k: round(v, 3) for k, v in verdict.stage_seconds.items() if k in KEPT}}


def summary(verdict) -> dict:
    return {"status": verdict.status, "guard": verdict.guard, "message": verdict.message[:300],
            "seconds": round(verdict.seconds, 3),
            "median_ms": verdict.timing.median_ms if verdict.timing else None,
            "inputs": verdict.environment.inputs or "host"}


def screened_start(task_name: str, cache: Path, on_gpu: bool) -> dict:
    from profiling.harness.screen import Screener, ScreenOptions

    task = tasks.get(task_name)
    candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    looks = {}
    with Screener(ScreenOptions(seed=SEED, input_cache=str(cache), gpu_inputs=on_gpu,
                                workdir=str(cache / "screen"))) as screener:
        for which in ("first_screen", "second_screen"):
            looks[which] = summary(screener.screen(task_name, candidate))
    looks["first_full_gate"] = one_gate(task_name, cache, on_gpu)
    return looks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tasks", default="relu,softmax,self_attention")
    parser.add_argument("--screen", action="store_true", help="a screened search's start (above)")
    args = parser.parse_args()
    rows = []
    for name in args.tasks.split(","):
        row = {"task": name, "sizes": tasks.get(name).sizes}
        for side, on_gpu in (("host", False), ("gpu", True)):
            cache = Path(tempfile.mkdtemp(prefix=f"optiml-bench-{name}-{side}-"))
            if args.screen:
                row[side] = screened_start(name, cache, on_gpu)
            else:
                row[side] = {"first_candidate": one_gate(name, cache, on_gpu),
                             "second_candidate": one_gate(name, cache, on_gpu)}
            shutil.rmtree(cache, ignore_errors=True)
        rows.append(row)
        print(json.dumps({"task": name, **{side: {k: v["seconds"] for k, v in row[side].items()}
                                           for side in ("host", "gpu")}}), flush=True)
    what = ("the start of a screened search of each task's naive kernel: two screens in one serving "
            "process, then the full gate (sanitizers on, profile off), one seed, one input cache"
            if args.screen else
            "the standard full gate (sanitizers on, profile off) of each task's naive kernel, the first "
            "and second candidate of a search (one seed, one input cache)")
    write_gpu_report(args.out, what + ", with the L1 inputs generated on the host and on the GPU",
                     seed=SEED, tasks=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
