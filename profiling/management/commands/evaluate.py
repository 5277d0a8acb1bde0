"""manage.py evaluate --task softmax kernel.cu [--plan plan.json] [--json out.json] ...

Thin: every input is checked before anything is written, then the services do the work
and the harness's report says what happened. Exit status: 0 when the kernel passed (or
could not be run here, for want of a GPU), 1 for bad input or a failed evaluation, 2
when the gate rejected the kernel.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from profiling import selectors, services
from profiling.evaluators import NO_GPU, Evaluator, EvaluatorError, evaluator_identity, get_evaluator
from profiling.harness import report
from profiling.harness import tasks as task_registry
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import GateOptions
from profiling.harness.jsonfile import write_json_atomically
from profiling.harness.spec import Task as TaskSpec
from profiling.models import Evaluation
from profiling.serialization import json_safe, verdict_from_json

REJECTED_EXIT_STATUS = 2


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


class Command(BaseCommand):
    help = "Evaluate a CUDA kernel on a task through the gate and print the verdict."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("kernel", help="CUDA source file (.cu)")
        parser.add_argument("--task", required=True, help="task name (see sync_tasks)")
        parser.add_argument("--plan", help="launch plan JSON; default: the task's naive plan")
        parser.add_argument("--json", dest="json_path", help="also write the verdict here")
        parser.add_argument(
            "--seeds",
            type=positive_int,
            default=GateOptions.seeds,
            help="correctness runs with fresh random inputs",
        )
        parser.add_argument(
            "--runs",
            type=positive_int,
            default=GateOptions.timing_runs,
            help="timed runs; the median of them is the kernel's time",
        )
        parser.add_argument("--no-profile", action="store_true", help="skip Nsight Compute")
        parser.add_argument(
            "--no-naive", action="store_true", help="do not evaluate the task's naive kernel for a baseline"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        spec, source, plan, json_path = _checked_inputs(opts)
        options = GateOptions(seeds=opts["seeds"], timing_runs=opts["runs"], profile=not opts["no_profile"])
        try:
            evaluator = get_evaluator()
        except EvaluatorError as error:
            raise CommandError(f"evaluator: {error}") from None

        # Every input is good: from here on the database is written.
        naive_ms = None if opts["no_naive"] else self._naive_ms(spec, options, evaluator)
        candidate = services.candidate_get_or_create(source=source, plan=plan)
        evaluation = services.evaluation_run(
            task_name=spec.name, candidate=candidate, options=options, evaluator=evaluator
        )
        if evaluation.status == Evaluation.Status.RUNNING:
            raise CommandError(
                f"another worker has been evaluating this kernel since {evaluation.claimed_at:%H:%M:%S} UTC"
                "; run this again when it has finished"
            )
        if evaluation.verdict is None:
            raise CommandError(f"the evaluation failed: {evaluation.message}")
        verdict = verdict_from_json(evaluation.verdict)
        self.stdout.write(report.render(verdict, spec, naive_ms))
        if evaluation.source == Evaluation.Source.RECORDED:
            self.stdout.write("Source: recorded earlier on a real GPU and replayed; not measured now")
        if evaluation.settings_key != selectors.standard_settings_key():
            self.stdout.write("Settings: not the standard gate's; this verdict is stored under the "
                              "settings it was measured with and never stands in for the standard gate")
        if json_path is not None:
            payload = {**json_safe(verdict.to_dict()), "speedups": report.speedups(verdict, spec, naive_ms)}
            write_json_atomically(json_path, payload)
        if evaluation.status == Evaluation.Status.FAILED:
            raise CommandError(f"the evaluation failed: {evaluation.message}")
        if evaluation.status == Evaluation.Status.REJECTED:
            raise CommandError(f"rejected by the '{evaluation.guard}' guard", returncode=REJECTED_EXIT_STATUS)

    def _naive_ms(self, spec: TaskSpec, options: GateOptions, evaluator: Evaluator) -> float | None:
        """The naive kernel's time on this GPU by the standard gate, evaluating it first if
        it never was. Always the standard gate, whatever --seeds, --runs or --no-profile
        say: the baseline is stored for every later caller, and a run that starts from the
        naive kernel reuses it as its root, which needs the profile."""
        task = services.task_get_or_sync(name=spec.name)
        gpu, identity = evaluator.gpu(), evaluator_identity(evaluator)
        naive = selectors.naive_evaluation_for(task=task, gpu=gpu, evaluator=identity)
        if naive is None and gpu != NO_GPU:
            self.stderr.write(f"Evaluating the naive {spec.name} kernel first, as the baseline")
            naive = services.evaluation_run_naive(task_name=spec.name, options=options, evaluator=evaluator)
        if naive is not None and naive.status != Evaluation.Status.PASSED:
            self.stderr.write(
                f"No naive baseline: the naive kernel is {naive.status}"
                + (f" ({naive.message})" if naive.message else "")
            )
        return selectors.naive_ms_for(task=task, gpu=gpu, evaluator=identity)


def _checked_inputs(opts: dict[str, Any]) -> tuple[TaskSpec, str, dict, Path | None]:
    """The task, source, plan and --json path, each checked; CommandError on the first fault."""
    spec = _task_spec(opts["task"])
    source = _read_source(Path(opts["kernel"]))
    plan = _read_plan(Path(opts["plan"])) if opts["plan"] else spec.naive_plan
    _check_candidate(source, plan, opts["plan"] or f"the naive plan of {spec.name}")
    json_path = Path(opts["json_path"]) if opts["json_path"] else None
    if json_path is not None and not json_path.parent.is_dir():
        raise CommandError(f"--json: folder {json_path.parent} does not exist")
    return spec, source, plan, json_path


def _task_spec(name: str) -> TaskSpec:
    try:
        return task_registry.get(name)
    except task_registry.UnknownTask as error:
        raise CommandError(str(error)) from None


def _read_source(path: Path) -> str:
    try:
        source = path.read_text()
    except FileNotFoundError:
        raise CommandError(f"kernel file {path} does not exist") from None
    except UnicodeDecodeError:
        raise CommandError(f"kernel file {path} is not UTF-8 text") from None
    except OSError as error:
        raise CommandError(f"cannot read kernel file {path}: {error.strerror}") from None
    if not source.strip():
        raise CommandError(f"kernel file {path} is empty")
    return source


def _read_plan(path: Path) -> dict:
    try:
        plan = json.loads(path.read_text())
    except FileNotFoundError:
        raise CommandError(f"plan file {path} does not exist") from None
    except UnicodeDecodeError:
        raise CommandError(f"plan file {path} is not UTF-8 text") from None
    except OSError as error:
        raise CommandError(f"cannot read plan file {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise CommandError(
            f"plan file {path} is not valid JSON: line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    if not isinstance(plan, dict):
        raise CommandError(f"plan file {path} must hold a JSON object, not {type(plan).__name__}")
    return plan


def _check_candidate(source: str, plan: dict, where: str) -> None:
    try:
        Candidate.from_source_and_plan(source, plan)
    except CandidateError as error:
        raise CommandError(f"{where}: {error}") from None


