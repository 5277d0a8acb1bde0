"""Searches from each suite task's naive kernel on a GPU host, one results file.

    python bench/search_suite.py --tasks relu,reduce_sum --budget 40 --minutes 3 \
        --out $OUT/search-a.json --record-dir $OUT/rec

For each task this runs `python -m search.engine optimize` in this process (rule judge,
no LLM, the screen in front of the full gate), records every measurement (for replay in
CI) and writes the trajectory. The results file holds, per task: best time against the
naive kernel and the vendor library, candidates evaluated (by the full gate and by the
screen), GPU-host seconds, candidates per GPU-minute and the evaluation at which the best
was found, with the command, GPU, driver and date. Nothing here makes up a number: each
comes from the search's own summary of what the gate measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiling.harness import HARNESS_VERSION, tasks  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from search.engine.__main__ import build_parser, optimize  # noqa: E402

COPY_CEILING_BYTES_PER_S = 4.25e12  # ../shared/GPU.md, torch copy_ of 4 GiB on the H200


def driver_version() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""


def run_task(name: str, args: argparse.Namespace) -> dict:
    record_dir, work = Path(args.record_dir), Path(args.workdir) / name
    record_dir.mkdir(parents=True, exist_ok=True)
    argv = ["optimize", "--task", name, "--budget", str(args.budget), "--seed", str(args.seed),
            "--spot-checks", str(args.spot_checks), "--workdir", str(work),
            "--record", str(record_dir / f"rec-{name}.json"),
            "--json", str(record_dir / f"trajectory-{name}.json")]
    if args.minutes:
        argv += ["--time-limit", str(args.minutes)]
    if args.no_screen:
        argv.append("--no-screen")
    optimize(build_parser().parse_args(argv), out=lambda line: print(line, flush=True))
    trajectory = json.loads((record_dir / f"trajectory-{name}.json").read_text())
    summary = trajectory["summary"]
    task = tasks.get(name)
    best = summary["best_time_ms"]
    moved = task.bytes(task.sizes)
    return {
        "task": name, "argv": ["python", "-m", "search.engine", *argv],
        "naive_ms": summary["root_time_ms"], "best_ms": best, "best_spread_ms": summary["best_spread_ms"],
        "best_vs_naive": summary["speedup_vs_root"],
        "vendor_ms": summary["vendor_time_ms"], "best_vs_vendor": summary["speedup_vs_vendor"],
        "best_effective_gbs": moved / (best * 1e-3) / 1e9 if best else None,
        "best_share_of_copy_ceiling": moved / (best * 1e-3) / COPY_CEILING_BYTES_PER_S if best else None,
        "candidates_evaluated": summary["evaluations"], "full_gate": summary["full_gate"],
        "screened_only": summary["screened_only"],
        "best_found_at_evaluation": summary["best_found_at_evaluation"],
        "gpu_minutes": summary["evaluation_seconds"] / 60,
        "candidates_per_gpu_minute": summary["candidates_per_gpu_minute"],
        "wall_s": summary["wall_s"], "stopped_by_time_limit": summary["stopped_by_time_limit"],
        "exhausted": summary["exhausted"], "gpu": summary["gpu"],
        "why": trajectory["why"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(t.name for t in tasks.all_tasks()))
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--minutes", type=float, help="per task: ask for no new candidate after this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spot-checks", type=int, default=3)
    parser.add_argument("--no-screen", action="store_true")
    parser.add_argument("--workdir", default="/tmp/optiml-search-suite")
    parser.add_argument("--record-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    results = {
        "what": "searches from each task's naive kernel on the GPU host, rule judge, no LLM",
        "command": shlex.join(["python", *sys.argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "driver": driver_version(), "harness_version": HARNESS_VERSION, "tasks": [],
    }
    for name in args.tasks.split(","):
        results["tasks"].append(run_task(name, args))
        write_json_atomically(args.out, results, indent=1)  # a later task's crash keeps these
    return 0


if __name__ == "__main__":
    sys.exit(main())
