"""GET /api/demo/: what New session needs to offer demo runs (search.demo_runs)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from search import demo_runs
from search.serializers import DemoChoicesSerializer


class DemoChoicesApi(APIView):
    @extend_schema(responses=DemoChoicesSerializer)
    def get(self, request: Request) -> Response:
        """The tasks that have a demo recording (the GPU and date each was measured on), and
        the evaluator a new run defaults to: demo while no GPU worker has measured a kernel here."""
        return Response(demo_runs.demo_choices())
