"""`manage.py optimize`: one search, driven here, stored as a Run with its nodes and events.

    python manage.py optimize --task softmax [--from kernel.cu [--plan plan.json]] --budget 30
                              [--judge rules|llm] [--seed 0] [--json trajectory.json]
                              [--intent "what the kernel should do"]

On a GPU host the gate measures each candidate; elsewhere set OPTIML_EVALUATOR to a
recording. Thin: input checks, then search.services; the story at the end is the
engine's own "why it is faster".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from profiling.harness import tasks as task_registry
from profiling.harness.candidate import CandidateError
from profiling.harness.gate import GateOptions
from profiling.harness.jsonfile import write_json_atomically
from search import selectors, services
from search.engine.explain import render_why
from search.node_table import run_vendor_time


class Command(BaseCommand):
    help = "Search for a faster kernel with MCTS, and explain what made it faster."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--task", required=True)
        parser.add_argument("--from", dest="kernel", help="starting kernel (.cu); default: the naive one")
        parser.add_argument("--plan", help="launch plan JSON for --from; default: the task's naive plan")
        parser.add_argument("--budget", type=int, default=30, help="evaluations (default 30)")
        parser.add_argument("--judge", choices=["rules", "llm"], default="rules")
        parser.add_argument("--seed", type=int, default=0,
                            help="the search's own seed; the gate's is the run's secret one")
        parser.add_argument("--parallel", type=int, default=1, help="candidates asked per step")
        parser.add_argument("--json", dest="json_out", help="write the trajectory here")
        parser.add_argument("--no-profile", action="store_true")
        parser.add_argument("--intent", default="",
                            help="without --from: the configured LLM writes the starting kernel from "
                                 "it (the naive one when it cannot, which is said)")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            spec = task_registry.get(opts["task"])
        except task_registry.UnknownTask as error:
            raise CommandError(str(error)) from None
        source, plan = _starting_kernel(spec, opts["kernel"], opts["plan"])
        written = self._written(spec, opts) if opts["kernel"] is None else None
        if written is not None:
            source, plan = written.candidate.source, written.candidate.plan_dict()
        try:
            run = services.run_create(
                task_name=spec.name, source=source, plan=plan, budget=opts["budget"],
                judge=opts["judge"], seed=opts["seed"], intent=opts["intent"], written=written,
                gate_options=GateOptions(profile=not opts["no_profile"]), parallel=opts["parallel"])
        except (services.RunError, CandidateError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"Run {run.pk}: {spec.name}, budget {run.budget}, judge {run.judge}")
        run = services.run_drive(run_id=run.pk, parallel=opts["parallel"], on_event=self._progress)
        search = services._search_for(run)
        self.stdout.write("")
        self.stdout.write(render_why(search.tree))
        self.stdout.write(_summary_line(run))
        if opts["json_out"]:
            write_json_atomically(opts["json_out"], selectors.run_trajectory(run=run), indent=1)

    def _written(self, spec, opts):
        """The starting kernel written from --intent, or None (said) to start from the naive one."""
        if not opts["intent"].strip():
            return None
        try:
            written = services.kernel_write(task_name=spec.name, intent=opts["intent"])
        except services.RunError as error:
            self.stdout.write(f"{error}; starting from the task's naive kernel")
            return None
        self.stdout.write(f"starting kernel written by {written.source} from the intent: {written.title}")
        return written

    def _progress(self, event) -> None:
        if event.kind == "node_evaluated":
            d = event.data
            time = f"{d['time_ms']:.4f} ms" if d.get("time_ms") else d.get("status", "?")
            self.stdout.write(f"  #{d.get('evaluation')} node {d['id']} [{d['source']}] "
                              f"{d['title']}: {time} (reward {d.get('reward', 0):+.3f})")
        elif event.kind == "best_improved":
            self.stdout.write(f"  best so far: node {event.data.get('id')} "
                              f"{event.data.get('time_ms', 0):.4f} ms")


def _starting_kernel(spec, kernel: str | None, plan_path: str | None) -> tuple[str, dict]:
    if kernel is None:
        if plan_path:
            raise CommandError("--plan goes with --from")
        return spec.naive_source, spec.naive_plan
    try:
        source = Path(kernel).read_text()
    except OSError as error:
        raise CommandError(f"cannot read {kernel}: {error.strerror}") from None
    if not source.strip():
        raise CommandError(f"{kernel} is empty")
    if plan_path is None:
        return source, spec.naive_plan
    try:
        return source, json.loads(Path(plan_path).read_text())
    except OSError as error:
        raise CommandError(f"cannot read {plan_path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise CommandError(f"{plan_path} is not valid JSON: line {error.lineno}: {error.msg}") from None


def _summary_line(run) -> str:
    parts = [f"{run.evaluated} candidates evaluated", f"{run.gpu_seconds / 60:.2f} GPU-minutes"]
    if run.speedup:
        parts.append(f"best {run.best_ms:.4f} ms = {run.speedup:.2f}x the starting kernel, "
                     f"found at evaluation {run.best_found_at}")
    vendor = run_vendor_time(run=run) if run.best_ms else None  # on the best kernel's GPU only
    if vendor is not None:
        parts.append(f"{vendor.ms / run.best_ms:.2f}x the vendor reference ({vendor.source})")
    return "Summary: " + "; ".join(parts)


