"""Probe every expert's declared order on a GPU host (lineage/engine/probes.py).

    python bench/lineage_probes.py --out bench/results/$(date +%F)-h200-probes.json \\
        --record-dir bench/results/$(date +%F)-h200-probes [--tasks sgemm,topk]

Each probe (a flag turned on without one of its declared prerequisites) that builds is
screened (profiling/harness/screen.py: L0 and L1 checked on the GPU, timed, the physics
floor), one long-lived worker for the run, on inputs from a fresh secret seed; what does
not build is decided by nvcc before the GPU. Per task: `probes-<task>.json` (for the
replay in tests/lineage/test_recorded_probes.py) and `rec-probes-<task>.json` (the
screen's measurements); the summary counts, per task, the preconditions that held and
the orders that turned out to be choices. The JSON is rewritten after every task.

With --replay-dir the screen's measurements come from earlier recordings
(`rec-probes-<task>.json` there) instead of a GPU: what the probes conclude can be
derived again, on any host, from what was measured (each file says it was replayed).
"""

from __future__ import annotations

import argparse
import datetime
import secrets
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lineage.engine import experts, probes  # noqa: E402
from profiling.harness import HARNESS_VERSION  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from profiling.harness.screen import Screener, ScreenOptions  # noqa: E402
from profiling.harness.seeds import SEED_BITS  # noqa: E402
from search.engine.evaluators import GateEvaluator, RecordingEvaluator, ReplayEvaluator  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(experts.tasks_with_experts()))
    parser.add_argument("--workdir", default=tempfile.mkdtemp(prefix="optiml-probes-"))
    parser.add_argument("--record-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--replay-dir", help="measurements from rec-probes-<task>.json here, not a GPU")
    args = parser.parse_args()
    if args.replay_dir:
        return replay(args)
    from bench.suite import gpu_facts

    record_dir = Path(args.record_dir)
    record_dir.mkdir(parents=True, exist_ok=True)
    work = Path(args.workdir)
    seed = secrets.randbits(SEED_BITS)
    screener = Screener(ScreenOptions(seed=seed, input_cache=str(work / "inputs"),
                                      workdir=str(work / "screen")))
    results = {"what": "each expert flag turned on without one of its declared prerequisites: "
                       "nvcc decides what does not build, the screen the rest",
               "command": shlex.join(["python", *sys.argv]),
               "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
               "harness_version": HARNESS_VERSION, "environment": gpu_facts(), "tasks": {}}
    try:
        for name in args.tasks.split(","):
            inner = GateEvaluator(evaluate=lambda task, candidate, _options: screener.screen(task, candidate))
            evaluator = RecordingEvaluator(inner, record_dir / f"rec-probes-{name}.json",
                                           note=f"probes of lineage/experts/{name}")
            try:
                run_task(name, evaluator, results, record_dir, results["environment"].get("gpu", ""))
            finally:
                inner.close()
            write_json_atomically(args.out, results)
    finally:
        screener.close()
    return 0


def run_task(name: str, evaluator, results: dict, record_dir: Path, gpu: str, replayed: bool = False) -> None:
    try:
        found = probes.probe(experts.load(name), evaluator)
    except Exception as error:  # one task failing must not lose the others
        results["tasks"][name] = {"error": f"{type(error).__name__}: {error}"}
    else:
        write_json_atomically(record_dir / f"probes-{name}.json",
                              {**probes.to_dict(name, gpu, found), "replayed": replayed}, indent=1)
        results["tasks"][name] = {
            "probes": len(found),
            "precondition_held": sum(p.precondition_held for p in found),
            "refused_without": sum(p.status == "rejected" for p in found),
            "no_effect_without": sum(p.status == probes.NO_EFFECT for p in found),
            "order_was_a_choice": sum(p.status == "passed" for p in found),
            "undecided": sum(p.status == "error" for p in found),
            "by_guard": {g: sum(p.guard == g for p in found)
                         for g in sorted({p.guard for p in found if p.guard})},
            "findings": [p.finding for p in found]}
    print(name, {k: v for k, v in results["tasks"][name].items() if k != "findings"}, flush=True)


def replay(args: argparse.Namespace) -> int:
    source, record_dir = Path(args.replay_dir), Path(args.record_dir)
    record_dir.mkdir(parents=True, exist_ok=True)
    results = {"what": "the probes derived again from recorded screen measurements (replayed: no "
                       "GPU measured anything here); nvcc and partial evaluation decided the rest here",
               "command": shlex.join(["python", *sys.argv]),
               "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
               "harness_version": HARNESS_VERSION, "tasks": {}}
    for name in args.tasks.split(","):
        evaluator = ReplayEvaluator(source / f"rec-probes-{name}.json")
        results.setdefault("gpu", evaluator.gpu)
        run_task(name, evaluator, results, record_dir, evaluator.gpu, replayed=True)
        write_json_atomically(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
