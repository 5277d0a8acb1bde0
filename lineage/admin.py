from django.contrib import admin

from lineage.models import Lineage, LineageState, RejectedAttempt, SkillCard, Transition, WalkRequest


class ReadOnly(admin.ModelAdmin):
    """Lineages are measurements: they are walked or imported, never edited by hand."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Lineage)
class LineageAdmin(ReadOnly):
    list_display = ("id", "task", "gpu", "origin", "replayed", "complete", "stopped", "created_at")
    list_filter = ("origin", "complete", "task")


@admin.register(LineageState)
class LineageStateAdmin(ReadOnly):
    list_display = ("lineage", "key", "status", "guard", "time_ms")


@admin.register(Transition)
class TransitionAdmin(ReadOnly):
    list_display = ("lineage", "intent", "proposer", "before", "after", "speedup")
    list_filter = ("intent", "proposer")


@admin.register(RejectedAttempt)
class RejectedAttemptAdmin(ReadOnly):
    list_display = ("lineage", "flag", "proposer", "start", "guard")
    list_filter = ("guard", "proposer")


@admin.register(WalkRequest)
class WalkRequestAdmin(ReadOnly):
    list_display = ("id", "task", "max_states", "status", "lineage", "created_at", "finished_at")
    list_filter = ("status", "task")


@admin.register(SkillCard)
class SkillCardAdmin(ReadOnly):
    list_display = ("card_id", "intent", "status", "updated_at")
    list_filter = ("status",)
