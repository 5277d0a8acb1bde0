"""Command line for GPU hosts without Django: the same gate `manage.py evaluate` uses.

    python -m profiling.harness tasks
    python -m profiling.harness evaluate --task softmax kernel.cu [--plan plan.json] [--json out.json]
    python -m profiling.harness evaluate --task softmax --naive
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import tasks
from .candidate import Candidate, CandidateError
from .gate import GateOptions, evaluate
from .jsonfile import write_json_atomically
from .report import render, speedups
from .verdict import PASSED


class UsageError(Exception):
    pass


def load_candidate(task_name: str, kernel: str | None, plan: str | None, naive: bool) -> Candidate:
    task = tasks.get(task_name)
    if naive:
        return Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    if kernel is None:
        raise UsageError("give a kernel file, or --naive for the task's naive kernel")
    try:
        source = Path(kernel).read_text()
    except OSError as error:
        raise UsageError(f"cannot read {kernel}: {error.strerror}") from None
    if plan is None:
        plan_data = task.naive_plan
    else:
        try:
            plan_data = json.loads(Path(plan).read_text())
        except OSError as error:
            raise UsageError(f"cannot read {plan}: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise UsageError(f"{plan} is not valid JSON: line {error.lineno}: {error.msg}") from None
    return Candidate.from_source_and_plan(source, plan_data)


def options_from(args: argparse.Namespace) -> GateOptions:
    return GateOptions(seeds=args.seeds, timing_runs=args.runs, profile=not args.no_profile,
                       time_limit_s=args.time_limit, workdir=args.workdir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m profiling.harness")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("tasks", help="list the task suite")
    ev = sub.add_parser("evaluate", help="compile, verify, time and profile one kernel")
    ev.add_argument("kernel", nargs="?")
    ev.add_argument("--task", required=True)
    ev.add_argument("--plan")
    ev.add_argument("--naive", action="store_true", help="evaluate the task's naive kernel")
    ev.add_argument("--json", dest="json_out")
    ev.add_argument("--seeds", type=int, default=5)
    ev.add_argument("--runs", type=int, default=30)
    ev.add_argument("--no-profile", action="store_true")
    ev.add_argument("--time-limit", type=float, default=600.0)
    ev.add_argument("--workdir")
    args = parser.parse_args(argv)
    if args.command == "tasks":
        for task in tasks.all_tasks():
            print(f"{task.name:<16} {task.description}")
        return 0
    try:
        candidate = load_candidate(args.task, args.kernel, args.plan, args.naive)
        task = tasks.get(args.task)
    except (UsageError, CandidateError, tasks.UnknownTask) as error:
        print(f"error: {error.args[0] if error.args else error}", file=sys.stderr)
        return 2
    verdict = evaluate(args.task, candidate, options_from(args))
    print(render(verdict, task))
    if args.json_out:
        write_json_atomically(args.json_out, {**verdict.to_dict(), "speedups": speedups(verdict, task, None)})
    return 0 if verdict.status == PASSED else 1


if __name__ == "__main__":
    sys.exit(main())
