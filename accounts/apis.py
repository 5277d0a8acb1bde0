"""Who am I: the signed-in user and their teams; and the team a request may name."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import Team
from accounts.selectors import user_team_ids, user_teams


class TeamSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    teams = TeamSerializer(many=True)


class MeApi(APIView):
    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        teams = [{"id": team.pk, "name": team.name} for team in user_teams(user=request.user)]
        return Response({"username": request.user.get_username(), "teams": teams})


def team_of_request(request: Request, team_id: int | None) -> Team | None:
    """The team a create request names, which must be one of the user's (a 400 on the
    `team` field otherwise); None when it names none."""
    if team_id is None:
        return None
    if team_id not in user_team_ids(user=request.user):
        raise ValidationError({"team": [f"you are not a member of team {team_id}"]})
    return Team.objects.get(pk=team_id)
