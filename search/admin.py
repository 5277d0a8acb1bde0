from django.contrib import admin

from search.models import Run, RunEvent, RunNode


class RunNodeInline(admin.TabularInline):
    model = RunNode
    fields = ["node_id", "parent_id", "source", "title", "status", "time_ms", "reward", "visits"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "task", "status", "judge", "evaluated", "budget", "root_ms", "best_ms", "created"]
    list_filter = ["status", "task", "judge"]
    readonly_fields = ["state", "next_seq", "created", "updated"]
    inlines = [RunNodeInline]


@admin.register(RunNode)
class RunNodeAdmin(admin.ModelAdmin):
    list_display = ["run", "node_id", "parent_id", "source", "title", "status", "guard", "time_ms", "reward"]
    list_filter = ["status", "source"]
    search_fields = ["title", "rationale"]
    readonly_fields = ["detail", "diff"]


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ["run", "seq", "kind", "created"]
    list_filter = ["kind"]
    readonly_fields = ["run", "seq", "kind", "data", "created"]
