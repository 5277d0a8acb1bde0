"""Reads for teams, who a session signs in, and joining: open invitations, sign-ups
counted from an address. (Failed sign-ins: accounts.signing_in.)"""

from __future__ import annotations

from datetime import datetime
from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib import auth
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from accounts.models import Invitation, Membership, SignUp, Team


def user_teams(*, user) -> list[Team]:
    if not user.is_authenticated:
        return []
    return list(Team.objects.filter(memberships__user=user).order_by("name"))


def user_team_ids(*, user, role: str | None = None) -> set[int]:
    """Ids of the teams `user` belongs to (with `role`, if given); none for a visitor."""
    if not user.is_authenticated:
        return set()
    memberships = Membership.objects.filter(user=user)
    if role is not None:
        memberships = memberships.filter(role=role)
    return set(memberships.values_list("team_id", flat=True))


def team_role(*, user, team_id: int) -> str | None:
    """`user`'s role in the team ("admin" or "member"), None when not a member."""
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, team_id=team_id).values_list("role", flat=True).first()


def team_members(*, team: Team) -> list[dict]:
    return [{"username": m.user.get_username(), "role": m.role}
            for m in team.memberships.select_related("user").order_by("user__username")]


class _SessionCopy(dict):
    """A session's data for auth.get_user to read. What it would write (flush a session
    whose password changed, re-key one signed with a fallback secret) is for the browser's
    next request to do, where the new cookie reaches the browser; a socket only looks."""

    def flush(self) -> None:
        self.clear()

    def cycle_key(self) -> None:
        pass


def session_user(*, session_key: str | None):
    """The user session `session_key` signs in now, read as Django reads request.user:
    AnonymousUser once the session has ended (signed out, expired) or no longer holds (its
    user's password changed, or the user is gone or inactive)."""
    if not session_key:
        return AnonymousUser()
    data = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
    return auth.get_user(SimpleNamespace(session=_SessionCopy(data)))


# -- joining: invitations and sign-ups (accounts.joining) ---------------------------------


def invitation_open(*, token: str) -> Invitation | None:
    """The invitation this token opens now: not used, revoked or expired; else None."""
    if not token:
        return None
    return (Invitation.objects.select_related("team")
            .filter(token_hash=Invitation.digest(token), used_at__isnull=True, revoked_at__isnull=True,
                    expires__gt=timezone.now()).first())


def team_invitations(*, team: Team) -> list[Invitation]:
    """The team's invitations still open, newest first."""
    return list(Invitation.objects.select_related("created_by")
                .filter(team=team, used_at__isnull=True, revoked_at__isnull=True, expires__gt=timezone.now())
                .order_by("-created", "-pk"))


def open_sign_ups_from(*, ip_address: str | None, since: datetime) -> int:
    """Accounts made by open sign-up (not by invitation) from `ip_address` since `since`."""
    return SignUp.objects.filter(ip_address=ip_address, invited=False, created__gte=since).count()
