"""Walk every expert backwards on a GPU host and time the vendor in the same run.

    python bench/lineage_suite.py --out bench/results/$(date +%F)-h200-lineages.json \
        --record-dir bench/results/$(date +%F)-h200-lineages [--tasks relu,reduce_sum] [--max-states 32]

Per task: the expert's (all flags on) time ± spread through the full gate (the other
states are screened, as a search screens its candidates, unless --full-gate), the vendor's
(torch / cuBLAS / cuDNN, timed here the same way: bench/vendor.py), the share of the
ceiling, the plain (all off) time, states visited, transitions accepted and rejected,
each step's speed-up, and GPU-minutes; the command, GPU, driver and date. The recordings
(one per task, for `python -m lineage.engine walk --replay`) and the lineages are written
beside it. Nothing here makes up a number: each comes from the gate's own measurements.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lineage.engine import experts  # noqa: E402
from lineage.engine.walker import walk  # noqa: E402
from profiling.harness import HARNESS_VERSION, tasks  # noqa: E402
from profiling.harness.ceilings import summarize  # noqa: E402
from profiling.harness.gate import GateOptions  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from search.engine.evaluators import GateEvaluator, RecordingEvaluator, ScreeningEvaluator  # noqa: E402


def bench_task(name: str, args: argparse.Namespace, record_dir: Path) -> dict:
    from bench.suite import rates  # torch arrives with bench.vendor: GPU hosts only
    from bench.vendor import OPS, WHAT, time_vendor

    expert, task = experts.load(name, args.experts_root), tasks.get(name)
    work = Path(args.workdir) / name
    options = GateOptions(workdir=str(work), seed=args.gate_seed, input_cache=str(work / "inputs"))
    # As in a search (search.engine.__main__): the first state (the expert, all flags on)
    # gets the full gate; each later one is screened, and gets the full gate too only if
    # the screen finds it faster than the best full-gate time so far. --full-gate gives
    # every state the full gate (its profile included), at tens of seconds a state.
    inner = GateEvaluator(options) if args.full_gate else ScreeningEvaluator(options)
    evaluator = RecordingEvaluator(inner, record_dir / f"rec-{name}.json",
                                   note=f"lineage of lineage/experts/{name}")
    started = time.monotonic()
    try:
        lineage = walk(expert, evaluator, max_states=args.max_states)
    finally:
        inner.close()
    write_json_atomically(record_dir / f"lineage-{name}.json", lineage.to_dict(), indent=1)
    top, plain = lineage.states.get(",".join(sorted(expert.all_on()))), lineage.states.get("")
    vendor = summarize(time_vendor(name, task.sizes)) if task.vendor or name in OPS else None
    expert_ms = top.measurement.get("time_ms") if top else None
    return {
        "task": name, "states_possible": len(expert.states()), "states_visited": len(lineage.states),
        "transitions": len(lineage.transitions), "rejected": len(lineage.rejected),
        "complete": lineage.complete, "stopped": lineage.stopped,
        "expert": {"status": top.measurement.get("status") if top else None,
                   "level": top.measurement.get("level") if top else None,
                   "guard": top.measurement.get("guard") if top else None,
                   "median_ms": expert_ms, "spread_ms": top.measurement.get("spread_ms") if top else None,
                   **(rates(task, expert_ms) if expert_ms else {})},
        "plain_ms": plain.measurement.get("time_ms") if plain else None,
        "plain_level": plain.measurement.get("level") if plain else None,
        "vendor": ({"median_ms": vendor.median, "what": task.vendor.what if task.vendor else WHAT[name],
                    "expert_speed_vs_vendor": (vendor.median / expert_ms) if expert_ms else None}
                   if vendor else None),
        "steps": [{"flag": t.flag, "before": t.before, "after": t.after, "speedup": t.speedup}
                  for t in lineage.transitions],
        "rejected_steps": [{"flag": r.flag, "start": r.start, "guard": r.guard} for r in lineage.rejected],
        "gpu_minutes": (time.monotonic() - started) / 60,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", help="comma-separated (default: every expert of the chosen kind)")
    parser.add_argument("--max-states", type=int, default=64)
    parser.add_argument("--family-experts", action="store_true",
                        help="walk the family experts (lineage/family_experts/), not the suite's")
    parser.add_argument("--gate-seed", type=int, default=None)
    parser.add_argument("--full-gate", action="store_true",
                        help="the full gate for every state, not the screen")
    parser.add_argument("--workdir", default=tempfile.mkdtemp(prefix="optiml-lineages-"))
    parser.add_argument("--record-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    args.experts_root = experts.FAMILY_EXPERTS_DIR if args.family_experts else None
    if args.family_experts:
        tasks.add_directory(experts.FAMILY_TASKS_DIR)
    args.tasks = args.tasks or ",".join(experts.tasks_with_experts(args.experts_root))
    if args.gate_seed is None:
        import secrets

        from profiling.harness.seeds import SEED_BITS
        args.gate_seed = secrets.randbits(SEED_BITS)
    from bench.suite import gpu_facts

    record_dir = Path(args.record_dir)
    record_dir.mkdir(parents=True, exist_ok=True)
    results = {"what": "expert kernels walked backwards, vendor timed in the same run; the expert "
                       "through the full gate, the other states screened as in a search "
                       "(each state's measurement says its level) unless --full-gate",
               "command": shlex.join(["python", *sys.argv]),
               "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
               "harness_version": HARNESS_VERSION, "environment": gpu_facts(),
               "gate_seed": args.gate_seed, "tasks": {}}
    for name in args.tasks.split(","):
        try:
            results["tasks"][name] = bench_task(name, args, record_dir)
        except Exception as error:  # one task failing must not lose the others
            results["tasks"][name] = {"error": f"{type(error).__name__}: {error}"}
        write_json_atomically(args.out, results)
        print(name, results["tasks"][name].get("expert", results["tasks"][name]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
