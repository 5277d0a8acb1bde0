"""rows.split_strided on column_stats (bench/admission_tasks) at several block shapes:
BLOCK threads, COLS neighbouring rows (columns) a block. Each shape goes through the
gate (correctness at every size, timing at the task's; no sanitizers: the shapes share
one source), torch timed in the same run.

    python bench/split_strided_cols.py --out $OUT/split-strided-cols.json

It is how columns.COLS_CHOICES/FULL_GRID were chosen; the search tunes COLS and BLOCK
from there.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.transfer_suite import ADMISSION_DIR, time_vendor  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from search.engine import forms  # noqa: E402
from search.engine.forms.skeletons import by_name  # noqa: E402

SHAPES = ((1024, 32), (1024, 16), (1024, 8), (1024, 4), (1024, 2), (512, 8), (512, 4), (256, 32))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="column_stats")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    tasks.add_directory(ADMISSION_DIR)
    from bench.suite import gpu_facts

    task = tasks.get(args.task)
    emitted = by_name("rows.split_strided").emit(forms.lift(task.naive_source, task.naive_plan),
                                                 task.naive_plan, task)
    options = GateOptions(profile=False, seed=1, input_cache=tempfile.mkdtemp(), sanitize=())
    result = {"what": f"rows.split_strided on {args.task} by block shape (gate, no sanitizers)",
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "environment": gpu_facts(), "sizes": task.sizes, "default": emitted.plan["tunables"],
              "shapes": []}
    naive = evaluate(args.task, Candidate.from_source_and_plan(task.naive_source, task.naive_plan), options)
    result["naive_ms"] = naive.timing.median_ms if naive.timing else None
    for block, cols in SHAPES:
        plan = {**emitted.plan, "tunables": {**emitted.plan["tunables"], "BLOCK": block, "COLS": cols}}
        verdict = evaluate(args.task, Candidate.from_dict({**plan, "source": emitted.source}), options)
        result["shapes"].append({"BLOCK": block, "COLS": cols, "status": verdict.status,
                                 "guard": verdict.guard,
                                 "median_ms": verdict.timing.median_ms if verdict.timing else None})
        write_json_atomically(args.out, result)
    result["vendor_ms"] = statistics.median(time_vendor(args.task, task.sizes))
    write_json_atomically(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
