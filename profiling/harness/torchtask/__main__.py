"""python -m profiling.harness.torchtask import PATH... [--json OUT]: each KernelBench
module (a file, or every .py in a folder) read as a task, or the reason it is not one.

python -m profiling.harness.torchtask task FILE.py [--json] [--save DIR]: the module as
a gate task (its sizes, L0, tensors, tolerance rule, vendor calls, physics floor), or the
reason it is not one (exit status 1); --save writes it into a task directory.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..ceilings import H100, H200, physics_floor_ms
from .importer import import_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m profiling.harness.torchtask")
    sub = parser.add_subparsers(dest="command", required=True)
    read = sub.add_parser("import", help="read KernelBench modules as tasks")
    read.add_argument("paths", nargs="+", type=Path)
    read.add_argument("--json", type=Path, help="write every problem's reading here")
    one = sub.add_parser("task", help="one module as a gate task, or why it is not one")
    one.add_argument("path", type=Path)
    one.add_argument("--json", action="store_true", help="print the task as JSON")
    one.add_argument("--save", type=Path, help="write it into this task directory (OPTIML_TASK_PATH)")
    args = parser.parse_args(argv)
    if args.command == "task":
        return _task(args.path, as_json=args.json, save=args.save)
    files = []
    for path in args.paths:
        if path.is_dir():
            files += sorted(path.glob("*.py"), key=lambda p: (len(p.stem.split("_")[0]), p.stem))
        elif path.is_file():
            files.append(path)
        else:
            print(f"error: {path}: no such file or folder", file=sys.stderr)
            return 2
    problems = import_files(files)
    for p in problems:
        if p.refused:
            print(f"{p.name}: not a task: {p.refused}")
            continue
        shapes = ", ".join(f"{t.name}[{', '.join(t.shape)}] {t.dtype}" for t in p.inputs)
        outs = ", ".join(f"{t.name}[{', '.join(t.shape)}] {t.dtype}" for t in p.outputs)
        notes = "".join(f"; {n}" for n in p.notes)
        print(f"{p.name}: {shapes} -> {outs}; L0 {len(p.l0_sizes)} sizes{notes}")
    tasks = sum(1 for p in problems if not p.refused)
    print(f"{tasks} of {len(problems)} read as tasks")
    if args.json:
        args.json.write_text(json.dumps([p.to_dict() for p in problems], indent=1))
    return 0


def _task(path: Path, *, as_json: bool, save: Path | None) -> int:
    from . import rule
    from .build import build_tasks
    from .task import NotATask, to_task
    from .task import save as save_task

    if not path.is_file():
        print(f"error: {path}: no such file", file=sys.stderr)
        return 2
    (result,) = build_tasks([path])
    if isinstance(result, NotATask):
        print(json.dumps({"name": result.name, "refused": result.reason}) if as_json else str(result))
        return 1
    task = to_task(result)
    moved, flops = task.bytes(task.sizes), task.flops(task.sizes)
    floors = {gpu.source: physics_floor_ms(moved, flops, task.math, gpu) for gpu in (H100, H200)}
    summary = {**{k: v for k, v in result.to_dict().items() if k != "source"},
               "tolerances": rule.describe(), "bytes_l1": moved, "flops_l1": flops,
               "footprint_bytes_l1": task.footprint_bytes(task.sizes),
               "floor_ms": {where: {"ms": ms, "why": why} for where, (ms, why) in floors.items()}}
    if save is not None:
        summary["saved"] = str(save_task(result, save))
    if as_json:
        print(json.dumps(summary, indent=1))
    else:
        print("\n".join(_lines(summary)))
    return 0


def _lines(s: dict) -> list[str]:
    def tensor(t: dict) -> str:
        extra = f" in [{t['bounds'][0]}, {t['bounds'][1]})" if t.get("bounds") else ""
        named = f" (parameter {t['parameter']})" if t.get("parameter") else ""
        return f"  {t['name']}[{', '.join(map(str, t['shape'])) or '1'}] {t['dtype']}{extra}{named}"

    lines = [f"{s['name']}: a task", f"sizes (L1): {s['sizes']}", "L0 sizes:"]
    lines += [f"  {sizes}" for sizes in s["l0_sizes"]]
    lines += ["inputs:"] + [tensor(t) for t in s["inputs"] + s["weights"]]
    lines += ["outputs:"] + [tensor(t) for t in s["outputs"]]
    lines += [f"reference: the module in {s['reference_dtype']}; "
              f"distributions: {', '.join(s['distributions'])}"]
    used = {t["dtype"] for t in s["outputs"]}
    lines += ["tolerance rule:"] + [f"  {dtype}: {words}" for dtype, words in s["tolerances"].items()
                                    if dtype in used]
    lines += [f"cross-check: {c}" for c in s["cross_check"]]
    lines += ["vendor (to time on a GPU host):"]
    lines += [f"  {c['mode']}: {c['call']}  [{c['command']}]" for c in s["vendor"]]
    lines += [f"physics floor at L1: {s['bytes_l1'] / 1e9:.4g} GB compulsory, "
              f"{s['flops_l1'] / 1e9:.4g} GFLOP (FlopCounterMode)"]
    lines += [f"  {where}: {f['ms']:.4g} ms ({f['why']})" for where, f in s["floor_ms"].items()]
    lines += [f"note: {n}" for n in s["notes"]]
    if s.get("saved"):
        lines.append(f"saved: {s['saved']}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
