"""The run API's routes (mounted under /api/ by optiml_web/urls.py)."""

from django.urls import path

from search import apis

urlpatterns = [
    path("sources/", apis.SourceListApi.as_view(), name="api-sources"),
    path("kernels/write/", apis.KernelWriteApi.as_view(), name="api-kernel-write"),
    path("runs/", apis.RunListApi.as_view(), name="api-runs"),
    path("runs/import/", apis.RunImportApi.as_view(), name="api-run-import"),
    path("runs/<int:run_id>/", apis.RunDetailApi.as_view(), name="api-run"),
    path("runs/<int:run_id>/nodes/", apis.RunNodesApi.as_view(), name="api-run-nodes"),
    path("runs/<int:run_id>/nodes/<int:node_id>/", apis.RunNodeApi.as_view(), name="api-run-node"),
    path("runs/<int:run_id>/nodes/<int:node_id>/ncu-report/", apis.RunNodeReportApi.as_view(),
         name="api-run-node-report"),
    path("runs/<int:run_id>/pause/", apis.RunControlApi.as_view(control="pause"), name="api-run-pause"),
    path("runs/<int:run_id>/resume/", apis.RunControlApi.as_view(control="resume"), name="api-run-resume"),
    path("runs/<int:run_id>/stop/", apis.RunControlApi.as_view(control="stop"), name="api-run-stop"),
    path("runs/<int:run_id>/events/", apis.RunEventsApi.as_view(), name="api-run-events"),
    path("runs/<int:run_id>/shares/", apis.RunSharesApi.as_view(), name="api-run-shares"),
    path("runs/<int:run_id>/shares/<int:share_id>/", apis.RunShareApi.as_view(), name="api-run-share"),
    path("runs/<int:run_id>/export/", apis.RunExportApi.as_view(), name="api-run-export"),
    path("shared/<str:token>/", apis.SharedRunApi.as_view(), name="api-shared"),
    path("shared/<str:token>/events/", apis.SharedEventsApi.as_view(), name="api-shared-events"),
    path("shared/<str:token>/nodes/<int:node_id>/", apis.SharedNodeApi.as_view(), name="api-shared-node"),
    path("shared/<str:token>/nodes/<int:node_id>/ncu-report/", apis.SharedNodeReportApi.as_view(),
         name="api-shared-node-report"),
]
