from django.contrib import admin

from search.models import Run, RunEvent, RunNode, ShareLink


class RunNodeInline(admin.TabularInline):
    model = RunNode
    fields = ["node_id", "parent_id", "source", "title", "status", "level", "time_ms", "reward", "visits"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


class ShareLinkInline(admin.TabularInline):
    model = ShareLink
    fields = ["created", "created_by", "revoked_at"]
    readonly_fields = ["created", "created_by"]
    extra = 0
    can_delete = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "task", "status", "judge", "evaluated", "budget", "root_ms", "best_ms",
                    "created_by", "team", "imported", "created"]
    list_filter = ["status", "task", "judge", "imported", "team"]
    search_fields = ["intent", "created_by__username"]
    readonly_fields = ["state", "next_seq", "created", "updated"]
    inlines = [ShareLinkInline, RunNodeInline]


@admin.register(RunNode)
class RunNodeAdmin(admin.ModelAdmin):
    list_display = ["run", "node_id", "parent_id", "source", "title", "status", "level", "guard", "time_ms",
                    "reward"]
    list_filter = ["status", "level", "source"]
    search_fields = ["title", "rationale"]
    readonly_fields = ["detail", "diff"]


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ["run", "seq", "kind", "created"]
    list_filter = ["kind"]
    readonly_fields = ["run", "seq", "kind", "data", "created"]


@admin.register(ShareLink)
class ShareLinkAdmin(admin.ModelAdmin):
    """Tokens are never shown (only their hashes are stored); a link is revoked by setting
    revoked_at."""

    list_display = ["id", "run", "created_by", "created", "revoked_at"]
    list_filter = ["revoked_at"]
    readonly_fields = ["run", "token_hash", "created_by", "created"]
