"""What a task's data-dependent error bound costs the gate's host, per full-size seed.

    python bench/allowance_cost.py --out bench/results/$(date +%F)-<host>-allowance-cost.json \\
        [--tasks sgemm,conv2d,self_attention] [--seeds 1]

For each task with an allowance (spec.Task.allowance), at the suite's sizes, on this
host's CPU (no GPU is used: the reference and the comparison run on the host):
- `inputs_s`: generating one seed's inputs;
- `reference_s`: its reference outputs;
- `allowance_s`: the allowance, worked out from the inputs and the reference;
- `compare_fresh_s`: comparing a correct output with nothing cached, which works the
  allowance out again (every candidate, before the allowance was kept);
- `compare_cached_s`: the same comparison reading the allowance kept in the input cache
  (every candidate after the first, since it is kept: inputs.Expected.allowed).

A full gate makes this comparison for each of its correctness seeds and each verified
timed run, so `compare_fresh_s - compare_cached_s` is what keeping it saves per check.
The JSON says which host it ran on: these are CPU seconds of that host, not the H200's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiling.harness import tasks  # noqa: E402
from profiling.harness.inputs import Expected, inputs_and_reference, make_inputs, reference_outputs  # noqa: E402


def measure(name: str, seed: int) -> dict:
    task = tasks.get(name)
    sizes = dict(task.sizes)
    distribution = task.distributions[0]
    began = time.perf_counter()
    inputs = make_inputs(task, sizes, seed, distribution)
    made = time.perf_counter()
    reference = reference_outputs(task, inputs, sizes)
    referenced = time.perf_counter()
    allowed = task.allowance(inputs, reference, sizes)
    allowed_s = time.perf_counter() - referenced
    correct = {k: v.copy() for k, v in reference.items()}
    compare = task.comparison()
    began_fresh = time.perf_counter()
    fresh = compare(correct, Expected(reference), inputs, sizes)
    fresh_s = time.perf_counter() - began_fresh
    with tempfile.TemporaryDirectory() as cache:
        inputs_and_reference(task, sizes, seed, distribution, cache)  # the first candidate builds it
        cached_inputs, expected = inputs_and_reference(task, sizes, seed, distribution, cache)
        began_cached = time.perf_counter()
        cached = compare(correct, expected, cached_inputs, sizes)
        cached_s = time.perf_counter() - began_cached
    assert fresh is None and cached is None and expected.allowed is not None and allowed
    return {"task": name, "sizes": sizes, "seed": seed, "inputs_s": round(made - began, 3),
            "reference_s": round(referenced - made, 3), "allowance_s": round(allowed_s, 3),
            "compare_fresh_s": round(fresh_s, 3), "compare_cached_s": round(cached_s, 3)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--tasks", default="sgemm,conv2d,self_attention")
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    rows = [measure(name, seed) for name in args.tasks.split(",") for seed in range(1, args.seeds + 1)]
    result = {
        "what": "a task's allowance per full-size seed on the host's CPU: worked out fresh by every "
                "comparison (before), or read from the input cache (after); bench/allowance_cost.py",
        "command": " ".join(["python", *sys.argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine(),
                 "processor": platform.processor() or None, "gpu": None},
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
