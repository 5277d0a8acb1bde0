"""Shapes of the run API: what goes out (from rows and selector dicts) and what comes in.

Input serializers check types, ranges and sizes (optiml_web.limits: a kernel larger than
the gate takes is refused here, before anything is stored); the services check meaning
(a known task, a plan that parses) and their errors are mapped to the same
{"field": ["message"]} form.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.fields import DisplayTextField
from optiml_web.limits import (
    MAX_INTENT_CHARS,
    MAX_NAME_CHARS,
    MAX_PARALLEL,
    MAX_SOURCE_BYTES,
    MAX_SOURCE_NAMES,
    plan_error,
    source_error,
)
from optiml_web.params import MAX_DB_INT, TextChoiceField, TextField, WholeNumberField
from search import demo_runs, node_table, selectors
from search.engine.evaluators import PROMOTE_MARGIN
from search.models import Run, ShareLink, WritingJob


class DemoSerializer(serializers.Serializer):
    gpu = serializers.CharField(allow_null=True, help_text="the GPU the recording was measured on")
    recorded_at = serializers.CharField(allow_null=True, help_text="when it was measured (a date)")
    banner = serializers.CharField(help_text="what the run's pages say above everything else")


class RunSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="task.name")
    speedup = serializers.FloatField(allow_null=True, help_text="root time / best time")
    created_by = serializers.SerializerMethodField()
    team = serializers.IntegerField(source="team_id", allow_null=True)
    vendor_ms = serializers.SerializerMethodField(
        help_text="the vendor library's time on the GPU that measured the run's best kernel (vendor_gpu); "
        "null when that GPU has none: never another GPU's")
    vendor_gpu = serializers.SerializerMethodField(help_text="the GPU the vendor was timed on; null "
                                                   "when there is no vendor time for the run's GPU")
    vendor_source = serializers.SerializerMethodField(
        help_text="where the vendor time came from: measured on that GPU on a date, or recorded; null "
        "without one")
    speedup_vs_vendor = serializers.SerializerMethodField(help_text="vendor time / best time; null when "
                                                          "either is unknown")
    measured_gpu = serializers.SerializerMethodField(
        help_text="the GPU that measured the run's best kernel (else its root), whose vendor time is "
        "vendor_ms; null before any measurement")

    class Meta:
        model = Run
        fields = ["id", "task", "status", "judge", "budget", "evaluated", "root_ms", "best_ms",
                  "speedup", "gpu_seconds", "created", "created_by", "team", "sources", "seed",
                  "intent", "imported", "message", "best_node", "best_found_at", "vendor_ms", "updated",
                  "screen", "parallel", "outcome", "vendor_gpu", "speedup_vs_vendor", "vendor_source",
                  "measured_gpu", "demo", "queued_since"]
        read_only_fields = fields
        extra_kwargs = {"queued_since": {"help_text": "set while a running run waits, queued for a GPU "
                                         "worker (none is connected; its message says so): since when"}}

    demo = serializers.SerializerMethodField(
        help_text="a demo run (its times recorded on a GPU and replayed: search.demo_runs): which GPU, "
        "when, and the banner its pages show; null for a run measured by the server's evaluator")

    @extend_schema_field(DemoSerializer(allow_null=True))
    def get_demo(self, run: Run) -> dict | None:
        return demo_runs.demo_view(run)

    outcome = serializers.SerializerMethodField(
        help_text="how a finished run came out: improved, no_gain (nothing beat the starting kernel) "
        "or nothing_passed (no kernel passed the gate: `message` says why); blank otherwise")

    def get_created_by(self, run: Run) -> str | None:
        return run.created_by.username if run.created_by else None

    def get_outcome(self, run: Run) -> str:
        return selectors.run_outcome(run=run)

    def _vendor(self, run: Run) -> dict:
        """The run's vendor comparison (node_table.run_vendor), read once per run."""
        known = self.__dict__.setdefault("_vendors", {})
        if run.pk not in known:
            known[run.pk] = node_table.run_vendor(run=run)
        return known[run.pk]

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_vendor_ms(self, run: Run) -> float | None:
        return self._vendor(run)["vendor_ms"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_vendor_gpu(self, run: Run) -> str | None:
        return self._vendor(run)["vendor_gpu"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_vendor_source(self, run: Run) -> str | None:
        return self._vendor(run)["vendor_source"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_measured_gpu(self, run: Run) -> str | None:
        return self._vendor(run)["measured_gpu"]

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_speedup_vs_vendor(self, run: Run) -> float | None:
        vendor_ms = self._vendor(run)["vendor_ms"]
        return vendor_ms / run.best_ms if vendor_ms and run.best_ms else None


class QueueSerializer(serializers.Serializer):
    """Counts only: other people's work is `queued_ahead`, never their runs or the GPU
    workers (selectors.run_queue). A share link's anonymous viewer reads this too."""

    pending = serializers.IntegerField(help_text="nodes asked for and not yet measured")
    evaluated = serializers.IntegerField()
    budget = serializers.IntegerField()
    per_minute = serializers.FloatField(allow_null=True, help_text="candidates finished per minute, "
                                        "over the last ten minutes; null when it cannot be told")
    minutes_left = serializers.FloatField(allow_null=True, help_text="minutes the budget needs at that pace")
    under_way = serializers.IntegerField(help_text="evaluations issued to the GPU queue, not yet measured")
    queued = serializers.IntegerField(help_text="of those, how many wait for a GPU worker")
    queued_ahead = serializers.IntegerField(help_text="evaluations of other running runs issued before "
                                            "this run's first waiting one, and not yet taken by a worker")
    measuring = serializers.IntegerField(help_text="of this run's evaluations, how many a GPU worker "
                                         "measures now")


class GenerationAttemptSerializer(serializers.Serializer):
    round = serializers.IntegerField(help_text="0: the first kernel; 1..: repairs")
    writer = serializers.CharField(help_text="whose kernel it is")
    experts = serializers.ListField(child=serializers.CharField(),
                                    help_text="who contributed, the writer first")
    stage = serializers.CharField(help_text="where it stopped: endpoint, reply, plan, policy, compile, L0, "
                                  "compiled, passed")
    passed = serializers.BooleanField()
    guard = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True, help_text="what the gate said")
    source = serializers.CharField(allow_null=True, help_text="its kernel, when it was kept")
    diff = serializers.CharField(allow_blank=True, help_text="unified diff from the attempt before")


class GenerationSerializer(serializers.Serializer):
    intent = serializers.CharField()
    experts = serializers.ListField(child=serializers.CharField())
    attempts = GenerationAttemptSerializer(many=True)


class RunDetailSerializer(RunSerializer):
    why = serializers.SerializerMethodField(help_text="search.engine.explain.why_faster, root -> best")
    queue = serializers.SerializerMethodField()
    last_seq = serializers.SerializerMethodField()
    can_control = serializers.SerializerMethodField(help_text="may this viewer pause, stop and share it")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "why", "queue", "last_seq", "can_control", "can_share",
                  "floor_ms", "generation", "promote_margin"]
        read_only_fields = fields

    promote_margin = serializers.SerializerMethodField(
        help_text="how much faster than the best full-gate time (a fraction) the screen must find a kernel "
        "for it to be given the full gate (search.engine.evaluators.PROMOTE_MARGIN)")

    def get_promote_margin(self, run: Run) -> float:
        return PROMOTE_MARGIN

    floor_ms = serializers.SerializerMethodField(
        help_text="the physics floor of the task at its timed sizes on the GPU that measured the run "
                  "(its datasheet ceilings); null before any measurement")

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_floor_ms(self, run: Run) -> float | None:
        return selectors.run_floor_ms(run=run)

    generation = serializers.SerializerMethodField(
        help_text="how the starting kernel was written from an intent: intent, experts and every attempt "
        "(round, writer, experts, stage, passed, guard, message, source, diff), the last one the root, "
        "and `edited` (null, or the diff from the written kernel to the root when its creator changed it "
        "before starting); null when it was not written (selectors.run_generation)")

    @extend_schema_field(GenerationSerializer(allow_null=True))
    def get_generation(self, run: Run) -> dict | None:
        return selectors.run_generation(run=run)

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_why(self, run: Run) -> list:
        return selectors.run_why(run=run)

    @extend_schema_field(QueueSerializer)
    def get_queue(self, run: Run) -> dict:
        return selectors.run_queue(run=run)

    def get_last_seq(self, run: Run) -> int:
        return run.next_seq - 1

    def get_can_control(self, run: Run) -> bool:
        request = self.context.get("request")
        return bool(request) and selectors.run_controllable_by(run=run, user=request.user)

    can_share = serializers.SerializerMethodField(help_text="may this viewer make share links (imports too)")

    def get_can_share(self, run: Run) -> bool:
        request = self.context.get("request")
        return bool(request) and selectors.run_shareable_by(run=run, user=request.user)


class RunCreatedSerializer(RunDetailSerializer):
    notice = serializers.SerializerMethodField(help_text="what was assumed, e.g. the naive kernel")

    class Meta(RunDetailSerializer.Meta):
        fields = [*RunDetailSerializer.Meta.fields, "notice"]
        read_only_fields = fields

    def get_notice(self, run: Run) -> str | None:
        return self.context.get("notice")


class RunCreateSerializer(serializers.Serializer):
    task = TextField(max_length=MAX_NAME_CHARS, help_text="a suite task's name (GET /api/tasks/)")
    source = TextField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False,
                       help_text="CUDA source; leave it out to start from the naive kernel "
                       f"(at most {MAX_SOURCE_BYTES} bytes of UTF-8, the gate's limit)")
    plan = serializers.JSONField(required=False, allow_null=True, help_text="the launch plan (an object)")
    intent = DisplayTextField(required=False, allow_blank=True, max_length=MAX_INTENT_CHARS)
    budget = WholeNumberField(
        min_value=1, max_value=10_000,
        error_messages={"min_value": "the budget must be at least one evaluation"})
    judge = TextChoiceField(choices=["rules", "llm"], default="rules")
    seed = WholeNumberField(min_value=0, max_value=2**63 - 1, default=0)
    sources = serializers.ListField(child=TextField(max_length=100), required=False,
                                    allow_null=True, max_length=MAX_SOURCE_NAMES,
                                    help_text="proposal source names (GET /api/sources/); default all")
    team = WholeNumberField(required=False, allow_null=True, min_value=0, max_value=MAX_DB_INT,
                                    help_text="share with this team")
    writing_job = WholeNumberField(
        required=False, allow_null=True, min_value=1, max_value=MAX_DB_INT,
        help_text="the done writing job (POST /api/kernels/write/) the kernel came from: its attempts "
        "become the tree's first nodes; without a source, the run starts from its kernel as written")
    parallel = WholeNumberField(
        min_value=1, max_value=MAX_PARALLEL, default=1,
        help_text="candidates evaluated at once, each on a GPU worker of its own (at most one "
        "per GPU worker serves the run; more only wait in the queue)")
    evaluator = TextChoiceField(
        choices=["gate", "demo"], default="gate",
        help_text="gate: the server's evaluator measures the kernels; demo: the task's recording, "
        "measured on a GPU and shipped with the app, replays its search (its judge, seed, sources and "
        "at most its budget); GET /api/demo/ lists the tasks that have one")
    screen = serializers.BooleanField(
        default=True, help_text="screen candidates first; only those faster than the best get the "
        "full gate (docs/gate.md, 'The screen'); the server's OPTIML_SCREEN can turn it off for all runs")

    def validate_source(self, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise serializers.ValidationError(
                "the kernel source is empty: paste a kernel, or leave it out to start from the "
                "task's naive kernel")
        too_large = source_error(value) if value is not None else None
        if too_large:
            raise serializers.ValidationError(too_large)
        return value

    def validate_plan(self, value):
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("the plan must be a JSON object")
        too_large = plan_error(value) if value is not None else None
        if too_large:
            raise serializers.ValidationError(too_large)
        return value

    def validate(self, attrs: dict) -> dict:
        if attrs.get("source") and not attrs.get("plan"):
            raise serializers.ValidationError({"plan": ["a kernel source needs its launch plan"]})
        return attrs


class KernelWriteSerializer(serializers.Serializer):
    task = TextField(max_length=MAX_NAME_CHARS, help_text="a task's name (GET /api/tasks/)")
    intent = DisplayTextField(max_length=MAX_INTENT_CHARS, help_text="what the kernel should do, in words")


class KernelWrittenSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="the CUDA source written")
    plan = serializers.JSONField(help_text="its launch plan")
    title = serializers.CharField()
    rationale = serializers.CharField(allow_blank=True)
    writer = serializers.CharField(
        help_text="whose kernel it is: an expert's name, llm:<model>, or mot:<primary>+<peers>")
    experts = serializers.ListField(child=serializers.CharField(),
                                    help_text="everyone who contributed to it, the writer first")
    attempts = serializers.ListField(child=serializers.DictField(),
                                     help_text="each round: writer, stage where it ended, the gate's message")


class WritingAttemptSerializer(serializers.Serializer):
    round = serializers.IntegerField(help_text="0: the first kernel; 1 and on: repairs")
    writer = serializers.CharField(help_text="whose kernel it is")
    experts = serializers.ListField(child=serializers.CharField(),
                                    help_text="everyone who contributed to it, the writer first")
    stage = serializers.CharField(
        help_text="where it stopped: endpoint, reply, plan, policy, compile, compiled, L0, passed")
    passed = serializers.BooleanField()
    message = serializers.CharField(allow_blank=True, help_text="what the gate (or the endpoint) said")


class WritingJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField(help_text="where to read the job (GET) until it ends")
    task = serializers.CharField()
    intent = serializers.CharField()
    status = serializers.ChoiceField(choices=WritingJob.Status.choices,
                                     help_text="queued, running, then done or failed")
    message = serializers.CharField(allow_blank=True,
                                    help_text="failed: why (nobody could write it, or its worker died)")
    stale_after_s = serializers.IntegerField(
        help_text="a queued or running job that does not move for this long is failed")
    attempts = WritingAttemptSerializer(many=True, help_text="the attempts so far, as they were checked")
    written = KernelWrittenSerializer(allow_null=True, help_text="done: the kernel and its plan")
    created = serializers.DateTimeField()
    updated = serializers.DateTimeField(help_text="when it last moved")


class NodeRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    parentId = serializers.IntegerField(allow_null=True)  # noqa: N815 (d3.stratify's name)
    state = serializers.CharField(help_text="pending | done")
    source = serializers.CharField(help_text="who proposed it: root, tunable, rewrite:<name>, llm:<model>")
    title = serializers.CharField()
    status = serializers.CharField(help_text="passed, rejected, error; blank while pending")
    guard = serializers.CharField()
    level = serializers.CharField(help_text="full (the gate) | screen (screened, not profiled); "
                                  "blank while pending")
    time_ms = serializers.FloatField(allow_null=True)
    spread_ms = serializers.FloatField(allow_null=True)
    reward = serializers.FloatField(allow_null=True)
    visits = serializers.IntegerField()
    value = serializers.FloatField()
    prior = serializers.FloatField()


class RooflineSerializer(serializers.Serializer):
    flops = serializers.FloatField(allow_null=True)
    bytes = serializers.FloatField(allow_null=True)
    time_ms = serializers.FloatField(allow_null=True)
    intensity = serializers.FloatField(allow_null=True, help_text="FLOP per byte")
    achieved_flops_per_s = serializers.FloatField(allow_null=True)
    achieved_bytes_per_s = serializers.FloatField(allow_null=True)
    dram_bytes_measured = serializers.FloatField(allow_null=True)
    gpu = serializers.CharField(allow_null=True, help_text="the GPU that measured the node; null: none did")
    ceilings = serializers.DictField(allow_null=True, help_text=(
        "the measuring GPU's datasheet peaks (dram_bytes_per_s, fp32_flops_per_s, ridge_intensity, "
        "source); null when no GPU measured the node or the ceilings table does not know it"))
    measured = serializers.DictField(allow_null=True, help_text=(
        "the hierarchical roofline from the node's own ncu counters: flops, seconds, "
        "achieved_flops_per_s, fp32_flops_per_s and levels (L1, L2, DRAM: bytes, "
        "ceiling_bytes_per_s, intensity, achieved_bytes_per_s); null when not profiled with them"))


class NodeDetailSerializer(NodeRowSerializer):
    source = serializers.CharField(help_text="the kernel's CUDA source (the row's `source` is `proposer`)")
    proposer = serializers.CharField()
    skill_card_url = serializers.CharField(allow_null=True, help_text="the card that made it, if a card did")
    rationale = serializers.CharField(allow_blank=True)
    diff = serializers.CharField(allow_blank=True, help_text="unified diff against the parent")
    diff_vs_root = serializers.CharField(allow_blank=True,
                                         help_text="unified diff of source and plan against the root")
    plan = serializers.JSONField()
    candidate_hash = serializers.CharField()
    families = serializers.ListField(child=serializers.CharField())
    params = serializers.JSONField()
    evaluation_index = serializers.IntegerField(allow_null=True)
    reused = serializers.BooleanField()
    level_label = serializers.CharField(allow_blank=True, help_text="in words: 'full gate' or "
                                        "'screened (not profiled)'")
    promoted_from_screen = serializers.JSONField(
        allow_null=True, help_text="what the screen saw before the full gate: {time_ms, seconds}")
    screen_note = serializers.CharField(allow_null=True, help_text="why a node only the screen measured "
                                        "is faster than the run's best and still not the best; else null")
    measurement = serializers.JSONField(allow_null=True)
    diagnosis = serializers.JSONField(allow_null=True)
    judge_error = serializers.CharField(allow_null=True)
    deltas_vs_parent = serializers.DictField()
    deltas_vs_root = serializers.DictField()
    reward_terms = serializers.DictField()
    compile = serializers.JSONField(allow_null=True, help_text="ok, seconds, kernels (registers, spills...)")
    correctness = serializers.ListField(child=serializers.DictField(), help_text="per level, sizes and seed")
    timing = serializers.JSONField(allow_null=True)
    profile = serializers.JSONField(allow_null=True)
    roofline = RooflineSerializer()
    ncu_report_url = serializers.CharField(allow_null=True)


class EventSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    kind = serializers.CharField()
    data = serializers.JSONField()


class ShareSerializer(serializers.ModelSerializer):
    created_by = serializers.SerializerMethodField()
    open = serializers.SerializerMethodField()

    class Meta:
        model = ShareLink
        fields = ["id", "created", "created_by", "revoked_at", "open"]
        read_only_fields = fields

    def get_created_by(self, link: ShareLink) -> str | None:
        return link.created_by.username if link.created_by else None

    def get_open(self, link: ShareLink) -> bool:
        return link.revoked_at is None


class ShareCreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    token = serializers.CharField(help_text="shown once; only its hash is stored")
    url = serializers.CharField()


class SharedRunSerializer(serializers.Serializer):
    run = RunDetailSerializer()
    nodes = NodeRowSerializer(many=True)


class DemoTaskSerializer(serializers.Serializer):
    gpu = serializers.CharField()
    recorded_at = serializers.CharField()
    budget = serializers.IntegerField(help_text="evaluations recorded: a demo run's budget at most")


class DemoChoicesSerializer(serializers.Serializer):
    default = serializers.CharField(help_text="the evaluator New session picks: demo while no GPU worker "
                                    "has measured a kernel here, else gate")
    gpu_worker_seen = serializers.BooleanField()
    gpu_worker_live = serializers.BooleanField(help_text="whether a GPU worker is connected now")
    gate_note = serializers.CharField(allow_blank=True, help_text="what to know before a run measured by a "
                                      "GPU worker starts: it waits, queued, while none is connected")
    tasks = serializers.DictField(child=DemoTaskSerializer(), help_text="task name: its demo recording")
    note = serializers.CharField(allow_blank=True)


class SourceSerializer(serializers.Serializer):
    name = serializers.CharField()
    note = serializers.CharField(allow_blank=True, help_text="what to know before choosing it (the "
                                 "skills source: how many cards the default library lends, or none)")
