"""The vendor of PyTorch tasks on this GPU: each module eager and under torch.compile.

    python -m bench.torchtask_vendor FILE.py [FILE.py ...] [--mode eager|compile|both]
                                     [--runs 30] [--warmup 3] [--json OUT]

What profiling/harness/torchtask/vendor.py describes, timed as bench/vendor.py times the
suite's vendors and the gate its candidates: TF32 off, 256 MB written before each run to
flush the L2, fresh inputs every run (get_inputs() on the GPU, outside the timed
interval), CUDA events around the call alone, the median of `runs` after `warmup` runs
(compile: the first warm-up compiles). The module is the user's own code, run in this
process as written: its dtypes, its own parameters (torch.manual_seed(42) before the
model is built, as KernelBench's eval does), its own sizes. GPU host only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from bench.vendor import L2_FLUSH_BYTES

INIT_SEED = 42  # profiling/harness/torchtask/runner.py: KernelBench's eval seed


def load(path: Path) -> dict:
    namespace = {"__name__": "kernelbench_problem"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102  (the user's module)
    return namespace


def time_module(namespace: dict, mode: str, runs: int = 30, warmup: int = 3) -> list[float]:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(INIT_SEED)
    with torch.device("cuda"):
        model = namespace["Model"](*namespace["get_init_inputs"]())
    model = model.cuda()
    call = torch.compile(model) if mode == "compile" else model
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    samples = []
    with torch.no_grad():
        for i in range(warmup + runs):
            with torch.device("cuda"):
                inputs = [v.cuda() if isinstance(v, torch.Tensor) else v for v in namespace["get_inputs"]()]
            flush.fill_(float(i))
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call(*inputs)
            stop.record()
            stop.synchronize()
            if i >= warmup:
                samples.append(start.elapsed_time(stop))
            del inputs
    del model, call, flush
    torch.cuda.empty_cache()
    return samples


def summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(samples), "min_ms": ordered[0], "max_ms": ordered[-1],
            "p10_ms": ordered[len(ordered) // 10], "p90_ms": ordered[(9 * len(ordered)) // 10],
            "runs": len(samples)}


def _driver() -> str:
    found = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, check=False)
    return found.stdout.strip().splitlines()[0] if found.returncode == 0 and found.stdout.strip() else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.torchtask_vendor")
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--mode", choices=("eager", "compile", "both"), default="both")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    modes = ("eager", "compile") if args.mode == "both" else (args.mode,)
    record = {"command": " ".join(sys.argv), "gpu": torch.cuda.get_device_name(), "driver": _driver(),
              "torch": torch.__version__, "python": platform.python_version(),
              "date": datetime.date.today().isoformat(), "problems": {}}
    for path in args.paths:
        times = {}
        for mode in modes:
            try:
                times[mode] = summary(time_module(load(path), mode, args.runs, args.warmup))
            except Exception as error:  # noqa: BLE001  (one problem's failure is its row)
                times[mode] = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
            shown = times[mode].get("median_ms")
            said = f"{shown:.4f} ms" if shown is not None else times[mode]["error"]
            print(f"{path.stem} {mode}: {said}", flush=True)
        record["problems"][path.stem] = times
    if args.json:
        args.json.write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
