"""What guard regions cost per gate run (issue 33, part 1): every suite task's naive kernel
through the gate with the candidate's buffers in guarded ranges and without.

    python bench/guard_regions.py --out bench/results/$(date +%F)-h100-guard-regions.json \\
        [--tasks relu,softmax] [--repeats 3] [--full]

For each task, at the suite's sizes, with one random base seed whose inputs and references
are built once before its runs (as bench/guard_costs.py's --input-cache: the runs then
differ only in their buffers), `repeats` pairs of gate runs, alternating `off`
(GateOptions(guard_regions=False): 4 KiB canaries in one cuMemAlloc per buffer, the gate
before issue 33) and `on` (the standard gate: each buffer in its own reserved range
between unmapped guards), so drift over the run spreads over both. Without `--full` the
profile and the sanitizers are off: neither changes with the guard regions (the
sanitizers keep exact-size allocations), and their minutes would hide the seconds that
do. Each run records its verdict, wall seconds, the worker's seconds per stage and the
verdict's `environment.buffers`; the summary gives, per task, the median seconds of each
mode and their difference, and the median kernel time of each (the timed runs must not
get slower).

Then, in this process, the allocations alone: each task's buffers (inputs and outputs at
the suite's sizes) allocated and freed `--alloc-repeats` times each way, median
milliseconds per set.

Runs on a GPU host (pycuda, nvcc, torch for the GPU facts; no Django). The JSON is
rewritten, atomically, after every measurement, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.guard_costs import cached_inputs, git_state, measure  # noqa: E402
from profiling.harness import HARNESS_VERSION, tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402

MODES = {"off": False, "on": True}  # mode -> GateOptions.guard_regions


def gate_options(guard_regions: bool, full: bool, workdir: Path, seed: int, input_cache: Path) -> GateOptions:
    light = {} if full else {"profile": False, "sanitize": ()}
    return GateOptions(guard_regions=guard_regions, workdir=str(workdir), seed=seed,
                       input_cache=str(input_cache), **light)


def run_entry(verdict_entry: dict, verdict) -> dict:
    """bench/guard_costs.py's entry of a verdict, with how its buffers were guarded."""
    return {**verdict_entry, "buffers": verdict.environment.buffers if verdict is not None else None}


def bench_task(name: str, entry: dict, repeats: int, full: bool, workdir: Path, save) -> None:
    task = tasks.get(name)
    naive = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    seed = cached_inputs(name, entry, workdir / "inputs")
    runs = entry.setdefault("runs", {mode: [] for mode in MODES})
    for turn in range(repeats):
        for mode, guarded in MODES.items():
            options = gate_options(guarded, full, workdir / name / f"{mode}-{turn}", seed, workdir / "inputs")
            kept: dict = {}

            def judge(options=options, kept=kept):
                kept["verdict"] = evaluate(name, naive, options)
                return kept["verdict"]

            runs[mode].append(run_entry(measure(judge), kept.get("verdict")))
            entry["summary"] = summarize_task(runs)
            save()
            shown = runs[mode][-1]
            print(f"   {mode} #{turn}: {shown.get('status') or shown.get('error')} "
                  f"{shown.get('guard') or ''} {shown.get('seconds')} s, median {shown.get('median_ms')} ms",
                  flush=True)


def summarize_task(runs: dict) -> dict:
    """Median seconds per gate run and median kernel time, per mode, over passed runs."""
    summary: dict = {}
    for mode, entries in runs.items():
        passed = [e for e in entries if e.get("status") == "passed"]
        summary[mode] = {
            "passed": len(passed), "runs": len(entries),
            "seconds": _median([e["seconds"] for e in passed]),
            "median_ms": _median([e["median_ms"] for e in passed if e.get("median_ms") is not None]),
            "worker_stage_seconds": {stage: _median([e["stage_seconds"].get(stage, 0.0) for e in passed])
                                     for stage in sorted({s for e in passed for s in e["stage_seconds"]})
                                     if stage.startswith("worker_")},
        }
    on, off = summary.get("on", {}), summary.get("off", {})
    if on.get("seconds") is not None and off.get("seconds") is not None:
        summary["extra_seconds_per_gate_run"] = round(on["seconds"] - off["seconds"], 3)
    return summary


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def allocation_costs(names: list[str], repeats: int) -> dict:
    """Milliseconds to allocate and free each task's buffers at the suite's sizes, plain
    (canaries in one cuMemAlloc) and guarded (a reserved range each), in this process."""
    from profiling.harness import device

    gpu = device.Gpu()
    out: dict = {"ranges": gpu.buffers_evidence}
    try:
        for name in names:
            task = tasks.get(name)
            specs = [(t.name, t.numpy_dtype(), t.resolve_shape(task.sizes)) for t in task.all_tensors()]
            row = {}
            for mode, ranges in (("off", None), ("on", gpu.ranges)):
                if mode == "on" and ranges is None:
                    row[mode] = None  # no virtual memory management here: said in "ranges"
                    continue
                samples = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    buffers = [device.Buffer(n, dt, shape, ranges=ranges) for n, dt, shape in specs]
                    gpu.synchronize()
                    for b in buffers:
                        b.free()
                    samples.append((time.perf_counter() - started) * 1e3)
                row[mode] = {"median_ms": _median(samples), "min_ms": round(min(samples), 4)}
            out[name] = row
    finally:
        gpu.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--tasks", default="", help="comma-separated task names (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="gate runs per task and mode")
    parser.add_argument("--alloc-repeats", type=int, default=20, help="allocation sets per task and mode")
    parser.add_argument("--full", action="store_true", help="the whole gate: the profile and sanitizers too")
    parser.add_argument("--workdir", default="/tmp/optiml-guard-regions")
    args = parser.parse_args()
    # Imported here: bench.suite imports torch (its vendor timings) when it is imported.
    from bench.suite import gpu_facts

    names = [n for n in args.tasks.split(",") if n] or [t.name for t in tasks.all_tasks()]
    for name in names:
        tasks.get(name)  # an unknown task fails now, not an hour in
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "what": "seconds per gate run with the candidate's buffers in guarded ranges (on) and "
                "with canaries only (off), each suite task's naive kernel; then the allocations alone",
        "command": " ".join(["python", *sys.argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "harness_version": HARNESS_VERSION, "git": git_state(), "environment": gpu_facts(),
        "gate": {mode: gate_options(guarded, args.full, workdir, 0, workdir).identity()
                 for mode, guarded in MODES.items()},
        "tasks": {}, "allocations": None,
    }

    def save() -> None:
        write_json_atomically(out, result)

    for name in names:
        print(f"== {name}", flush=True)
        entry = result["tasks"].setdefault(name, {})
        try:
            bench_task(name, entry, args.repeats, args.full, workdir, save)
        except Exception as error:  # one task must not lose the others
            entry["error"] = f"{type(error).__name__}: {error}"
        save()
    print("== allocations", flush=True)
    try:
        result["allocations"] = allocation_costs(names, args.alloc_repeats)
    except Exception as error:  # the gate runs above are kept
        result["allocations"] = {"error": f"{type(error).__name__}: {error}"}
    save()
    print(f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
