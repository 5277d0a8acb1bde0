"""Teams: a user belongs to teams; a run shared with a team is visible to its members.
People join by signing up (open, where the site allows it) or by a team admin's
invitation.

Users are Django's own (django.contrib.auth); this app only groups them. Writes go
through accounts.services (teams) and accounts.joining (sign-up, invitations), reads
through accounts.selectors.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models


class Team(models.Model):
    # Not unique: a name taken by a team one is not in must not be told (issue 34, part 7),
    # so two people may each name a team alike; one person's own teams differ in name
    # (accounts.services.team_create_by). A team is known by its id.
    name = models.CharField(max_length=100)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="teams")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        # A member sees the team's runs and skill library and comments on its cards; a
        # reviewer also approves, rejects, edits and imports the team's skill cards; an
        # admin does all that, manages the team and may pause, stop and share its runs.
        MEMBER = "member"
        REVIEWER = "reviewer"
        ADMIN = "admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="membership_once")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class Invitation(models.Model):
    """A link that lets one person join `team` as a member: by signing up (even where open
    sign-up is off) or, signed in already, as themselves. Made by one of the team's admins,
    used once, open until `expires`. Only the token's SHA-256 is stored, as for a run's
    share link: the raw token is shown once, and a leaked database lets nobody in."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    used_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+")
    used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    @staticmethod
    def digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def __str__(self) -> str:
        return f"invitation {self.pk} to {self.team}"


class SignUp(models.Model):
    """A user who made their own account: when, from which address, and whether by an
    invitation (Invitation.used_by says which) or by open sign-up. The per-address limit
    on open sign-up counts these rows. Users made in the admin or a shell have none."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_up")
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    invited = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["ip_address", "created"], name="sign_up_by_address")]

    def __str__(self) -> str:
        return f"{self.user} signed up {self.created:%Y-%m-%d}"


class SignInFailures(models.Model):
    """Failed sign-ins counted under one key (accounts.signing_in says which keys): how many
    since the count last began, and when the latest was. accounts.throttle turns the two
    into a wait. A row whose latest failure is older than OPTIML_LOGIN_MEMORY_S is
    forgotten (its count starts again, and it is deleted with the next failure anywhere)."""

    key = models.CharField(max_length=250, unique=True)
    failures = models.PositiveIntegerField(default=0)
    latest = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.failures} failed sign-ins under {self.key}"
