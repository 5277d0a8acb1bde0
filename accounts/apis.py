"""Who am I: the signed-in user and their teams."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.selectors import user_teams


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
