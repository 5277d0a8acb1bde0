"""Reads for teams."""

from __future__ import annotations

from accounts.models import Membership, Team


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
