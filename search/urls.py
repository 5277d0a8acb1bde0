"""The run API's routes (mounted under /api/ by optiml_web/urls.py). `<id:...>` takes only
ids a database can hold and `<token:...>` only share-token characters (optiml_web.params):
anything else is a 404 before a view runs."""

from django.urls import path

from optiml_web import params
from search import apis, demo_apis, node_table_apis, preflight_apis

params.register_converters()

urlpatterns = [
    path("sources/", apis.SourceListApi.as_view(), name="api-sources"),
    path("demo/", demo_apis.DemoChoicesApi.as_view(), name="api-demo"),
    path("kernels/write/", apis.KernelWriteApi.as_view(), name="api-kernel-write"),
    path("kernels/write/<id:job_id>/", apis.KernelWriteJobApi.as_view(), name="api-kernel-write-job"),
    path("runs/", apis.RunListApi.as_view(), name="api-runs"),
    path("runs/import/", apis.RunImportApi.as_view(), name="api-run-import"),
    path("runs/preflight/", preflight_apis.RunPreflightApi.as_view(), name="api-run-preflight"),
    path("runs/compare/", apis.RunCompareApi.as_view(), name="api-run-compare"),
    path("runs/<id:run_id>/", apis.RunDetailApi.as_view(), name="api-run"),
    path("runs/<id:run_id>/nodes/", apis.RunNodesApi.as_view(), name="api-run-nodes"),
    path("runs/<id:run_id>/nodes.csv", node_table_apis.RunNodeTableCsvApi.as_view(),
         name="api-run-nodes-csv"),
    path("runs/<id:run_id>/nodes.json", node_table_apis.RunNodeTableJsonApi.as_view(),
         name="api-run-nodes-json"),
    path("runs/<id:run_id>/nodes/<id:node_id>/", apis.RunNodeApi.as_view(), name="api-run-node"),
    path("runs/<id:run_id>/nodes/<id:node_id>/ncu-report/", apis.RunNodeReportApi.as_view(),
         name="api-run-node-report"),
    path("runs/<id:run_id>/pause/", apis.RunControlApi.as_view(control="pause"), name="api-run-pause"),
    path("runs/<id:run_id>/resume/", apis.RunControlApi.as_view(control="resume"), name="api-run-resume"),
    path("runs/<id:run_id>/stop/", apis.RunControlApi.as_view(control="stop"), name="api-run-stop"),
    path("runs/<id:run_id>/events/", apis.RunEventsApi.as_view(), name="api-run-events"),
    path("runs/<id:run_id>/shares/", apis.RunSharesApi.as_view(), name="api-run-shares"),
    path("runs/<id:run_id>/shares/<id:share_id>/", apis.RunShareApi.as_view(), name="api-run-share"),
    path("runs/<id:run_id>/export/", apis.RunExportApi.as_view(), name="api-run-export"),
    path("shared/<token:token>/", apis.SharedRunApi.as_view(), name="api-shared"),
    path("shared/<token:token>/events/", apis.SharedEventsApi.as_view(), name="api-shared-events"),
    path("shared/<token:token>/nodes.csv", node_table_apis.SharedNodeTableCsvApi.as_view(),
         name="api-shared-nodes-csv"),
    path("shared/<token:token>/nodes.json", node_table_apis.SharedNodeTableJsonApi.as_view(),
         name="api-shared-nodes-json"),
    path("shared/<token:token>/nodes/<id:node_id>/", apis.SharedNodeApi.as_view(), name="api-shared-node"),
    path("shared/<token:token>/nodes/<id:node_id>/ncu-report/", apis.SharedNodeReportApi.as_view(),
         name="api-shared-node-report"),
]
