from django.contrib import admin

from accounts.models import Invitation, Membership, SignInFailures, SignUp, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "member_count", "created"]
    search_fields = ["name"]
    inlines = [MembershipInline]

    @admin.display(description="members")
    def member_count(self, team: Team) -> int:
        return team.memberships.count()


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role", "created"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__name"]
    autocomplete_fields = ["user", "team"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Read-only: an invitation is made on the teams page (its token is shown only there,
    once); here an administrator sees who invited whom, and may revoke by deleting."""

    list_display = ["team", "created_by", "created", "expires", "used_by", "used_at", "revoked_at"]
    list_filter = ["team"]
    readonly_fields = ["team", "token_hash", "created_by", "expires", "used_by", "used_at", "revoked_at"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(SignUp)
class SignUpAdmin(admin.ModelAdmin):
    list_display = ["user", "created", "ip_address", "invited"]
    list_filter = ["invited"]
    search_fields = ["user__username", "ip_address"]
    readonly_fields = ["user", "ip_address", "invited"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(SignInFailures)
class SignInFailuresAdmin(admin.ModelAdmin):
    """Read-only counts of failed sign-ins (accounts/signing_in.py): `pair:<address> <name>`,
    `address:<address>` or `device:<id>`. Deleting a row ends its wait at once."""

    list_display = ["key", "failures", "latest"]
    search_fields = ["key"]
    ordering = ["-latest"]
    readonly_fields = ["key", "failures", "latest"]

    def has_add_permission(self, request) -> bool:
        return False
