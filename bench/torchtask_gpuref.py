"""PyTorch tasks' references on the GPU against the host's, as gpuref.py cross-checks them.

    python -m bench.torchtask_gpuref FILE.py [FILE.py ...] [--json OUT]

Each module is built as a task (profiling/harness/torchtask), then at each L0 size and at
L1, on normal and heavy-tailed inputs: the reference and allowance the way gpuref's child
computes them (Task.reference and Task.allowance on torch tensors on the GPU, float64,
TF32 off) against the host's (numpy arrays: the module in the host's reference child, on
the CPU), judged by gpuref.disagreement, the check that decides whether a gate session
may use the GPU's references. GPU host only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from profiling.harness.gpuref import DEVICE_ENV, disagreement
from profiling.harness.inputs import Expected, allowance_of, make_inputs, reference_outputs
from profiling.harness.torchtask.build import build_tasks
from profiling.harness.torchtask.task import NotATask, to_task

DEVICE = os.environ.get(DEVICE_ENV) or "cuda"  # "cpu": a smoke test of this script without a GPU


def on_gpu(task, inputs: dict, sizes: dict) -> tuple[Expected, float]:
    started = time.monotonic()
    tensors = {name: torch.from_numpy(np.ascontiguousarray(v)).to(DEVICE) for name, v in inputs.items()}
    with torch.no_grad():
        reference = task.reference(tensors, sizes)
        allowed = task.allowance(tensors, reference, sizes)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    seconds = time.monotonic() - started

    def host(value):
        return value.cpu().numpy() if torch.is_tensor(value) else np.asarray(value, np.float64)

    return Expected({k: host(v) for k, v in reference.items()},
                    {k: np.broadcast_to(host(v), reference[k].shape) for k, v in allowed.items()}), seconds


def check(task, sizes: dict, distribution: str) -> dict:
    inputs = make_inputs(task, sizes, seed=5, distribution=distribution)
    started = time.monotonic()
    reference = reference_outputs(task, inputs, sizes)
    host = Expected(reference, allowance_of(task, inputs, reference, sizes))
    host_s = time.monotonic() - started
    gpu, gpu_s = on_gpu(task, inputs, sizes)
    wrong = disagreement(task, gpu, host)
    share = {t.name: float(np.max(np.abs(gpu.allowed[t.name] - host.allowed[t.name])
                                  / np.maximum(np.abs(host.allowed[t.name]), 1e-300)))
             for t in task.outputs}
    return {"sizes": sizes, "distribution": distribution, "agree": wrong is None, "why": wrong,
            "allowance_relative_difference": share, "host_s": round(host_s, 3), "gpu_s": round(gpu_s, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.torchtask_gpuref")
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False  # as gpuref's child sets them
    torch.backends.cudnn.allow_tf32 = False
    where = torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE
    record = {"gpu": where, "torch": torch.__version__, "problems": {}}
    for path, built in zip(args.paths, build_tasks(args.paths), strict=True):
        if isinstance(built, NotATask):
            print(built)
            record["problems"][path.stem] = {"refused": built.reason}
            continue
        task, rows = to_task(built), []
        for sizes in (*task.l0_sizes, task.sizes):
            for distribution in task.distributions:
                rows.append(check(task, dict(sizes), distribution))
                print(path.stem, json.dumps(rows[-1]), flush=True)
        record["problems"][path.stem] = rows
    if args.json:
        args.json.write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
