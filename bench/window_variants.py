"""window.walk_rows at several settings of its tunables on the window tasks (a GPU host):
the naive kernel, the skeleton as emitted, and WALK / BLOCK_X / BLOCK variants, full gate,
the vendor timed in the same run. Says which settings the skeleton's defaults should be.

    python bench/window_variants.py --out $OUT/window-variants.json [--tasks depthwise3x3,maxpool3d]
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.skeleton_transfer import each_task, gate  # noqa: E402
from bench.transfer_suite import ADMISSION_DIR, TASK_DIR, time_vendor  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from search.engine import forms  # noqa: E402
from search.engine.forms import skeletons  # noqa: E402

VARIANTS = [{"WALK": w, "BLOCK_X": x, "BLOCK": b} for w in (1, 2, 4) for x in (32, 64) for b in (128, 256)]


def run_task(name: str, cache: Path) -> dict:
    task = tasks.get(name)
    row = {"naive": gate(name, Candidate.from_source_and_plan(task.naive_source, task.naive_plan), cache),
           "variants": []}
    emitted = skeletons.by_name("window.walk_rows").emit(forms.lift(task.naive_source, task.naive_plan),
                                                         task.naive_plan, task)
    for tunables in VARIANTS:
        plan = {**emitted.plan, "tunables": {**emitted.plan["tunables"], **tunables}}
        verdict = gate(name, Candidate.from_dict({**plan, "source": emitted.source}), cache, sanitize=())
        row["variants"].append({"tunables": tunables, "status": verdict["status"],
                                "median_ms": verdict["median_ms"],
                                "guard": verdict["guard"]})
        print(name, tunables, verdict["status"], verdict["median_ms"], flush=True)
    row["vendor_ms"] = statistics.median(time_vendor(name, task.sizes))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="depthwise3x3,maxpool3d")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    tasks.add_directory(TASK_DIR)
    tasks.add_directory(ADMISSION_DIR)
    from bench.suite import gpu_facts

    result = {"what": "window.walk_rows at several tunables (full gate, sanitizers off for the variants)",
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "environment": gpu_facts() if shutil.which("nvidia-smi") else {"gpu": None}, "tasks": {}}
    cache = Path(tempfile.mkdtemp(prefix="optiml-window-variants-"))
    each_task(args.tasks.split(","), lambda name: run_task(name, cache), result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
