"""What the gate has seen: tasks, candidates, and one Evaluation per (candidate, task,
harness version, GPU, gate settings, evaluator).

The rows are the truth; Celery messages may be lost or repeated. Writes go through
profiling.services, reads through profiling.selectors.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from profiling.harness.candidate import Candidate as HarnessCandidate


class Candidate(models.Model):
    """A CUDA source and its launch plan, identified by the harness's content hash."""

    content_hash = models.CharField(max_length=64, unique=True)
    source = models.TextField()
    plan = models.JSONField()
    label = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        short = self.content_hash[:12]
        return f"{self.label} ({short})" if self.label else short

    def to_harness(self) -> HarnessCandidate:
        return HarnessCandidate.from_source_and_plan(self.source, self.plan)


class Task(models.Model):
    """A copy of a harness task's description, so that rows can point at it and the web
    can show it; the harness registry stays the source (services.tasks_sync)."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    sizes = models.JSONField(default=dict)
    vendor_ms = models.FloatField(null=True, blank=True)
    vendor_what = models.CharField(max_length=200, blank=True)
    flops = models.FloatField(default=0.0)
    bytes = models.FloatField(default=0.0)
    # The task's own first attempt, the baseline that speedups are measured against.
    naive_candidate = models.ForeignKey(
        Candidate, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class DeclaredTask(models.Model):
    """A task a person defined in the browser: the definition the harness validated (with
    its generated small sizes), as written to `<name>.json` in settings.OPTIML_TASK_DIR.
    The row is the truth; the file is how the harness knows the task, and a host that
    lacks it writes it from here. Never changed once made: measurements are stored under
    the task's name."""

    name = models.CharField(max_length=100, unique=True)
    definition = models.JSONField()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                              related_name="declared_tasks")
    # Members of the team may see it and start runs on it, as with a run.
    team = models.ForeignKey("accounts.Team", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="declared_tasks")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Evaluation(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        PASSED = "passed"
        REJECTED = "rejected"
        # Compiled and checked, but not run: the worker had no GPU.
        INCOMPLETE = "incomplete"
        # The evaluator broke (no recording, harness crash), not a judgement of the kernel.
        FAILED = "failed"

    class Source(models.TextChoices):
        GATE = "gate"
        RECORDED = "recorded"

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="evaluations")
    # PROTECT: deleting a task must not silently delete what was measured against it.
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="evaluations")
    harness_version = models.CharField(max_length=40)
    gpu = models.CharField(max_length=120)
    # How it was measured (GateOptions.identity(): seeds, timed runs, profile, ...) and its
    # key (profiling.serialization.settings_key): part of what a verdict is stored and
    # looked up under, so a verdict measured with weaker settings (one seed, no profile)
    # never stands in for the standard gate's. "legacy" for rows measured before verdicts
    # said so: it matches no settings.
    settings_key = models.CharField(max_length=64)
    settings = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices)
    guard = models.CharField(max_length=40, null=True, blank=True)
    message = models.TextField(blank=True)
    # Where it ended: "compile", "done", or a correctness run with its sizes and seed.
    stage = models.TextField(blank=True)
    # Verdict.to_dict(), `seeds` included: operator-only (it reproduces the verdict), so
    # whatever users see of it goes through profiling.serialization.verdict_for_users.
    verdict = models.JSONField(null=True, blank=True)
    median_ms = models.FloatField(null=True, blank=True)
    spread_ms = models.FloatField(null=True, blank=True)
    # Which evaluator was asked (evaluators.Evaluator.identity(): "gate", or "recorded:<the
    # recording's hash>"): part of the key, so one evaluator's answer (its own failure above
    # all: "no recorded verdict") never stands for another's (issue 35). "legacy" for rows
    # from before evaluators had identities: it matches no evaluator.
    evaluator = models.CharField(max_length=80)
    # Blank while running: where the verdict came from is known only when it has ("gate"
    # under a recording too, for a kernel its CPU stage rejected here).
    source = models.CharField(max_length=10, choices=Source.choices, blank=True)
    # A failure that may pass on a later try (a crashed worker, a missing tool) as opposed
    # to one that will not (no recording of this candidate); only the first is reclaimed.
    retryable = models.BooleanField(default=False)
    claimed_at = models.DateTimeField()
    # While running: when the claim's lease runs out unless its worker renews it
    # (profiling/leases.py); past it, the worker is taken to be dead and the row reclaimed.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["candidate", "task", "harness_version", "gpu", "settings_key", "evaluator"],
                name="evaluation_once_per_kernel_harness_gpu_settings_evaluator",
            )
        ]
        indexes = [models.Index(fields=["task", "gpu", "status"])]

    def __str__(self) -> str:
        key = f"{self.settings_key[:8]}, {self.evaluator}"
        return f"{self.task.name} {self.candidate} on {self.gpu} [{key}]: {self.status}"

    @property
    def finished(self) -> bool:
        return self.status != self.Status.RUNNING


class GpuWorker(models.Model):
    """A Celery worker on a host with a GPU that takes the `gpu` queue, known by its
    heartbeat (profiling.workers): workers do not register otherwise. A run measured by
    the gate waits, queued for a GPU worker, while none is live (search.gpu_queue)."""

    hostname = models.CharField(max_length=200, unique=True)  # Celery's, e.g. "optiml@gpu-3"
    gpu = models.CharField(max_length=200)  # the GPU's name, as the gate reads it (nvidia-smi)
    started = models.DateTimeField()  # when this worker process said it was there first
    last_beat = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"GPU worker {self.hostname} ({self.gpu})"
