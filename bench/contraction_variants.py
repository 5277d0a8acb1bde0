"""The contraction tile's compile-time switches (search/engine/forms/tiles.py SWITCHES),
timed on a GPU host: for each task, the naive kernel, the tile as emitted (its default
switches) and the tile with each variant's -D options, all through the full gate
(profile off), the vendor (torch, TF32 off) timed in the same run.

    python bench/contraction_variants.py --out $OUT/contraction-variants.json \
        [--tasks conv2d,sgemm,conv1x1,addmm_gelu]

It decides the defaults of the switches with numbers, not with a guess; the search does
not tune them.
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

VARIANTS = {
    "prefetch off, 2 blocks an SM": ["-DOPTIML_PREFETCH=0", "-DOPTIML_MIN_BLOCKS=2"],
    "prefetch on, 2 blocks an SM": ["-DOPTIML_PREFETCH=1", "-DOPTIML_MIN_BLOCKS=2"],
    "step 2048, prefetch off, 2 blocks an SM":
        ["-DOPTIML_STEP=2048", "-DOPTIML_PREFETCH=0", "-DOPTIML_MIN_BLOCKS=2"],
    "two stages, 2 blocks an SM": ["-DOPTIML_STAGES=2", "-DOPTIML_MIN_BLOCKS=2"],
    "two stages, 1 block an SM": ["-DOPTIML_STAGES=2", "-DOPTIML_MIN_BLOCKS=1"],
}


def run_task(name: str, cache: Path) -> dict:
    task = tasks.get(name)
    naive = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    row = {"task": name, "naive": gate(name, naive, cache), "variants": {}}
    form = forms.lift(task.naive_source, task.naive_plan)
    emitted = skeletons.by_name("contraction.smem_register_tile").emit(form, task.naive_plan, task) \
        if isinstance(form, forms.Form) else getattr(form, "reason", "no form")
    if isinstance(emitted, str):
        row["not_applied"] = emitted
        return row
    row["tile"] = emitted.rationale
    for label, options in VARIANTS.items():
        candidate = Candidate.from_dict({**emitted.plan, "source": emitted.source,
                                         "compile_options": options})
        row["variants"][label] = gate(name, candidate, cache)
    row["vendor_ms"] = statistics.median(time_vendor(name, task.sizes))
    for verdict in row["variants"].values():
        if verdict.get("median_ms"):
            verdict["vs_vendor"] = row["vendor_ms"] / verdict["median_ms"]
            verdict["vs_naive"] = (row["naive"]["median_ms"] or 0) / verdict["median_ms"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="conv2d,sgemm,conv1x1,addmm_gelu")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    tasks.add_directory(TASK_DIR)
    tasks.add_directory(ADMISSION_DIR)
    from bench.suite import gpu_facts

    result = {"what": "the contraction tile's compile-time switches, full gate, profile off",
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "environment": gpu_facts() if shutil.which("nvidia-smi") else {"gpu": None},
              "variants": VARIANTS, "tasks": {}}
    cache = Path(tempfile.mkdtemp(prefix="optiml-contraction-variants-"))
    each_task(args.tasks.split(","), lambda name: run_task(name, cache), result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
