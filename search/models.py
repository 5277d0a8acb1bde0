"""Optimisation runs: the search's state, its nodes as rows, and an append-only event log.

The database is the truth. A run's search state is in two parts: `Run.state` holds the
engine's state without the tree's nodes (Search.header(): the RNG, the counters, the
config), and each `RunNode` holds its node's whole engine state in `engine`, beside the
flat columns the browser draws ({id, parentId}, time, status). A step rewrites only the
nodes it changed (search.state), so its cost does not grow with the tree, and the run
resumes from the rows alone after a restart. `RunEvent` is the log a live view replays
from its last sequence number. Writes go through search.services, reads through selectors.
"""

from __future__ import annotations

import hashlib
import uuid

from django.conf import settings
from django.db import models


class Run(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"
        STOPPED = "stopped"  # by a person, before the budget was spent
        FINISHED = "finished"  # the budget was spent
        FAILED = "failed"

    task = models.ForeignKey("profiling.Task", on_delete=models.PROTECT, related_name="runs")
    root_candidate = models.ForeignKey("profiling.Candidate", on_delete=models.PROTECT, related_name="+")
    judge = models.CharField(max_length=100)  # "rules" or "llm:<model>"
    sources = models.JSONField(default=list)  # proposal source names, as configured
    budget = models.PositiveIntegerField()  # evaluations
    seed = models.BigIntegerField()
    gate_options = models.JSONField(default=dict)
    # Screen candidates before the full gate (search.services, docs/gate.md "The screen"), when
    # settings.OPTIML_SCREEN allows it too.
    screen = models.BooleanField(default=True)
    # Who measures the run's kernels: "" the server's evaluator (OPTIML_EVALUATOR), or
    # "demo:<gpu>/<task>.json", a recording shipped with the app (search.demo_runs).
    evaluator = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    message = models.TextField(blank=True)
    # A running run whose evaluations need a GPU worker while none is live waits, queued,
    # since then (search.gpu_queue): its driver hands nothing out. None when it does not wait.
    queued_since = models.DateTimeField(null=True, blank=True)
    state = models.JSONField()  # search.engine Search.header(): the nodes are in RunNode.engine
    # A new random value at each save of the state (search.state): a worker that holds the
    # search in memory uses it only while the row still carries the token it saved.
    state_token = models.CharField(max_length=32, blank=True)
    # How many of the run's candidates may be evaluated at once (each is its own message on
    # the `gpu` queue, search.tasks.evaluate_node): up to one per GPU worker.
    parallel = models.PositiveSmallIntegerField(default=1)
    evaluated = models.PositiveIntegerField(default=0)
    root_ms = models.FloatField(null=True, blank=True)
    best_ms = models.FloatField(null=True, blank=True)
    best_node = models.IntegerField(null=True, blank=True)
    best_found_at = models.PositiveIntegerField(null=True, blank=True)  # evaluation index
    gpu_seconds = models.FloatField(default=0.0)  # summed evaluation wall time on the GPU host
    next_seq = models.PositiveBigIntegerField(default=1)
    # The token the run's next Celery step message must carry (search.services.run_advance).
    # Each step that is handed on, and each pause, resume or stop, moves it on, so a
    # duplicate, a redelivery or a message queued before a pause finds it changed and
    # does nothing: a run has at most one driver chain.
    drive_token = models.PositiveBigIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="runs")
    # Visible to its creator and, when set, to every member of this team.
    team = models.ForeignKey("accounts.Team", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="runs")
    intent = models.TextField(blank=True)  # what the user asked for, in words
    # The writing job whose kernel the run started from (POST /api/runs/ `writing_job`):
    # its attempts are the run's first nodes, even when its creator edited the kernel.
    writing_job = models.ForeignKey("WritingJob", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="runs")
    imported = models.BooleanField(default=False)  # rebuilt from an exported trajectory: read-only
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"run {self.pk} on {self.task.name} ({self.status})"

    @property
    def speedup(self) -> float | None:
        if self.root_ms and self.best_ms:
            return self.root_ms / self.best_ms
        return None


class ShareLink(models.Model):
    """A read-only link to a run. Only the token's SHA-256 is stored: the raw token is shown
    once, when the link is made, and a leaked database does not open any run."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="shares")
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "-created"]

    @staticmethod
    def digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def __str__(self) -> str:
        state = "revoked" if self.revoked_at else "open"
        return f"share {self.pk} of run {self.run_id} ({state})"


class RunNode(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="nodes")
    node_id = models.IntegerField()
    parent_id = models.IntegerField(null=True, blank=True)
    candidate = models.ForeignKey("profiling.Candidate", on_delete=models.PROTECT, related_name="+")
    evaluation = models.ForeignKey("profiling.Evaluation", null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=10)  # pending | done
    source = models.CharField(max_length=120)  # who proposed it: root, tunable, rewrite:x, llm:m
    title = models.CharField(max_length=300)
    rationale = models.TextField(blank=True)
    diff = models.TextField(blank=True)
    status = models.CharField(max_length=12, blank=True)  # the measurement's: passed, rejected...
    guard = models.CharField(max_length=40, blank=True)
    # Who measured it: "full" (the gate; its verdict is an Evaluation row) or "screen"
    # (only the screen: its verdict is in `detail`, never an Evaluation). Blank while pending.
    level = models.CharField(max_length=6, blank=True)
    time_ms = models.FloatField(null=True, blank=True)
    spread_ms = models.FloatField(null=True, blank=True)
    reward = models.FloatField(null=True, blank=True)
    visits = models.PositiveIntegerField(default=0)
    value = models.FloatField(default=0.0)
    value_sum = models.FloatField(default=0.0)  # the engine's; value = value_sum / visits
    prior = models.FloatField(default=0.0)
    detail = models.JSONField(default=dict)  # measurement, diagnosis, deltas, reward terms
    engine = models.JSONField(default=dict)  # the engine's Node.to_dict(): the run's state
    # While pending: when its evaluation was last handed to a GPU worker (None: not yet),
    # and what that evaluation measured (a Measurement's to_dict()) until the search is
    # told it (search.services): a repeated evaluation message finds it set and changes nothing.
    issued_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    # When a GPU worker took its last issued evaluation, and which worker (Celery's
    # hostname): None and "" while it waits in the queue (node_services.node_evaluate).
    started_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    # While a worker measures it: when that worker's lease runs out unless renewed
    # (profiling/leases.py; `started_at` is the lease's token). Past it the worker is taken
    # to be dead and the run hands the node out again (search.services._search_for).
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # What it compiled to, ahead of its evaluation (search.engine.binaries: the cubin and
    # every launch resolved): None until compiled, "" when it could not be told. A node
    # whose binary a smaller node runs is not evaluated: it is that node's duplicate.
    binary = models.CharField(max_length=64, null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "node_id"], name="run_node_once")]
        # A step reads a run's pending nodes (what arrived, what is in flight): its cost must
        # not grow with the done ones.
        indexes = [models.Index(fields=["run", "state"], name="run_node_state"),
                   models.Index(fields=["run", "binary"], name="run_node_binary")]
        ordering = ["run", "node_id"]


class RunEvent(models.Model):
    """Append-only. `seq` counts from 1 per run with no gaps: written under the run's row
    lock before anything is broadcast, so a client that missed some can ask for seq > n."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=40)
    data = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="run_event_seq_once")]
        ordering = ["run", "seq"]


class GenerationAttempt(models.Model):
    """One kernel an OptiML-G writer produced from an intent (or failed to), and what the
    gate said: the session's record of who wrote what, and the router's training data
    (`manage.py generation train-router`). One generation is several rows (its rounds)."""

    generation = models.UUIDField(db_index=True)
    task = models.CharField(max_length=100)
    intent = models.TextField()
    round = models.PositiveSmallIntegerField()  # 0: the first kernel; 1..: repairs
    writer = models.CharField(max_length=200)  # whose kernel it is (an expert, or mot:a+b)
    experts = models.JSONField(default=list)  # everyone who contributed, the writer first
    stage = models.CharField(max_length=20)  # endpoint, reply, plan, policy, compile, compiled, L0, passed
    passed = models.BooleanField(default=False)
    guard = models.CharField(max_length=40, blank=True)
    message = models.TextField(blank=True)
    candidate_hash = models.CharField(max_length=64, blank=True)
    record = models.JSONField(default=dict)  # drafts, routing, prompts
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "round"]

    def __str__(self) -> str:
        return f"{self.task} round {self.round} by {self.writer}: {self.stage}"



class WritingJob(models.Model):
    """Writing a first kernel from an intent (POST /api/kernels/write/), as a job: the
    request stores it `queued` and a CPU worker (search.tasks.write_kernel) claims it
    (queued -> running) and runs the writers, which take minutes (every round is LLM calls
    and nvcc). Each attempt is a GenerationAttempt row of `generation`, stored as it is
    checked, and moves `updated` on; the job ends `done` with the kernel in `written`, or
    `failed` with the reason in `message`. A queued or running job that has not moved for
    OPTIML_WRITING_STALE_S is failed (search.writing_jobs.writing_jobs_expire). While it
    runs, its worker moves `updated` every OPTIML_WRITING_HEARTBEAT_S; a running job that
    missed several heartbeats lost its worker, and the beat queues it again for another
    (writing_jobs_resume), up to MAX_TRIES claims in all (`tries`)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    generation = models.UUIDField(default=uuid.uuid4, unique=True)  # its GenerationAttempt rows
    task = models.CharField(max_length=100)
    intent = models.TextField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    message = models.TextField(blank=True)  # why it failed, in words
    # done: source, plan, title, rationale, writer, experts, attempts (KernelWrittenSerializer)
    written = models.JSONField(null=True, blank=True)
    # How many times a worker claimed it: the claim's token, so that only the worker of the
    # latest claim beats, stores the outcome and ends it (one whose worker was given up for
    # dead and came back changes nothing).
    tries = models.PositiveSmallIntegerField(default=0)
    # Its creator alone sees it: the job holds an intent and a kernel not shared yet.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="writing_jobs")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)  # the job's heartbeat: each attempt moves it
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The beat looks for stale ones among those not ended.
        indexes = [models.Index(fields=["status", "updated"], name="writing_job_status_updated")]

    def __str__(self) -> str:
        return f"writing job {self.pk} for {self.task} ({self.status})"
