"""comparisons.Measurer on this host's GPU: the vendor call timed by torch in a process of
its own, the naive kernel by the gate itself.

Both the gate's way, with its own code: the vendor by bench/vendor.py's time_vendor (what
the recorded times were taken with: TF32 off, 256 MB written before each run to flush the
L2, fresh inputs every run, CUDA events around the call alone, the median of 30 runs after
3 warm-ups), the naive kernel by a full gate without profile or sanitizers (its timed runs'
median). The vendor's child has its own CUDA context, as the worker's references do
(gpuref.py), and runs after the candidate's worker has exited, so nothing shares the GPU
with either measurement.

    python -m profiling.harness.comparisons_gpu <task> '<sizes as JSON>'   (run by GpuMeasurer)
prints {"median_ms": ..., "what": ...} on its last line, or {"error": ...}.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from . import comparisons
from .candidate import Candidate
from .spec import Task

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the repository: profiling/ and bench/
# The vendor child: torch's import and a CUDA context take seconds, the slowest suite
# call (topk, ~0.2 s a run on the H200) 33 runs; a minute is generous.
VENDOR_TIME_LIMIT_S = 120.0


class GpuMeasurer:
    """Times the comparisons on this host's GPU (comparisons.Measurer)."""

    def __init__(self, *, workdir: Path, time_limit_s: float = 600.0) -> None:
        self.workdir, self.time_limit_s = Path(workdir), time_limit_s

    def vendor(self, task: Task, sizes: dict[str, int]) -> tuple[float, str] | None:
        from .gate import child_env  # the worker's allow-listed environment: no credentials

        try:
            done = subprocess.run([sys.executable, "-m", "profiling.harness.comparisons_gpu", task.name,
                                   json.dumps(sizes)], capture_output=True, text=True, env=child_env(),
                                  timeout=VENDOR_TIME_LIMIT_S, cwd=PACKAGE_ROOT)
        except subprocess.TimeoutExpired:
            return None
        answer = _last_json(done.stdout)
        if done.returncode != 0 or "median_ms" not in answer:
            return None
        return float(answer["median_ms"]), str(answer["what"])

    def naive(self, task: Task, sizes: dict[str, int]) -> float | None:
        from .gate import GateOptions, evaluate_task

        naive = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
        options = GateOptions(profile=False, sanitize=(), measure_comparisons=False,
                              l1_sizes=None if sizes == task.sizes else dict(sizes),
                              time_limit_s=self.time_limit_s, workdir=str(self.workdir / "naive"))
        verdict = evaluate_task(task, naive, options)
        return verdict.timing.median_ms if verdict.passed and verdict.timing is not None else None


def measured_after(task: Task, comparison: dict, *, measurer: comparisons.Measurer,
                   cache: comparisons.ComparisonCache | None = None) -> dict:
    """A verdict's comparison (Verdict.comparison) measured now by `measurer` if its worker
    found none in the cache for its key; else as it was. The gate calls it after the worker
    exited, with a GpuMeasurer."""
    fields = comparison.get("key_fields")
    if not fields or comparison.get("source") != comparisons.NOT_MEASURED:
        return comparison
    key = comparisons.ComparisonKey.from_dict(fields)
    try:
        made = comparisons.comparison_for(task, key, cache=cache or comparisons.ComparisonCache.default(),
                                          measurer=measurer)
    except Exception as error:  # the kernel's verdict stands; the comparison says why it has none
        why = f"measuring on this GPU failed: {type(error).__name__}: {error}"
        return {**comparison, "notes": [*comparison.get("notes", []), why]}
    return {**made.to_dict(), "key_fields": fields}


def _last_json(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        return found if isinstance(found, dict) else {}
    return {}


def main(argv: list[str]) -> int:
    name, sizes = argv[1], json.loads(argv[2])
    try:
        import torch

        from bench.vendor import OPS, time_vendor
    except ImportError as error:
        print(json.dumps({"error": f"no torch here: {error}"}))
        return 1
    if name not in OPS:
        print(json.dumps({"error": f"no vendor call for {name} (bench/vendor.py)"}))
        return 1
    median = statistics.median(time_vendor(name, sizes))
    sizes_words = ", ".join(f"{k}={v}" for k, v in sizes.items())
    print(json.dumps({"median_ms": median, "what": f"torch {torch.__version__} {name} at {sizes_words} "
                                                   "(bench/vendor.py's call)"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
