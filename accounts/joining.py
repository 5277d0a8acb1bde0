"""Writes for joining: signing up, and a team's invitations.

Open sign-up (settings.OPTIML_OPEN_SIGN_UP) lets anyone who reaches the site make an
account, at most OPTIML_SIGN_UP_ADDRESS_LIMIT an hour from one address. An invitation
lets one person in whatever that setting says: a team's admin makes it, and whoever opens
its link signs up (or, signed in already, joins as themselves) as a member of that team.

An invitation is claimed with a conditional update whose count is checked, in the
transaction that makes the account and the membership: two people opening one link at
once get one account between them, and a refused claim leaves no account behind.
Passwords are checked by the form (Django's validators) before anything here runs.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Invitation, Membership, SignUp, Team
from accounts.selectors import open_sign_ups_from, team_role
from accounts.services import TeamForbidden, membership_set

# What the per-address limit counts over (settings.OPTIML_SIGN_UP_ADDRESS_LIMIT is "an hour").
SIGN_UP_WINDOW = timedelta(hours=1)


class SignUpRefused(Exception):
    """Sign-up is not open here, or this address made its accounts for the hour."""

    def __init__(self, message: str, *, limited: bool = False) -> None:
        super().__init__(message)
        self.limited = limited  # True: try again later (429); False: not here at all (404)


class UsernameTaken(ValueError):
    """Made by someone else between the form's check and the insert."""


class InvitationUnusable(Exception):
    """The link was used, revoked or expired, or never was one."""


@transaction.atomic
def user_sign_up(*, username: str, password: str, ip_address: str | None, invitation_token: str = ""):
    """A new user, by open sign-up or by the invitation `invitation_token` (a member of its
    team then). Refuses with SignUpRefused, UsernameTaken or InvitationUnusable."""
    if invitation_token:
        invitation = _claim(invitation_token)
    else:
        _check_open_sign_up(ip_address)
        invitation = None
    try:
        with transaction.atomic():
            user = get_user_model().objects.create_user(username=username, password=password)
    except IntegrityError:
        raise UsernameTaken(f"a user called {username!r} exists already") from None
    SignUp.objects.create(user=user, ip_address=ip_address, invited=invitation is not None)
    if invitation is not None:
        _join(invitation, user)
    return user


def _check_open_sign_up(ip_address: str | None) -> None:
    if not settings.OPTIML_OPEN_SIGN_UP:
        raise SignUpRefused("Sign-up is not open on this site: a team admin can invite you.")
    limit = settings.OPTIML_SIGN_UP_ADDRESS_LIMIT
    # Not exact under concurrent sign-ups from one address (two may both read limit - 1):
    # it slows a script down, it is not a quota.
    if open_sign_ups_from(ip_address=ip_address, since=timezone.now() - SIGN_UP_WINDOW) >= limit:
        raise SignUpRefused(f"{limit} accounts were made from your address in the last hour; "
                            "try again later.", limited=True)


@transaction.atomic
def invitation_accept(*, token: str, user) -> Membership:
    """A signed-in user joins the invitation's team as a member. One in the team already
    keeps their role, and the link stays open for whom it was meant."""
    invitation = Invitation.objects.select_related("team").filter(token_hash=Invitation.digest(token)).first()
    if invitation is not None:
        membership = Membership.objects.filter(team=invitation.team, user=user).first()
        if membership is not None:
            return membership
    invitation = _claim(token)
    return _join(invitation, user)


def _claim(token: str) -> Invitation:
    """Marks the open invitation with this token used; InvitationUnusable when there is none
    (another request claimed it first, or it expired or was revoked)."""
    now = timezone.now()
    claimed = (Invitation.objects
               .filter(token_hash=Invitation.digest(token), used_at__isnull=True, revoked_at__isnull=True,
                       expires__gt=now)
               .update(used_at=now))
    if claimed != 1:
        raise InvitationUnusable("this invitation was used, revoked or has expired")
    return Invitation.objects.select_related("team").get(token_hash=Invitation.digest(token))


def _join(invitation: Invitation, user) -> Membership:
    Invitation.objects.filter(pk=invitation.pk).update(used_by=user)
    return membership_set(team=invitation.team, user=user, role=Membership.Role.MEMBER)


# -- a team's invitations, made and revoked by its admins ---------------------------------


def _admin_only(team: Team, actor) -> None:
    if team_role(user=actor, team_id=team.pk) != Membership.Role.ADMIN:
        raise TeamForbidden("only the team's admins may invite people or revoke invitations")


@transaction.atomic
def invitation_create(*, team: Team, actor) -> tuple[Invitation, str]:
    """A new invitation to `team`, open for settings.OPTIML_INVITATION_DAYS days; returns
    it and its raw token, which is not stored anywhere."""
    _admin_only(team, actor)
    token = secrets.token_urlsafe(32)  # 256 random bits, as a share link's
    expires = timezone.now() + timedelta(days=settings.OPTIML_INVITATION_DAYS)
    invitation = Invitation.objects.create(team=team, token_hash=Invitation.digest(token), created_by=actor,
                                           expires=expires)
    return invitation, token


def invitation_revoke(*, team: Team, actor, invitation_id: int) -> bool:
    """Revoke an open invitation to `team`; False when it has no such open invitation."""
    _admin_only(team, actor)
    # Conditional update: revoking twice, or one that is being used, changes one row once.
    return bool(Invitation.objects.filter(pk=invitation_id, team=team, used_at__isnull=True,
                                          revoked_at__isnull=True).update(revoked_at=timezone.now()))
