import json

from django.contrib import admin
from django.utils.html import format_html

from profiling.models import Candidate, DeclaredTask, Evaluation, GpuWorker, Task


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["name", "vendor_ms", "flops", "bytes", "updated"]
    search_fields = ["name", "description"]
    # Copied from the harness registry by `manage.py sync_tasks`; edits here would be
    # overwritten at the next sync.
    readonly_fields = [
        "name",
        "description",
        "sizes",
        "vendor_ms",
        "vendor_what",
        "flops",
        "bytes",
        "naive_candidate",
        "updated",
    ]


@admin.register(DeclaredTask)
class DeclaredTaskAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "team", "created"]
    list_filter = ["team", "created"]
    search_fields = ["name", "owner__username"]
    list_select_related = ["owner", "team"]
    exclude = ["definition"]
    readonly_fields = ["name", "owner", "team", "created", "definition_json"]

    # Declared through the API, which validates the definition and writes its file; never
    # changed or deleted here, because measurements are stored under the task's name and
    # the harness on every host would keep the file.
    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="definition")
    def definition_json(self, task: DeclaredTask) -> str:
        return format_html("<pre>{}</pre>", json.dumps(task.definition, indent=2))


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ["short_hash", "label", "created"]
    search_fields = ["content_hash", "label"]
    list_filter = ["created"]
    # The hash identifies source + plan: editing either would make the row lie.
    readonly_fields = ["content_hash", "source", "plan", "created"]

    @admin.display(description="hash", ordering="content_hash")
    def short_hash(self, candidate: Candidate) -> str:
        return candidate.content_hash[:12]


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "task",
        "candidate",
        "status",
        "guard",
        "median_ms",
        "spread_ms",
        "gpu",
        "harness_version",
        "short_settings_key",
        "evaluator",
        "source",
        "finished_at",
    ]
    list_filter = ["status", "guard", "source", "evaluator", "gpu", "harness_version", "settings_key", "task"]
    search_fields = ["candidate__content_hash", "candidate__label", "task__name", "message"]
    list_select_related = ["task", "candidate"]
    exclude = ["verdict", "settings"]
    readonly_fields = [
        "candidate",
        "task",
        "harness_version",
        "gpu",
        "settings_key",
        "evaluator",
        "settings_json",
        "seeds_json",
        "status",
        "guard",
        "message",
        "stage",
        "median_ms",
        "spread_ms",
        "source",
        "retryable",
        "claimed_at",
        "finished_at",
        "verdict_json",
    ]

    # Measurements come from the gate only; the admin shows them and may delete them.
    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="settings key", ordering="settings_key")
    def short_settings_key(self, evaluation: Evaluation) -> str:
        return evaluation.settings_key[:12]

    @admin.display(description="gate settings")
    def settings_json(self, evaluation: Evaluation) -> str:
        return format_html("<pre>{}</pre>", json.dumps(evaluation.settings, indent=2, sort_keys=True))

    # Staff only (the admin's own login): the seeds reproduce the verdict, and are what
    # every page users see leaves out (profiling.serialization.verdict_for_users).
    @admin.display(description="gate seeds (operator only)")
    def seeds_json(self, evaluation: Evaluation) -> str:
        seeds = (evaluation.verdict or {}).get("seeds") or {}
        return format_html("<pre>{}</pre>", json.dumps(seeds, indent=2, sort_keys=True))

    @admin.display(description="verdict")
    def verdict_json(self, evaluation: Evaluation) -> str:
        return format_html("<pre>{}</pre>", json.dumps(evaluation.verdict, indent=2))


@admin.register(GpuWorker)
class GpuWorkerAdmin(admin.ModelAdmin):
    """The GPU workers' heartbeats (profiling/workers.py): written by the workers alone."""

    list_display = ["hostname", "gpu", "started", "last_beat"]
    readonly_fields = ["hostname", "gpu", "started", "last_beat"]

    def has_add_permission(self, request) -> bool:
        return False
