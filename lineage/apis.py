"""The skill library's REST API, under /api/skills/ (issue 11): the library with its
filters, a card whole with its reviews and comments, a reviewer's approve or reject with
a comment, and the comment thread. Thin: selectors read, services write.

Every endpoint works on one library: the project's default one, or a team's with
`?team=<id>` (its members read and comment; its admins and reviewers review, edit and
import). A team's library is a 404 to anyone outside the team."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from lineage import selectors, services
from lineage.engine.library import LibraryError, request_schema
from lineage.models import SkillCard
from lineage.selectors import Library
from lineage.serializers import (
    LineageRowSerializer,
    SkillCardEditSerializer,
    SkillCardRowSerializer,
    SkillCardSerializer,
    SkillCommentCreateSerializer,
    SkillCommentSerializer,
    SkillCopySerializer,
    SkillLibraryChoiceSerializer,
    SkillReviewCreateSerializer,
    SkillReviewSerializer,
    SkillUsageSerializer,
    SkillVersionSerializer,
)
from optiml_web import params
from optiml_web.schema import NOT_BLANK_PATTERN, ErrorSerializer
from profiling.serialization import data_for_users

TEAM = OpenApiParameter("team", int, description="a team's library (left out: the project's default one)")


class CardConflict(APIException):
    """A sound request that the card's state refuses."""

    status_code = status.HTTP_409_CONFLICT


def _library(request: Request) -> Library:
    library = selectors.skill_library_open(user=request.user,
                                           team_id=params.query_int(request.query_params, "team"))
    if library is None:
        raise Http404("no such skill library")
    return library


def _card(card_id: str, library: Library) -> SkillCard:
    card = (selectors.skill_card_list(team=library.team).select_related("team", "copied_from")
            .prefetch_related("reviews__reviewer", "comments__author")
            .filter(card_id=card_id).first())
    if card is None:
        raise Http404("no such skill card")
    return card


def _reviewer(request: Request, library: Library, doing: str) -> None:
    if not services.skill_card_can_review(user=request.user, team=library.team):
        who = "the team's admins and reviewers" if library.team else "the library's reviewers"
        raise PermissionDenied(f"only {who} {doing}")


def _whole(request: Request, card_id: str, library: Library) -> Response:
    return Response(SkillCardSerializer(_card(card_id, library),
                                        context={"request": request, "library": library}).data)


class SkillLibrariesApi(APIView):
    @extend_schema(responses=SkillLibraryChoiceSerializer(many=True))
    def get(self, request: Request) -> Response:
        """The libraries you read: the project's default one, then each of your teams',
        with its number of cards and your role."""
        return Response(SkillLibraryChoiceSerializer(selectors.skill_libraries_of(user=request.user),
                                                     many=True).data)


class SkillLibraryCopyApi(APIView):
    @extend_schema(request=SkillCopySerializer,
                   responses={201: OpenApiTypes.OBJECT, 403: ErrorSerializer, 404: ErrorSerializer})
    def post(self, request: Request) -> Response:
        """Copy the default library's cards (all, or those named) into a team's library
        (its admins and reviewers). Cards the team has are skipped; copies keep their
        evidence and roundtrip, not the project's review: the team reviews its own."""
        form = SkillCopySerializer(data=request.data)
        form.is_valid(raise_exception=True)
        library = selectors.skill_library_open(user=request.user, team_id=form.validated_data["team"])
        if library is None:
            raise Http404("no such team")
        _reviewer(request, library, "copy cards into its library")
        try:
            result = services.skill_library_copy(team=library.team, actor=request.user,
                                                 card_ids=form.validated_data.get("cards"))
        except SkillCard.DoesNotExist as error:
            raise ValidationError({"cards": [str(error)]}) from None
        return Response(result, status=status.HTTP_201_CREATED)


class SkillLibraryApi(APIView):
    @extend_schema(responses={200: SkillCardRowSerializer(many=True), 404: ErrorSerializer}, parameters=[
        TEAM, OpenApiParameter("intent", str),
        OpenApiParameter("task", str, description="a task in the card's scope"),
        OpenApiParameter("arch", str, description="sm_90, say"),
        OpenApiParameter("status", str, enum=SkillCard.Status.values),
        OpenApiParameter("sort", str, enum=selectors.SKILL_SORTS)])
    def get(self, request: Request) -> Response:
        """The skill library: every card with its intent, measured effect range, the
        lineages and steps behind it, and its status."""
        query = request.query_params
        library = _library(request)
        cards = selectors.skill_library(
            team=library.team, user=request.user,
            intent=params.query_text(query, "intent", max_length=60),
            task=params.query_text(query, "task", max_length=100),
            arch=params.query_text(query, "arch", max_length=20),
            status=params.query_choice(query, "status", SkillCard.Status.values),
            sort=params.query_choice(query, "sort", selectors.SKILL_SORTS, default="intent"))
        return Response(SkillCardRowSerializer(cards, many=True).data)


class SkillCardApi(APIView):
    @extend_schema(responses=SkillCardSerializer, parameters=[TEAM])
    def get(self, request: Request, card_id: str) -> Response:
        """A card whole: intent, anchor, vector (the experts' diffs), preconditions,
        effects, risks, scope, evidence and roundtrip, with its reviews and comments."""
        return _whole(request, card_id, _library(request))

    @extend_schema(request=SkillCardEditSerializer, parameters=[TEAM],
                   responses={200: SkillCardSerializer, 403: ErrorSerializer, 409: OpenApiResponse(
                       ErrorSerializer, description="the card's text is that already: nothing to change")})
    def patch(self, request: Request, card_id: str) -> Response:
        """Edit the card's text (its sentence, the team's notes): a new version with you as
        its author (the library's reviewers). Its code and evidence are not text."""
        library = _library(request)
        _card(card_id, library)
        _reviewer(request, library, "edit cards")
        form = SkillCardEditSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            services.skill_card_edit(card_id=card_id, author=request.user, team=library.team,
                                     **form.validated_data)
        except services.SkillCardUnchanged as error:  # sound, refused by the card's state: 409
            raise CardConflict(str(error)) from None
        except ValueError as error:
            raise ValidationError({"detail": str(error)}) from None
        return _whole(request, card_id, library)


class SkillVersionsApi(APIView):
    @extend_schema(responses=SkillVersionSerializer(many=True), parameters=[TEAM])
    def get(self, request: Request, card_id: str) -> Response:
        """The card's text history, oldest first, each version with its author, time and
        the diff from the one before."""
        history = selectors.skill_card_history(card=_card(card_id, _library(request)))
        return Response(SkillVersionSerializer(history, many=True).data)


class SkillReviewApi(APIView):
    @extend_schema(request=SkillReviewCreateSerializer, parameters=[TEAM],
                   responses={201: SkillReviewSerializer, 403: ErrorSerializer, 409: ErrorSerializer})
    def post(self, request: Request, card_id: str) -> Response:
        """Approve or reject a card, with a comment saying why (the library's reviewers:
        the project's admins for the default library, a team's admins and reviewers for
        the team's). Only a verified card (its roundtrip reproduced its effect) can be
        approved."""
        library = _library(request)
        _card(card_id, library)
        _reviewer(request, library, "approve or reject cards")
        form = SkillReviewCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            review = services.skill_card_review(card_id=card_id, reviewer=request.user, team=library.team,
                                                **form.validated_data)
        except services.ReviewError as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        except ValueError as error:
            raise ValidationError({"comment": [str(error)]}) from None
        return Response(SkillReviewSerializer(review).data, status=status.HTTP_201_CREATED)


class SkillCommentsApi(APIView):
    @extend_schema(responses=SkillCommentSerializer(many=True), parameters=[TEAM])
    def get(self, request: Request, card_id: str) -> Response:
        """The card's comment thread, oldest first."""
        comments = _card(card_id, _library(request)).comments.all()
        return Response(SkillCommentSerializer(comments, many=True).data)

    @extend_schema(request=SkillCommentCreateSerializer, responses={201: SkillCommentSerializer},
                   parameters=[TEAM])
    def post(self, request: Request, card_id: str) -> Response:
        """Add to the card's thread (anyone who reads the library)."""
        library = _library(request)
        _card(card_id, library)
        form = SkillCommentCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            comment = services.skill_comment_create(card_id=card_id, author=request.user, team=library.team,
                                                    text=form.validated_data["text"])
        except ValueError as error:
            raise ValidationError({"text": [str(error)]}) from None
        return Response(SkillCommentSerializer(comment).data, status=status.HTTP_201_CREATED)


class SkillUsageApi(APIView):
    @extend_schema(responses=SkillUsageSerializer(many=True), parameters=[TEAM])
    def get(self, request: Request, card_id: str) -> Response:
        """Where the card was applied, in the runs you may see: each node it made, with
        its outcome and a link to it."""
        usage = selectors.skill_card_usage(card=_card(card_id, _library(request)), user=request.user)
        return Response(SkillUsageSerializer(usage, many=True).data)


class SkillEffectsApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT, parameters=[TEAM])
    def get(self, request: Request, card_id: str) -> Response:
        """The card's measured effects for its chart: each lineage's steps of its intent,
        each run's nodes it made (that you may see), its roundtrip's failed trials; and
        the median metric deltas per lineage."""
        effects = selectors.skill_card_effects(card=_card(card_id, _library(request)), user=request.user)
        return Response(data_for_users(effects))


class SkillLibraryExportApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: ErrorSerializer}, parameters=[TEAM])
    def get(self, request: Request) -> Response:
        """The whole library as one JSON file, for another team to import."""
        return Response(selectors.skill_library_export(team=_library(request).team),
                        headers={"Content-Disposition": 'attachment; filename="optiml-skill-library.json"'})


class SkillLibraryImportApi(APIView):
    @property
    def max_body_bytes(self) -> int:  # a library with its cards' patterns is megabytes
        return settings.OPTIML_MAX_IMPORT_BYTES

    @extend_schema(request={"application/json": request_schema(not_blank=NOT_BLANK_PATTERN)},
                   parameters=[TEAM],
                   responses={201: OpenApiTypes.OBJECT, 403: ErrorSerializer, 404: ErrorSerializer})
    def post(self, request: Request) -> Response:
        """Import a library file into the library (its reviewers): new cards are stored as
        induced, to pass their roundtrip here; cards already stored are skipped."""
        library = _library(request)
        _reviewer(request, library, "import cards")
        try:
            result = services.skill_library_import(data=request.data, importer=request.user,
                                                   team=library.team)
        except LibraryError as error:
            raise ValidationError({error.where: [error.message]}) from None
        return Response(result, status=status.HTTP_201_CREATED)


class LineageListApi(APIView):
    @extend_schema(responses=LineageRowSerializer(many=True))
    def get(self, request: Request) -> Response:
        """The stored lineages (walks of expert kernels), newest first."""
        rows = selectors.lineage_list()
        return Response([{"id": r.pk, "task": r.task.name, "gpu": r.gpu, "origin": r.origin,
                          "complete": r.complete, "states": r.state_count,
                          "page": f"/lineages/{r.pk}/"} for r in rows])


class LineageGraphApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, lineage_id: int) -> Response:
        """A lineage as a graph: its states as nodes (time, status), the forward steps as
        edges with their diff and metric deltas, rejected attempts marked, and the path
        from the plain attempt to the expert."""
        lineage = selectors.lineage_get(pk=lineage_id)
        if lineage is None:
            raise Http404("no such lineage")
        return Response(selectors.lineage_graph(lineage=lineage))
