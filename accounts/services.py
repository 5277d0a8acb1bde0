"""Writes for teams and memberships."""

from __future__ import annotations

from django.db import transaction

from accounts.models import Membership, Team


@transaction.atomic
def team_create(*, name: str, admin=None) -> Team:
    """A team; its creator (if given) becomes its first admin."""
    team = Team.objects.create(name=name)
    if admin is not None:
        membership_set(team=team, user=admin, role=Membership.Role.ADMIN)
    return team


def membership_set(*, team: Team, user, role: str = Membership.Role.MEMBER) -> Membership:
    membership, _ = Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
    return membership
