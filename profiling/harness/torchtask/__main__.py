"""python -m profiling.harness.torchtask import PATH... [--json OUT]: each KernelBench
module (a file, or every .py in a folder) read as a task, or the reason it is not one."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .importer import import_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m profiling.harness.torchtask")
    sub = parser.add_subparsers(dest="command", required=True)
    read = sub.add_parser("import", help="read KernelBench modules as tasks")
    read.add_argument("paths", nargs="+", type=Path)
    read.add_argument("--json", type=Path, help="write every problem's reading here")
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
