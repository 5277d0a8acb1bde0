"""Teams: a user belongs to teams; a run shared with a team is visible to its members.

Users are Django's own (django.contrib.auth); this app only groups them. Writes go
through accounts.services, reads through accounts.selectors.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
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
