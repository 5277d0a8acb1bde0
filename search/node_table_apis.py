"""A run's node table as a download, CSV or JSON (search.node_table), for whoever may see
the run: its creator and its team (/api/runs/<id>/nodes.csv), or a share link's holder
(/api/shared/<token>/nodes.csv). Who may see a run is search.apis's rule, used as is."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from search import node_table
from search.apis import SharedApi, _shared_run, _visible_run
from search.models import Run


class NodeTableRowSerializer(serializers.Serializer):
    """One node of a run's node table (search.node_table): CSV has the same columns."""

    id = serializers.IntegerField()
    parent = serializers.IntegerField(allow_null=True)
    source = serializers.CharField(help_text="who proposed it: root, tunable, rewrite:<name>, llm:<model>")
    title = serializers.CharField()
    state = serializers.CharField(help_text="pending | done")
    status = serializers.CharField(help_text="the verdict: passed, rejected, error; blank while pending")
    guard = serializers.CharField(help_text="the check that rejected it, if one did")
    median_ms = serializers.FloatField(allow_null=True, help_text="the median of its timed runs")
    spread_ms = serializers.FloatField(allow_null=True)
    speedup_vs_root = serializers.FloatField(allow_null=True, help_text="the root's time / its time; "
                                             "null unless it passed")
    speedup_vs_vendor = serializers.FloatField(allow_null=True, help_text="the vendor library's time on the "
                                               "GPU it was measured on / its time; null unless it passed "
                                               "and that GPU has a vendor time")
    level = serializers.CharField(help_text="full (the gate) | screen (screened, not profiled); blank while "
                                  "pending")
    depth = serializers.IntegerField(help_text="steps from the root (0)")
    gpu = serializers.CharField(help_text="the GPU it was measured on; blank when not measured")
    reward = serializers.FloatField(allow_null=True, help_text="the search's reward for it (the page's "
                                    "reward column); null while pending")
    visits = serializers.IntegerField(help_text="how often the search went through it")


class NodeTableRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.CharField()
    root_ms = serializers.FloatField(allow_null=True)
    best_ms = serializers.FloatField(allow_null=True)
    vendor_ms = serializers.FloatField(allow_null=True, help_text="the vendor's time on the GPU that "
                                       "measured the best node; null when that GPU has none")
    vendor_gpu = serializers.CharField(allow_null=True, help_text="the GPU the vendor was timed on")
    vendor_source = serializers.CharField(allow_null=True, help_text="where the vendor time came from")


class NodeTableSerializer(serializers.Serializer):
    run = NodeTableRunSerializer()
    columns = serializers.ListField(child=serializers.CharField(), help_text="the CSV's header, in order")
    nodes = NodeTableRowSerializer(many=True)


CSV_RESPONSE = {(200, "text/csv"): OpenApiResponse(
    OpenApiTypes.STR, description=f"a header line ({', '.join(node_table.COLUMNS)}), then a line per node")}
JSON_RESPONSE = {200: OpenApiResponse(NodeTableSerializer,
                                      description="the same rows as the CSV, as objects")}


def _filename(run: Run, extension: str) -> str:
    # Task names are slugs (the registry's and declared.py's rule): nothing to escape.
    return f"optiml-run-{run.pk}-{run.task.name}-nodes.{extension}"


def _csv(run: Run) -> HttpResponse:
    response = HttpResponse(node_table.table_csv(node_table.node_table(run=run)),
                            content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_filename(run, "csv")}"'
    return response


def _json(run: Run) -> Response:
    return Response(node_table.node_table(run=run),
                    headers={"Content-Disposition": f'attachment; filename="{_filename(run, "json")}"'})


class RunNodeTableCsvApi(APIView):
    @extend_schema(responses=CSV_RESPONSE)
    def get(self, request: Request, run_id: int) -> HttpResponse:
        """The run's nodes as CSV: who proposed each, its verdict, median time and speed-ups."""
        return _csv(_visible_run(request, run_id))


class RunNodeTableJsonApi(APIView):
    @extend_schema(responses=JSON_RESPONSE)
    def get(self, request: Request, run_id: int) -> Response:
        """The run's nodes as JSON, with what the speed-ups are over."""
        return _json(_visible_run(request, run_id))


class SharedNodeTableCsvApi(SharedApi):
    @extend_schema(responses=CSV_RESPONSE)
    def get(self, request: Request, token: str) -> HttpResponse:
        """The shared run's nodes as CSV."""
        return _csv(_shared_run(token))


class SharedNodeTableJsonApi(SharedApi):
    @extend_schema(responses=JSON_RESPONSE)
    def get(self, request: Request, token: str) -> Response:
        """The shared run's nodes as JSON."""
        return _json(_shared_run(token))
