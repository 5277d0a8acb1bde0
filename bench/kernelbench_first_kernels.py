"""KernelBench's problems through import and the first kernel without an LLM, on the CPU:
each module read as a task (profiling/harness/torchtask), traced and lowered to a plain
kernel (search/generation), and that kernel run on the CPU emulator at the task's L0
sizes against the module's own reference under the task's rule. No GPU: it says which
problems have a first kernel and whether it computes the module at small sizes; the
gate on a GPU (L1 sizes, its guards) is still the judge of each.

    python bench/kernelbench_first_kernels.py ../shared/kernelbench/level1 --out FILE.json \
        [--first N] [--no-check]

`--no-check` lowers without running the emulator (its threads are std::threads: a
convolution at L0 sizes can take many minutes on a 2-core host); `--first N` starts at
problem N.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "search"))  # the CPU emulator (cuda_on_cpu.py)

from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from profiling.harness.torchtask.build import build_tasks  # noqa: E402
from profiling.harness.torchtask.task import NotATask, to_task  # noqa: E402
from search.generation.from_module import first_kernel  # noqa: E402
from search.generation.lowering import NoKernel  # noqa: E402


def check(described, work: Path, run: bool = True) -> dict:
    from cuda_on_cpu import CpuKernels, inputs_for, mismatch

    found = first_kernel(described, work)
    if isinstance(found, NoKernel):
        return {"first_kernel": None, "why": found.reason}
    row = {"first_kernel": found.family, "notes": list(found.notes), "l0": []}
    if not run:
        return {**row, "correct_at_l0": None}
    try:
        task = to_task(described)
        kernels = CpuKernels(Candidate.from_dict({**found.plan, "source": found.source}), work / "cpu")
        for sizes in task.l0_sizes:
            inputs = inputs_for(task, sizes)
            problem = mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs))
            row["l0"].append({"sizes": sizes, "matches": problem is None, "problem": problem})
    except Exception as error:  # noqa: BLE001  (one problem's failure is its row)
        row["error"] = f"{type(error).__name__}: {str(error)[:300]}"
    row["correct_at_l0"] = bool(row["l0"]) and all(r["matches"] for r in row["l0"]) and "error" not in row
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", required=True)
    parser.add_argument("--first", type=int, default=1, help="start at this problem's number")
    parser.add_argument("--no-check", action="store_true", help="lower only; no CPU emulator")
    args = parser.parse_args()
    files = sorted((p for p in args.folder.glob("*.py") if int(p.stem.split("_")[0]) >= args.first),
                   key=lambda p: int(p.stem.split("_")[0]))
    result = {"what": "KernelBench problems: import, the first kernel without an LLM, the CPU emulator at L0",
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "problems": {}}
    work = Path(tempfile.mkdtemp(prefix="optiml-kernelbench-"))
    for path, described in zip(files, build_tasks(files), strict=True):
        if isinstance(described, NotATask):
            result["problems"][path.stem] = {"task": False, "why": described.reason}
        else:
            result["problems"][path.stem] = {"task": True,
                                             **check(described, work / path.stem, not args.no_check)}
        shown = {k: v for k, v in result["problems"][path.stem].items() if k != "l0"}
        print(path.stem, json.dumps(shown)[:200], flush=True)
        write_json_atomically(args.out, result)
    rows = result["problems"].values()
    result["summary"] = {
        "problems": len(files), "tasks": sum(r["task"] for r in rows),
        "first_kernels": sum(bool(r.get("first_kernel")) for r in rows),
        "correct_at_l0": sum(bool(r.get("correct_at_l0")) for r in rows),
        "by_family": dict(Counter(r["first_kernel"] for r in rows if r.get("first_kernel")))}
    write_json_atomically(args.out, result)
    print(json.dumps(result["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
