"""Lineages as rows: a walk of an expert, its states, forward transitions and rejected
attempts. The engine's plain-data lineage (lineage/engine/walker.py) is the source; a row
keeps it whole (`data`) so a lineage can be exported or replayed as it was recorded."""

from django.conf import settings
from django.db import models


class Lineage(models.Model):
    class Origin(models.TextChoices):
        WALK = "walk", "walked here"
        IMPORT = "import", "imported"

    task = models.ForeignKey("profiling.Task", on_delete=models.PROTECT, related_name="lineages")
    expert = models.CharField(max_length=300)  # the expert's folder, as the walk saw it
    gpu = models.CharField(max_length=100, blank=True)
    origin = models.CharField(max_length=10, choices=Origin.choices)
    replayed = models.BooleanField(default=False)  # its measurements were served from recordings
    complete = models.BooleanField(default=False)  # reached the plain attempt
    stopped = models.CharField(max_length=300, blank=True)  # why the walk ended, in a sentence
    seconds = models.FloatField(default=0.0)
    data = models.JSONField()  # walker.Lineage.to_dict()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"lineage {self.pk} of {self.task.name} ({self.gpu or 'no GPU'})"


class LineageState(models.Model):
    lineage = models.ForeignKey(Lineage, on_delete=models.CASCADE, related_name="states")
    key = models.CharField(max_length=1000, blank=True)  # flags on, sorted, comma-joined
    flags = models.JSONField(default=list)
    candidate_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=20)
    guard = models.CharField(max_length=40, blank=True)
    time_ms = models.FloatField(null=True, blank=True)
    measurement = models.JSONField(default=dict)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["lineage", "key"], name="one_state_per_key")]


class Transition(models.Model):
    """A forward step: the state `before` plus one flag gives `after`."""

    lineage = models.ForeignKey(Lineage, on_delete=models.CASCADE, related_name="transitions")
    intent = models.CharField(max_length=60)
    flag = models.CharField(max_length=64)
    before = models.CharField(max_length=1000, blank=True)
    after = models.CharField(max_length=1000)
    before_ms = models.FloatField(null=True, blank=True)
    after_ms = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    metric_deltas = models.JSONField(default=dict)
    source_diff = models.TextField(blank=True)
    plan_diff = models.TextField(blank=True)  # the launch plan's, at the suite's sizes
    diagnosis_before = models.JSONField(default=dict)
    # Who made the step: "flags" (the expert's OPT_ flag) or "llm:<model>" (the de-optimizer).
    proposer = models.CharField(max_length=200, default="flags")


class RejectedAttempt(models.Model):
    """Turning `flag` off from `start` gave `state`, which the gate refused: evidence."""

    lineage = models.ForeignKey(Lineage, on_delete=models.CASCADE, related_name="rejected")
    flag = models.CharField(max_length=64)
    start = models.CharField(max_length=1000)
    state = models.CharField(max_length=1000, blank=True)
    guard = models.CharField(max_length=40, blank=True)
    message = models.TextField(blank=True)
    precondition = models.TextField(blank=True)
    proposer = models.CharField(max_length=200, default="flags")


class WalkRequest(models.Model):
    """A walk asked for here and run by a GPU worker (`manage.py lineage walk --queue`).

    The worker claims it (queued -> running), walks, and stores the lineage and `done` in
    one transaction, so a request ends with its whole lineage or with none and the reason
    in `error`. A message delivered again finds it done and does nothing; one whose worker
    died is taken over once its claim is older than the walk's time limit."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    task = models.ForeignKey("profiling.Task", on_delete=models.PROTECT, related_name="walk_requests")
    max_states = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    lineage = models.OneToOneField(Lineage, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="request")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"walk request {self.pk} of {self.task.name} ({self.status})"


class SkillCard(models.Model):
    """A skill card induced from the stored lineages (lineage/engine/cards.py), kept whole
    in `data`. Inducing again replaces a card of the same id (and keeps its roundtrip).
    `status` says how far it got (lineage/engine/admission.py): induced (from lineages,
    not tried yet), verified (its roundtrip reproduced its effect: set by the system),
    failed (its roundtrip did not), then approved or rejected by a reviewer
    (services.skill_card_review), or retired. `data["roundtrip"]` holds the trials behind
    it; its reviews and comments are rows of their own.

    A card belongs to one library: the project's default one (`team` empty: induced
    here, readable by everyone, reviewed by the project's admins) or a team's (`team`
    set: copied from the default library or imported, read and discussed by the team's
    members, reviewed by its admins and reviewers). A card id is unique per library.
    `revision` counts every change a viewer of the card should see (a roundtrip's
    admission, a review, an edit, a comment), and `last_change` which of them made the
    newest one: the card's page follows both live."""

    class Status(models.TextChoices):
        INDUCED = "induced"
        VERIFIED = "verified"
        FAILED = "failed"
        APPROVED = "approved"
        REJECTED = "rejected"
        RETIRED = "retired"

    card_id = models.CharField(max_length=100)
    team = models.ForeignKey("accounts.Team", null=True, blank=True, on_delete=models.CASCADE,
                             related_name="skill_cards")
    copied_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="copies")
    intent = models.CharField(max_length=60)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.INDUCED)
    data = models.JSONField()  # cards.SkillCard.to_dict()
    lineages = models.ManyToManyField(Lineage, related_name="skill_cards", blank=True)
    revision = models.PositiveIntegerField(default=1)
    last_change = models.CharField(max_length=20, blank=True)  # what made the newest revision
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["intent"]
        constraints = [
            models.UniqueConstraint(fields=["team", "card_id"], name="one_card_id_per_team_library"),
            models.UniqueConstraint(fields=["card_id"], condition=models.Q(team__isnull=True),
                                    name="one_card_id_in_the_default_library"),
        ]

    @property
    def library(self) -> str:
        """Which library the card is in, as a run records it: "default" or "team:<id>"."""
        return f"team:{self.team_id}" if self.team_id else "default"

    def __str__(self) -> str:
        where = f" of team {self.team_id}" if self.team_id else ""
        return f"skill card {self.card_id}{where} ({self.status})"


class SkillReview(models.Model):
    """A reviewer's decision on a card, with the comment that gives the reason; the card's
    status before and after it, so the history reads without the card."""

    class Decision(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"

    card = models.ForeignKey(SkillCard, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                 related_name="skill_reviews")
    decision = models.CharField(max_length=10, choices=Decision.choices)
    comment = models.TextField()
    status_before = models.CharField(max_length=10, choices=SkillCard.Status.choices)
    status_after = models.CharField(max_length=10, choices=SkillCard.Status.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]


class SkillComment(models.Model):
    """One message of a card's comment thread."""

    card = models.ForeignKey(SkillCard, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                               related_name="skill_comments")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]


class SkillCardVersion(models.Model):
    """One version of a card's text (its sentence and the team's notes): version 1 is
    what induction wrote (no author); each edit makes the next, with its author and time.
    The card's data holds the newest text; the history diffs each version with the one
    before it."""

    card = models.ForeignKey(SkillCard, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    sentence = models.TextField()
    notes = models.TextField(blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                               related_name="skill_versions")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["card", "number"], name="one_number_per_card_version")]
