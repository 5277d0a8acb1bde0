"""Reads for the gate's side of the database."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from accounts.selectors import user_team_ids
from profiling.harness import HARNESS_VERSION, comparisons, declared
from profiling.harness.gate import GateOptions
from profiling.harness.spec import Task as TaskSpec
from profiling.models import Candidate, DeclaredTask, Evaluation, Task
from profiling.serialization import settings_key as key_of_settings


def declared_tasks_visible_to(*, user) -> QuerySet[DeclaredTask]:
    """A declared task is visible to its owner and the members of its team, like a run."""
    if not user.is_authenticated:
        return DeclaredTask.objects.none()
    visible = Q(owner=user) | Q(team_id__in=user_team_ids(user=user))
    return DeclaredTask.objects.filter(visible).select_related("owner").order_by("-created", "-pk")


def task_specs_visible_to(*, user) -> list[TaskSpec]:
    """The harness's tasks a new session of `user` may use: the suite (and task modules),
    and the declared tasks they may see."""
    from profiling.harness import tasks as task_registry

    visible = set(declared_tasks_visible_to(user=user).values_list("name", flat=True))
    return [spec for spec in task_registry.all_tasks()
            if not declared.is_declared_name(spec.name) or spec.name in visible]


def declared_task_visible(*, user, name: str) -> DeclaredTask | None:
    """The task if `user` may see it; None when it does not exist or is not theirs."""
    return declared_tasks_visible_to(user=user).filter(name=name).first()


# Each vendor description names the GPU it was timed on the same way: "torch 2.11 relu,
# 2**28 fp32, on H200 (GPU.md)" (the VendorReference of every task in profiling/harness/tasks/).
_VENDOR_GPU = re.compile(r"\bon ([A-Z]{1,2}\d{2,4}\w*)\b")


def task_vendor_gpu(*, task: Task) -> str | None:
    """The GPU the task's vendor library was timed on ("H200"); None without a vendor
    time, or when its description does not say."""
    if task.vendor_ms is None:
        return None
    found = _VENDOR_GPU.search(task.vendor_what)
    return found.group(1) if found else None


@dataclass(frozen=True)
class VendorTime:
    """The vendor library's time a kernel measured on `gpu` is compared with, and where it
    came from ("measured on this GPU ... on <date>", "recorded on the NVIDIA H200 (...)")."""

    ms: float
    gpu: str
    source: str


def vendor_time_on(*, task: Task, gpu: str) -> VendorTime | None:
    """The vendor's time for a kernel measured on `gpu`: the latest one measured on that GPU
    (kept in its verdicts: comparisons.py); else the task's recorded one, only where it was
    recorded on a GPU of that name; else None: never another GPU's time (issue 33)."""
    if not gpu:
        return None
    here = Evaluation.objects.filter(task=task, gpu=gpu, verdict__comparison__source=comparisons.MEASURED)
    measured = (here.exclude(verdict__comparison__vendor_ms=None)
                .order_by("-finished_at", "-id").values_list("verdict__comparison", flat=True).first())
    if measured:
        shown = comparisons.Comparison.from_dict(measured)
        if shown.vendor_ms and comparisons.same_gpu(shown.gpu, gpu):
            return VendorTime(shown.vendor_ms, shown.gpu, shown.describe())
    recorded_on = task_vendor_gpu(task=task)
    if task.vendor_ms and recorded_on and comparisons.same_gpu(recorded_on, gpu):
        return VendorTime(task.vendor_ms, recorded_on, f"recorded on the {recorded_on}")
    return None


def standard_settings_key() -> str:
    """The settings key of the standard gate (GateOptions()): the verdicts every run and
    user may reuse, and the naive baseline's."""
    return key_of_settings(GateOptions().identity())


def settings_key_for(options: GateOptions) -> str:
    """The key a verdict measured with `options` is stored and looked up under."""
    return key_of_settings(options.identity())


def evaluation_for(
    *, candidate: Candidate, task: Task, gpu: str, settings_key: str, evaluator: str | None = None,
    harness_version: str = HARNESS_VERSION,
) -> Evaluation | None:
    """The one evaluation stored under this key, finished or running. `settings_key` says
    how it must have been measured (settings_key_for(options)): a verdict measured with
    other settings is another evaluation, never this one. `evaluator` (an Evaluator's
    identity()) says by whom; None for whichever evaluator's was claimed last (to show,
    never to serve in another's stead)."""
    found = Evaluation.objects.filter(candidate=candidate, task=task, gpu=gpu,
                                      harness_version=harness_version, settings_key=settings_key)
    if evaluator is not None:
        found = found.filter(evaluator=evaluator)
    return found.select_related("candidate", "task").order_by("-claimed_at", "-id").first()


def naive_evaluation_for(
    *, task: Task, gpu: str, evaluator: str | None = None, harness_version: str = HARNESS_VERSION
) -> Evaluation | None:
    """The stored evaluation of the task's own naive kernel on this GPU by the standard
    gate (services.evaluation_run_naive measures it so), if any; by `evaluator` if given."""
    if task.naive_candidate_id is None:
        return None
    return evaluation_for(candidate=task.naive_candidate, task=task, gpu=gpu, evaluator=evaluator,
                          settings_key=standard_settings_key(), harness_version=harness_version)


def naive_ms_for(*, task: Task, gpu: str, evaluator: str | None = None) -> float | None:
    """The naive kernel's median time on this GPU: the baseline of "N x faster"."""
    naive = naive_evaluation_for(task=task, gpu=gpu, evaluator=evaluator)
    if naive is None or naive.status != Evaluation.Status.PASSED:
        return None
    return naive.median_ms


def evaluation_list(
    *,
    task: Task | None = None,
    candidate: Candidate | None = None,
    gpu: str | None = None,
    status: str | None = None,
) -> QuerySet[Evaluation]:
    """Evaluations, newest claim first, narrowed by whichever arguments are given."""
    evaluations = Evaluation.objects.select_related("candidate", "task")
    if task is not None:
        evaluations = evaluations.filter(task=task)
    if candidate is not None:
        evaluations = evaluations.filter(candidate=candidate)
    if gpu is not None:
        evaluations = evaluations.filter(gpu=gpu)
    if status is not None:
        evaluations = evaluations.filter(status=status)
    return evaluations.order_by("-claimed_at", "-id")
