"""A PyTorch module's first kernel without an LLM (issue 32, part 2): the module read as
a task (profiling/harness/torchtask), its forward traced in a sandboxed child at its
first small size, the graph lowered to a plain kernel (lowering.py).

    python -m search.generation.from_module FILE.py [--out KERNEL.cu --plan PLAN.json]

prints the kernel and its plan, or why there is none (exit status 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from profiling.harness.torchtask import constants
from profiling.harness.torchtask.trace import read_graph

from .lowering import FirstKernel, NoKernel, lower


def first_kernel(described, workdir: Path) -> FirstKernel | NoKernel:
    """`described`: a torchtask.task.TorchTask. Traced where it is smallest (L0's first
    size: the shapes the graph reports are checked against it)."""
    sizes = described.l0_sizes[0] if described.l0_sizes else described.sizes
    graph = read_graph(constants.with_values(described.source, sizes), workdir)
    if not graph.get("ok"):
        return NoKernel(f"the module does not trace: {graph.get('error')}")
    return lower(graph["nodes"], described)


def main(argv: list[str] | None = None) -> int:
    from profiling.harness.torchtask.build import build_tasks
    from profiling.harness.torchtask.task import NotATask

    parser = argparse.ArgumentParser(prog="python -m search.generation.from_module")
    parser.add_argument("path", type=Path)
    parser.add_argument("--out", type=Path, help="write the kernel here")
    parser.add_argument("--plan", type=Path, help="write its launch plan here")
    args = parser.parse_args(argv)
    if not args.path.is_file():
        print(f"error: {args.path}: no such file", file=sys.stderr)
        return 2
    (described,) = build_tasks([args.path])
    if isinstance(described, NotATask):
        print(f"not a task: {described}")
        return 1
    found = first_kernel(described, Path(tempfile.mkdtemp(prefix="optiml-trace-")))
    if isinstance(found, NoKernel):
        print(f"no first kernel: {found.reason}")
        return 1
    if args.out:
        args.out.write_text(found.source)
    if args.plan:
        args.plan.write_text(json.dumps(found.plan, indent=1))
    print(found.source)
    print(json.dumps(found.plan, indent=1))
    print("\n".join(found.notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
