"""Writes for teams and memberships.

The people who manage a team are its admins: they add members by username, set roles
and remove members; anyone may leave a team. A team always keeps at least one admin.
Permission is checked here, so every caller (the API, the page, a command) gets the
same rules; a refusal is a TeamError naming the field (a TeamConflict when the request is
sound but the teams' state refuses it: its last admin leaving), TeamForbidden, or
MemberNotFound (a username that is not one of the team's members: whether such a user
exists at all is not said).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.models import Membership, Team
from accounts.names import display_name_problem

# A team's name, as its column holds it; the API's schema says the same (accounts.apis).
TEAM_NAME_MAX_LENGTH = Team._meta.get_field("name").max_length


class TeamError(ValueError):
    def __init__(self, message: str, field: str = "non_field_errors") -> None:
        super().__init__(message)
        self.field = field


class TeamConflict(TeamError):
    """The request is well formed, but the teams as they stand refuse it (its last admin
    would leave or be demoted, a name the user's teams hold already, a member added twice):
    another change first can make it succeed."""


class TeamForbidden(PermissionError):
    """Only the team's admins may do this."""


class MemberNotFound(LookupError):
    """No member of the team has this username: nobody does, or somebody who is not in it."""


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


def team_create_by(*, name: str, user) -> Team:
    """A team made in the app: its name checked (accounts.names: no control or
    text-direction characters; spaces collapsed), its creator its first admin."""
    name = str(name or "")
    problem = display_name_problem(name)
    if problem:
        raise TeamError(problem, "name")
    name = " ".join(name.split())
    if not name:
        raise TeamError("give the team a name", "name")
    if len(name) > TEAM_NAME_MAX_LENGTH:
        raise TeamError(f"at most {TEAM_NAME_MAX_LENGTH} characters", "name")
    # Only the teams the user is in count: whether someone else's team has this name is
    # not theirs to learn, and a name nobody has answers the same.
    if Team.objects.filter(name__iexact=name, memberships__user=user).exists():
        raise TeamConflict(f"you are in a team named {name!r} already", "name")
    return team_create(name=name, admin=user)


def _admin_of(team: Team, user) -> None:
    if not Membership.objects.filter(team=team, user=user, role=Membership.Role.ADMIN).exists():
        raise TeamForbidden("only the team's admins may do this")


def _role(role: str) -> str:
    if role not in Membership.Role.values:
        raise TeamError(f"the role must be one of {', '.join(Membership.Role.values)}", "role")
    return role


@transaction.atomic
def member_add(*, team: Team, actor, username: str, role: str = Membership.Role.MEMBER) -> Membership:
    """An admin adds, by username, someone who is in a team with them already: whose name
    they can read in a team's members. Anyone else, whether or not such a user exists, is
    the same refusal (pointing to an invitation link, which its receiver chooses to use),
    so that the form tells nobody which usernames exist (issue 34, part 7)."""
    _admin_of(team, actor)
    role = _role(role)
    colleagues = Membership.objects.filter(team__memberships__user=actor).values("user_id")
    user = get_user_model().objects.filter(username=str(username or "").strip(), pk__in=colleagues).first()
    if user is None:
        raise TeamError(f"nobody called {username!r} is in a team with you: send them an invitation link "
                        "instead", "username")
    if Membership.objects.filter(team=team, user=user).exists():
        raise TeamConflict(f"{user.get_username()} is in the team already", "username")
    return membership_set(team=team, user=user, role=role)


@transaction.atomic
def member_set_role(*, team: Team, actor, username: str, role: str) -> Membership:
    _admin_of(team, actor)
    role = _role(role)
    membership = _membership(team, username)
    if membership.role == Membership.Role.ADMIN and role != Membership.Role.ADMIN:
        _keep_an_admin(team, membership)
    membership.role = role
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def member_remove(*, team: Team, actor, username: str) -> None:
    """An admin removes a member, or a member leaves."""
    membership = _membership(team, username)
    if membership.user_id != actor.pk:
        _admin_of(team, actor)
    if membership.role == Membership.Role.ADMIN:
        _keep_an_admin(team, membership)
    membership.delete()


def _membership(team: Team, username: str) -> Membership:
    membership = (Membership.objects.select_for_update().select_related("user")
                  .filter(team=team, user__username=username).first())
    if membership is None:
        raise MemberNotFound(f"no member of this team is called {username!r}")
    return membership


def _keep_an_admin(team: Team, leaving: Membership) -> None:
    admins = Membership.objects.select_for_update().filter(team=team, role=Membership.Role.ADMIN)
    if not admins.exclude(pk=leaving.pk).exists():
        raise TeamConflict("a team keeps at least one admin: make someone else admin first", "role")

