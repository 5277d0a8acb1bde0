"""The tasks a new session may use: the suite's (from the harness registry) and those
declared in the browser, which their owner and team see."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.apis import team_of_request
from profiling import selectors, services
from profiling.harness import declared
from profiling.serializers import DeclaredTaskCreateSerializer, DeclaredTaskSerializer, TaskSerializer


class TaskListApi(APIView):
    @extend_schema(responses=TaskSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response([
            {"name": spec.name, "description": spec.description, "sizes": dict(spec.sizes),
             "vendor_ms": spec.vendor.time_ms if spec.vendor else None,
             "naive_source": spec.naive_source, "naive_plan": spec.naive_plan,
             "declared": declared.is_declared_name(spec.name)}
            for spec in selectors.task_specs_visible_to(user=request.user)
        ])


class DeclaredTaskListApi(APIView):
    @extend_schema(responses=DeclaredTaskSerializer(many=True))
    def get(self, request: Request) -> Response:
        """Tasks declared by you or your teams, newest first."""
        tasks = selectors.declared_tasks_visible_to(user=request.user)
        return Response(DeclaredTaskSerializer(tasks, many=True).data)

    @extend_schema(request=DeclaredTaskCreateSerializer, responses={201: DeclaredTaskSerializer})
    def post(self, request: Request) -> Response:
        """Declare a task: sizes, tensors, a numpy reference per output, tolerances. It is
        checked (its reference run at small sizes) before it is stored."""
        form = DeclaredTaskCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        team = team_of_request(request, form.validated_data.get("team"))
        try:
            task = services.declared_task_create(definition=form.definition(), owner=request.user, team=team)
        except declared.DefinitionError as error:
            raise ValidationError({error.field: [str(error)]}) from None
        return Response(DeclaredTaskSerializer(task).data, status=status.HTTP_201_CREATED)


class DeclaredTaskDetailApi(APIView):
    @extend_schema(responses=DeclaredTaskSerializer)
    def get(self, request: Request, name: str) -> Response:
        task = selectors.declared_task_visible(user=request.user, name=name)
        if task is None:
            raise Http404("no such declared task")
        return Response(DeclaredTaskSerializer(task).data)


