"""Who am I: the signed-in user and their teams; the team a request may name; and the
teams page's API (create a team, add members by username, set roles, invite by link)."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import joining, services
from accounts.models import Invitation, Membership, Team
from accounts.names import DISPLAY_NAME_PATTERN
from accounts.selectors import team_invitations, team_members, team_role, user_team_ids, user_teams
from optiml_web.params import TextChoiceField, TextField
from optiml_web.schema import BAD_REQUEST_SCHEMA


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


# --- teams in the app: create one, add people by username, set their roles -------------

class MemberSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class TeamRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    role = serializers.CharField(help_text="your role in it: admin or member")
    members = MemberSerializer(many=True)


@extend_schema_field({"type": "string", "pattern": DISPLAY_NAME_PATTERN})
class TeamNameField(TextField):
    """A team's name, documented as the service checks it (services.team_create_by): at
    most the column's length, not blank, no control or text-direction characters."""

    def __init__(self, **kwargs) -> None:
        super().__init__(max_length=services.TEAM_NAME_MAX_LENGTH, **kwargs)


class TeamCreateSerializer(serializers.Serializer):
    name = TeamNameField()


class MemberAddSerializer(serializers.Serializer):
    username = TextField(max_length=150)
    role = TextChoiceField(choices=Membership.Role.choices, default=Membership.Role.MEMBER)


class MemberRoleSerializer(serializers.Serializer):
    role = TextChoiceField(choices=Membership.Role.choices)


# The PATCH's body as the schema shows it: drf-spectacular documents a PATCH's serializer
# as partial (every field optional), but setting a role needs the role.
MEMBER_ROLE_BODY = {"application/json": {
    "type": "object", "properties": {"role": {"type": "string", "enum": list(Membership.Role.values)}},
    "required": ["role"]}}


def _team_row(team: Team, user) -> dict:
    return {"id": team.pk, "name": team.name, "role": team_role(user=user, team_id=team.pk),
            "members": team_members(team=team)}


def _my_team(request: Request, team_id: int) -> Team:
    """A team the user belongs to; anybody else's answers like one that does not exist."""
    if team_role(user=request.user, team_id=team_id) is None:
        raise NotFound("no such team")
    return Team.objects.get(pk=team_id)


class TeamConflictError(ValidationError):
    """A field's error, as a 400's body, with 409 Conflict: the request was sound."""

    status_code = status.HTTP_409_CONFLICT


NAME_TAKEN = OpenApiResponse(BAD_REQUEST_SCHEMA, description=(
    'you are in a team of that name already ({"name": ["..."]})'))
MEMBER_ALREADY = OpenApiResponse(BAD_REQUEST_SCHEMA, description=(
    'they are in the team already ({"username": ["..."]})'))
LAST_ADMIN = OpenApiResponse(BAD_REQUEST_SCHEMA, description=(
    'the team would be left without an admin: make someone else admin first ({"role": ["..."]})'))


def _team_call(call):
    try:
        return call()
    except services.TeamForbidden as error:
        raise PermissionDenied(str(error)) from None
    except services.MemberNotFound as error:  # no such user, or not in the team: one answer
        raise NotFound(str(error)) from None
    except services.TeamConflict as error:  # a sound request the team's state refuses: 409, not 400
        raise TeamConflictError({error.field: [str(error)]}) from None
    except services.TeamError as error:
        raise ValidationError({error.field: [str(error)]}) from None


class TeamListApi(APIView):
    """The teams you are in, with their members; POST makes a team, you its first admin."""

    @extend_schema(responses=TeamRowSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response([_team_row(team, request.user) for team in user_teams(user=request.user)])

    @extend_schema(request=TeamCreateSerializer, responses={201: TeamRowSerializer, 409: NAME_TAKEN})
    def post(self, request: Request) -> Response:
        form = TeamCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        name = form.validated_data["name"]
        team = _team_call(lambda: services.team_create_by(name=name, user=request.user))
        return Response(_team_row(team, request.user), status=status.HTTP_201_CREATED)


class TeamDetailApi(APIView):
    @extend_schema(responses=TeamRowSerializer)
    def get(self, request: Request, team_id: int) -> Response:
        return Response(_team_row(_my_team(request, team_id), request.user))


class TeamMembersApi(APIView):
    """POST: an admin adds, by username, someone in a team with them already, as member or
    admin (anyone else is invited by a link: services.member_add)."""

    @extend_schema(request=MemberAddSerializer, responses={201: TeamRowSerializer, 409: MEMBER_ALREADY})
    def post(self, request: Request, team_id: int) -> Response:
        team = _my_team(request, team_id)
        form = MemberAddSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        _team_call(lambda: services.member_add(team=team, actor=request.user, **form.validated_data))
        return Response(_team_row(team, request.user), status=status.HTTP_201_CREATED)


class TeamMemberApi(APIView):
    """PATCH: an admin sets a member's role. DELETE: an admin removes a member, or a
    member leaves. A team always keeps an admin."""

    @extend_schema(request=MEMBER_ROLE_BODY, responses={200: TeamRowSerializer, 409: LAST_ADMIN})
    def patch(self, request: Request, team_id: int, username: str) -> Response:
        team = _my_team(request, team_id)
        form = MemberRoleSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        _team_call(lambda: services.member_set_role(team=team, actor=request.user, username=username,
                                                    role=form.validated_data["role"]))
        return Response(_team_row(team, request.user))

    @extend_schema(responses={204: None, 409: LAST_ADMIN})
    def delete(self, request: Request, team_id: int, username: str) -> Response:
        team = _my_team(request, team_id)
        _team_call(lambda: services.member_remove(team=team, actor=request.user, username=username))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- invitations: a team's admins make links that let one person sign up into the team --

class InvitationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    created_by = serializers.CharField(allow_null=True, help_text="the admin who made it")
    created = serializers.DateTimeField()
    expires = serializers.DateTimeField(help_text="after this the link opens nothing")


class InvitationCreatedSerializer(InvitationSerializer):
    url = serializers.URLField(help_text="the link to send: shown this once, never stored (only its hash is)")


def _invitation_row(invitation: Invitation) -> dict:
    return {"id": invitation.pk, "created": invitation.created, "expires": invitation.expires,
            "created_by": invitation.created_by.get_username() if invitation.created_by else None}


class TeamInvitationsApi(APIView):
    """GET: the team's open invitations (to its members). POST: an admin makes one; whoever
    opens its link signs up as a member of the team, open sign-up or not. Used once, open
    for settings.OPTIML_INVITATION_DAYS days."""

    @extend_schema(responses=InvitationSerializer(many=True))
    def get(self, request: Request, team_id: int) -> Response:
        team = _my_team(request, team_id)
        return Response([_invitation_row(i) for i in team_invitations(team=team)])

    @extend_schema(request=None, responses={201: InvitationCreatedSerializer})
    def post(self, request: Request, team_id: int) -> Response:
        team = _my_team(request, team_id)
        invitation, token = _team_call(lambda: joining.invitation_create(team=team, actor=request.user))
        url = request.build_absolute_uri(reverse("invitation", args=[token]))
        return Response({**_invitation_row(invitation), "url": url}, status=status.HTTP_201_CREATED)


class TeamInvitationApi(APIView):
    """DELETE: an admin revokes an open invitation; its link then opens nothing."""

    @extend_schema(responses={204: None})
    def delete(self, request: Request, team_id: int, invitation_id: int) -> Response:
        team = _my_team(request, team_id)
        if not _team_call(lambda: joining.invitation_revoke(team=team, actor=request.user,
                                                            invitation_id=invitation_id)):
            raise NotFound("no such open invitation")
        return Response(status=status.HTTP_204_NO_CONTENT)
