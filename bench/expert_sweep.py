"""Tune an expert's tunables on a GPU host: every combination screened, the vendor timed.

    python bench/expert_sweep.py --task sgemm --out bench/results/$(date +%F)-h200-sweep-sgemm.json \\
        --grid TC_BK=16,32 --grid ASYNC_STAGES=2,3,4 [--off OPT_ASYNC_COPY] [--full-gate-best]

Each combination of the grid's values overrides the expert's plan tunables (its manifest's
`plan.tunables`) in one state (all flags on, less those named by --off) and goes through
the search's screen (profiling/harness/screen.py: L0 and L1 checked on the GPU, 10 timed
runs, the physics floor), one long-lived worker for the sweep. With --full-gate-best the
fastest combination then gets the full gate, as an expert does in bench/lineage_suite.py.
The vendor is timed in the same run (bench/vendor.py). The JSON is rewritten after every
combination, so a run cut short keeps what it measured. Picking the values to commit to
the manifest is a person's call: the sweep only measures.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import secrets
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lineage.engine import experts  # noqa: E402
from profiling.harness import HARNESS_VERSION, tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.ceilings import summarize  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from profiling.harness.screen import Screener, ScreenOptions  # noqa: E402
from profiling.harness.seeds import SEED_BITS  # noqa: E402


def parse_grid(items: list[str]) -> dict[str, list[int]]:
    """`NAME=v1,v2` items -> {NAME: [v1, v2]}; a malformed item is an argparse error."""
    grid: dict[str, list[int]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not name.isidentifier() or not values:
            raise ValueError(f"--grid {item!r}: expected NAME=v1,v2,...")
        try:
            grid[name] = [int(v) for v in values.split(",")]
        except ValueError:
            raise ValueError(f"--grid {item!r}: values must be integers") from None
    return grid


def combinations(grid: dict[str, list[int]]) -> list[dict[str, int]]:
    names = sorted(grid)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(grid[n] for n in names))]


def variant(expert: experts.Expert, state: frozenset[str], overrides: dict[str, int]) -> Candidate:
    plan = expert.candidate(state).plan_dict()
    unknown = sorted(set(overrides) - set(plan.get("tunables", {})))
    if unknown:
        raise ValueError(f"{expert.task}: no tunables {unknown} in its plan")
    plan["tunables"] = {**plan["tunables"], **overrides}
    return Candidate.from_source_and_plan(expert.source, plan)


def row_of(verdict) -> dict:
    """What a sweep keeps of a verdict: status, guard, times, registers and spills."""
    timing, compiled = verdict.timing, verdict.compile
    kernels = [{"kernel": k.kernel, "registers": k.registers, "spill_store_bytes": k.spill_store_bytes}
               for k in (compiled.kernels if compiled else [])]
    return {"status": verdict.status, "guard": verdict.guard, "message": (verdict.message or "")[:500],
            "median_ms": timing.median_ms if timing else None,
            "spread_ms": (timing.p90_ms - timing.p10_ms) if timing else None, "kernels": kernels}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--grid", action="append", default=[], help="NAME=v1,v2 (repeatable)")
    parser.add_argument("--off", default="", help="comma-separated flags turned off (default: all on)")
    parser.add_argument("--full-gate-best", action="store_true")
    parser.add_argument("--workdir", default=tempfile.mkdtemp(prefix="optiml-sweep-"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    try:
        grid = parse_grid(args.grid)
        expert = experts.load(args.task)
    except (ValueError, experts.ExpertError) as error:
        parser.error(str(error))
    state = expert.all_on() - {f for f in args.off.split(",") if f}
    if not expert.valid(state):
        parser.error(f"--off {args.off}: a flag that is on depends on one that is off")
    from bench.suite import gpu_facts, rates
    from bench.vendor import time_vendor

    task = tasks.get(args.task)
    seed = secrets.randbits(SEED_BITS)
    work = Path(args.workdir)
    result = {"what": f"{args.task} expert tunables swept through the screen, vendor in the same run",
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "harness_version": HARNESS_VERSION, "environment": gpu_facts(), "seed": seed,
              "flags_on": sorted(state), "base_tunables": expert.plan.get("tunables", {}),
              "variants": [], "vendor": None, "best": None}
    vendor = summarize(time_vendor(args.task, task.sizes)) if task.vendor else None
    if vendor:
        result["vendor"] = {"median_ms": vendor.median, "what": task.vendor.what}
    write_json_atomically(args.out, result)
    screener = Screener(ScreenOptions(seed=seed, input_cache=str(work / "inputs"),
                                      workdir=str(work / "screen")))
    try:
        for overrides in combinations(grid):
            started = time.monotonic()
            try:
                verdict = screener.screen(args.task, variant(expert, state, overrides))
                row = {"tunables": overrides, **row_of(verdict)}
            except Exception as error:  # one variant must not lose the others
                row = {"tunables": overrides, "status": "error",
                       "message": f"{type(error).__name__}: {error}"}
            row["seconds"] = time.monotonic() - started
            if vendor and row.get("median_ms"):
                row["speed_vs_vendor"] = vendor.median / row["median_ms"]
            result["variants"].append(row)
            write_json_atomically(args.out, result)
            print(json.dumps(row), flush=True)
    finally:
        screener.close()
    passed = [r for r in result["variants"] if r["status"] == "passed" and r.get("median_ms")]
    if passed:
        best = min(passed, key=lambda r: r["median_ms"])
        result["best"] = {"tunables": best["tunables"], "screen_ms": best["median_ms"]}
        if args.full_gate_best:
            verdict = evaluate(args.task, variant(expert, state, best["tunables"]),
                               GateOptions(workdir=str(work / "gate"), seed=seed,
                                           input_cache=str(work / "inputs")))
            gated = row_of(verdict)
            ms = gated["median_ms"]
            speed = {"speed_vs_vendor": vendor.median / ms} if vendor and ms else {}
            result["best"]["full_gate"] = {**gated, **(rates(task, ms) if ms else {}), **speed}
        write_json_atomically(args.out, result)
        print("best", json.dumps(result["best"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
