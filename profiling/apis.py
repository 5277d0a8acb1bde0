"""The suite's tasks, as a new session's form offers them (from the harness registry)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from profiling.harness import tasks as task_registry


class TaskSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    sizes = serializers.DictField(child=serializers.IntegerField())
    vendor_ms = serializers.FloatField(allow_null=True, help_text="the vendor library on the H200")
    naive_source = serializers.CharField()
    naive_plan = serializers.JSONField()


class TaskListApi(APIView):
    @extend_schema(responses=TaskSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response([
            {"name": spec.name, "description": spec.description, "sizes": dict(spec.sizes),
             "vendor_ms": spec.vendor.time_ms if spec.vendor else None,
             "naive_source": spec.naive_source, "naive_plan": spec.naive_plan}
            for spec in task_registry.all_tasks()
        ])
