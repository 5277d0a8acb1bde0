"""What the gate's guards cost: every suite task's naive kernel, three ways.

    python bench/guard_costs.py --out bench/results/$(date +%F)-h200-guard-costs.json \\
        [--tasks relu,softmax] [--no-profile] [--modes full,light,screen]

For each task, at the suite's sizes:
- `full`: the full gate with everything on (GateOptions() defaults: 5 seeds, 30 timed
  runs with 8 verified, the check after them, every compute-sanitizer tool, the profile);
- `light`: the same without the sanitizers and with 3 verified runs (roughly the gate
  before the hardening), so the difference is what those guards cost;
- `screen`: the search's screen (screen.Screener), one long-lived worker for the whole
  run as in a search: each task screened twice, `cold` (its first candidate: inputs built,
  seeds uploaded, and for the first task the worker started) and `warm` (the next one).

With `--input-cache`, each task gets one random base seed (drawn from the OS, as a
search draws its run's seed) and its inputs and references are built once, in parallel,
before its gate modes run (`inputs_s`): the modes then differ only in their guards, as
the candidates of one search do. Without it every gate run draws fresh seeds and builds
its inputs itself, which at the suite's sizes costs the same tens of seconds in both
modes.

Each entry records the verdict (status, guard), the median, the wall seconds and the
verdict's seconds per stage (`stage_seconds`: compile, gpu, sanitize, profile,
second_gate, ...). Runs on a GPU host (pycuda, nvcc, compute-sanitizer, ncu; no
Django). The JSON is rewritten, atomically, after every measurement, so a run cut short
keeps what it measured, and a task that fails is recorded as an error and the next one
runs.
"""

from __future__ import annotations

import argparse
import datetime
import secrets
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from profiling.harness import HARNESS_VERSION, tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate, prepare_inputs  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from profiling.harness.screen import Screener, ScreenOptions  # noqa: E402
from profiling.harness.seeds import SEED_BITS  # noqa: E402
from profiling.harness.verdict import Verdict  # noqa: E402

MODES = ("full", "light", "screen")
LIGHT_SPOT_CHECKS = 3  # the old gate's number of verified timed runs
SCREEN_SEED = 0  # the screen keeps its inputs per seed, as a search does


def gate_options(mode: str, profile: bool, workdir: Path, *, seed: int | None = None,
                 input_cache: str | None = None) -> GateOptions:
    common = {"profile": profile, "workdir": str(workdir), "seed": seed, "input_cache": input_cache}
    if mode == "full":
        return GateOptions(**common)
    if mode == "light":
        return GateOptions(**common, sanitize=(), spot_checks=LIGHT_SPOT_CHECKS)
    raise ValueError(f"not a gate mode: {mode!r}")


def verdict_entry(verdict: Verdict, wall_s: float) -> dict:
    timing = verdict.timing
    return {
        "status": verdict.status, "guard": verdict.guard, "message": verdict.message[:400],
        "stage": verdict.stage, "median_ms": timing.median_ms if timing else None,
        "spread_ms": timing.spread_ms if timing else None,
        "floor_ms": timing.floor_ms if timing else None,
        "verified_runs": timing.spot_checks if timing else None,
        "seconds": round(verdict.seconds, 2), "wall_s": round(wall_s, 2),
        "stage_seconds": {k: round(v, 2) for k, v in sorted(verdict.stage_seconds.items())},
        "bottleneck": verdict.profile.bottleneck if verdict.profile else None,
        # the compute-sanitizer tools that ran (none where the host lacks the tool)
        "sanitizers_ran": verdict.settings.get("sanitize"),
    }


def measure(fn) -> dict:
    """Run one measurement; its failure is recorded, never raised (the next one runs)."""
    started = time.monotonic()
    try:
        verdict = fn()
    except Exception as error:  # a failed measurement is a result here
        return {"error": f"{type(error).__name__}: {error}", "wall_s": round(time.monotonic() - started, 2),
                "traceback": traceback.format_exc()[-2000:]}
    return verdict_entry(verdict, time.monotonic() - started)


def git_state() -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError) as error:  # a copy of the tree without .git
        return {"commit": None, "why": f"{type(error).__name__}: {error}"}


def summarize(results: dict) -> dict:
    """Per mode: how many passed and the seconds over all tasks measured so far."""
    summary: dict = {}
    for entry in results.values():
        for mode, measured in entry.items():
            if not isinstance(measured, dict) or "status" not in measured:
                continue
            row = summary.setdefault(mode, {"measured": 0, "passed": 0, "seconds": 0.0})
            row["measured"] += 1
            row["passed"] += measured["status"] == "passed"
            row["seconds"] = round(row["seconds"] + measured["seconds"], 2)
    return summary


def cached_inputs(name: str, entry: dict, input_cache: Path) -> int:
    """A random base seed for the task, its inputs and references built now (timed)."""
    task, seed = tasks.get(name), secrets.randbits(SEED_BITS)
    started = time.monotonic()
    options = GateOptions()
    prepare_inputs(task, options.levels, task.sizes, dict.fromkeys(options.levels, options.seeds),
                   seed, str(input_cache), gpu_inputs=options.gpu_inputs)
    entry["inputs_s"] = round(time.monotonic() - started, 2)
    return seed


def bench_task(name: str, entry: dict, modes: list[str], profile: bool, workdir: Path,
               screener: Screener | None, save, input_cache: Path | None = None) -> None:
    """Fill `entry` with the task's measurements, saving after each one."""
    task = tasks.get(name)
    naive = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    seed = cached_inputs(name, entry, input_cache) if input_cache and set(modes) - {"screen"} else None
    for mode in modes:
        if mode == "screen":
            assert screener is not None
            runs = {f"screen_{turn}": (lambda: screener.screen(name, naive)) for turn in ("cold", "warm")}
        else:
            options = gate_options(mode, profile, workdir / name / mode, seed=seed,
                                   input_cache=str(input_cache) if input_cache else None)
            runs = {mode: lambda options=options: evaluate(name, naive, options)}
        for key, run in runs.items():
            entry[key] = measure(run)
            save()
            shown = entry[key]
            print(f"   {key}: {shown.get('status') or shown.get('error')} {shown.get('guard') or ''} "
                  f"median {shown.get('median_ms')} ms, {shown.get('wall_s')} s "
                  f"{shown.get('stage_seconds', '')}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--tasks", default="", help="comma-separated task names (default: all)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"any of {', '.join(MODES)}")
    parser.add_argument("--no-profile", action="store_true", help="no ncu profile in the gate modes")
    parser.add_argument("--workdir", default="/tmp/optiml-guard-costs")
    parser.add_argument("--input-cache", action="store_true",
                        help="one random seed per task, its inputs built once for every gate mode")
    args = parser.parse_args()
    # Imported here: bench.suite imports torch (its vendor timings) when it is imported.
    from bench.suite import gpu_facts

    names = [n for n in args.tasks.split(",") if n] or [t.name for t in tasks.all_tasks()]
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown modes {unknown}; known: {', '.join(MODES)}")
    for name in names:
        tasks.get(name)  # an unknown task fails now, not an hour in
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    result = {
        "what": "the gate's guard costs: each naive kernel through the full gate, the gate "
                "without sanitizers and with 3 verified runs, and the screen",
        "command": " ".join(["python", *sys.argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "harness_version": HARNESS_VERSION, "git": git_state(), "environment": gpu_facts(),
        "modes": {"full": gate_options("full", not args.no_profile, workdir).identity(),
                  "light": gate_options("light", not args.no_profile, workdir).identity(),
                  "screen": {"l0_seeds": ScreenOptions().l0_seeds, "l1_seeds": ScreenOptions().l1_seeds,
                             "timing_runs": ScreenOptions().timing_runs, "seed": SCREEN_SEED}},
        "tasks": {}, "summary": {},
    }

    def save() -> None:
        result["summary"] = summarize(result["tasks"])
        write_json_atomically(out, result)

    screener = None
    if "screen" in modes:
        screener = Screener(ScreenOptions(seed=SCREEN_SEED, input_cache=str(workdir / "screen-inputs"),
                                          workdir=str(workdir / "screen")))
    try:
        for name in names:
            print(f"== {name}", flush=True)
            entry = result["tasks"].setdefault(name, {})
            try:
                bench_task(name, entry, modes, not args.no_profile, workdir, screener, save,
                           workdir / "gate-inputs" if args.input_cache else None)
            except Exception as error:  # one task must not lose the others
                entry["error"] = f"{type(error).__name__}: {error}"
            save()
    finally:
        if screener is not None:
            screener.close()
    print(f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
