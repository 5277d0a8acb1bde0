"""The skill library's REST API, under /api/skills/ (issue 11): the library with its
filters, a card whole with its reviews and comments, a reviewer's approve or reject with
a comment, and the comment thread. Thin: selectors read, services write."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from lineage import selectors, services
from lineage.engine.library import LibraryError
from lineage.models import SkillCard
from lineage.serializers import (
    LineageRowSerializer,
    SkillCardEditSerializer,
    SkillCardRowSerializer,
    SkillCardSerializer,
    SkillCommentCreateSerializer,
    SkillCommentSerializer,
    SkillReviewCreateSerializer,
    SkillReviewSerializer,
    SkillUsageSerializer,
    SkillVersionSerializer,
)
from optiml_web import params
from optiml_web.schema import ErrorSerializer


def _card(card_id: str) -> SkillCard:
    card = (selectors.skill_card_list().prefetch_related("reviews__reviewer", "comments__author")
            .filter(card_id=card_id).first())
    if card is None:
        raise Http404("no such skill card")
    return card


class SkillLibraryApi(APIView):
    @extend_schema(responses=SkillCardRowSerializer(many=True), parameters=[
        OpenApiParameter("intent", str),
        OpenApiParameter("task", str, description="a task in the card's scope"),
        OpenApiParameter("arch", str, description="sm_90, say"),
        OpenApiParameter("status", str, enum=SkillCard.Status.values),
        OpenApiParameter("sort", str, enum=selectors.SKILL_SORTS)])
    def get(self, request: Request) -> Response:
        """The skill library: every card with its intent, measured effect range, the
        lineages and steps behind it, and its status."""
        query = request.query_params
        cards = selectors.skill_library(
            intent=params.query_text(query, "intent", max_length=60),
            task=params.query_text(query, "task", max_length=100),
            arch=params.query_text(query, "arch", max_length=20),
            status=params.query_choice(query, "status", SkillCard.Status.values),
            sort=params.query_choice(query, "sort", selectors.SKILL_SORTS, default="intent"))
        return Response(SkillCardRowSerializer(cards, many=True).data)


class SkillCardApi(APIView):
    @extend_schema(responses=SkillCardSerializer)
    def get(self, request: Request, card_id: str) -> Response:
        """A card whole: intent, anchor, vector (the experts' diffs), preconditions,
        effects, risks, scope, evidence and roundtrip, with its reviews and comments."""
        return Response(SkillCardSerializer(_card(card_id), context={"request": request}).data)

    @extend_schema(request=SkillCardEditSerializer,
                   responses={200: SkillCardSerializer, 403: ErrorSerializer})
    def patch(self, request: Request, card_id: str) -> Response:
        """Edit the card's text (its sentence, the team's notes): a new version with you as
        its author (the library's reviewers). Its code and evidence are not text."""
        _card(card_id)
        if not services.skill_card_can_review(user=request.user):
            raise PermissionDenied("only the library's reviewers edit cards")
        form = SkillCardEditSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            services.skill_card_edit(card_id=card_id, author=request.user, **form.validated_data)
        except ValueError as error:
            raise ValidationError({"detail": str(error)}) from None
        return Response(SkillCardSerializer(_card(card_id), context={"request": request}).data)


class SkillVersionsApi(APIView):
    @extend_schema(responses=SkillVersionSerializer(many=True))
    def get(self, request: Request, card_id: str) -> Response:
        """The card's text history, oldest first, each version with its author, time and
        the diff from the one before."""
        history = selectors.skill_card_history(card=_card(card_id))
        return Response(SkillVersionSerializer(history, many=True).data)


class SkillReviewApi(APIView):
    @extend_schema(request=SkillReviewCreateSerializer,
                   responses={201: SkillReviewSerializer, 403: ErrorSerializer, 409: ErrorSerializer})
    def post(self, request: Request, card_id: str) -> Response:
        """Approve or reject a card, with a comment saying why (the library's reviewers:
        the project's admins). Only a verified card (its roundtrip reproduced its effect)
        can be approved."""
        _card(card_id)
        if not services.skill_card_can_review(user=request.user):
            raise PermissionDenied("only the library's reviewers approve or reject cards")
        form = SkillReviewCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            review = services.skill_card_review(card_id=card_id, reviewer=request.user, **form.validated_data)
        except services.ReviewError as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        except ValueError as error:
            raise ValidationError({"comment": [str(error)]}) from None
        return Response(SkillReviewSerializer(review).data, status=status.HTTP_201_CREATED)


class SkillCommentsApi(APIView):
    @extend_schema(responses=SkillCommentSerializer(many=True))
    def get(self, request: Request, card_id: str) -> Response:
        """The card's comment thread, oldest first."""
        return Response(SkillCommentSerializer(_card(card_id).comments.all(), many=True).data)

    @extend_schema(request=SkillCommentCreateSerializer, responses={201: SkillCommentSerializer})
    def post(self, request: Request, card_id: str) -> Response:
        """Add to the card's thread (anyone signed in)."""
        _card(card_id)
        form = SkillCommentCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            comment = services.skill_comment_create(card_id=card_id, author=request.user,
                                                    text=form.validated_data["text"])
        except ValueError as error:
            raise ValidationError({"text": [str(error)]}) from None
        return Response(SkillCommentSerializer(comment).data, status=status.HTTP_201_CREATED)


class SkillUsageApi(APIView):
    @extend_schema(responses=SkillUsageSerializer(many=True))
    def get(self, request: Request, card_id: str) -> Response:
        """Where the card was applied, in the runs you may see: each node it made, with
        its outcome and a link to it."""
        usage = selectors.skill_card_usage(card=_card(card_id), user=request.user)
        return Response(SkillUsageSerializer(usage, many=True).data)


class SkillLibraryExportApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        """The whole library as one JSON file, for another team to import."""
        return Response(selectors.skill_library_export(),
                        headers={"Content-Disposition": 'attachment; filename="optiml-skill-library.json"'})


class SkillLibraryImportApi(APIView):
    @property
    def max_body_bytes(self) -> int:  # a library with its cards' patterns is megabytes
        return settings.OPTIML_MAX_IMPORT_BYTES

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: OpenApiTypes.OBJECT, 403: ErrorSerializer})
    def post(self, request: Request) -> Response:
        """Import a library file (the library's reviewers): new cards are stored as
        induced, to pass their roundtrip here; cards already stored are skipped."""
        if not services.skill_card_can_review(user=request.user):
            raise PermissionDenied("only the library's reviewers import cards")
        try:
            result = services.skill_library_import(data=request.data, importer=request.user)
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
