from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from accounts.apis import MeApi
from optiml_web import pages
from profiling.apis import DeclaredTaskDetailApi, DeclaredTaskListApi, TaskListApi

api_urlpatterns = [
    path("me/", MeApi.as_view(), name="api-me"),
    path("tasks/", TaskListApi.as_view(), name="api-tasks"),
    path("tasks/declared/", DeclaredTaskListApi.as_view(), name="api-declared-tasks"),
    path("tasks/declared/<str:name>/", DeclaredTaskDetailApi.as_view(), name="api-declared-task"),
    path("", include("search.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    # login/ and logout/ (POST), with templates/registration/login.html.
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include(api_urlpatterns)),
    # The browser pages (optiml_web/pages.py); the front end draws them from the API.
    path("", pages.home, name="home"),
    path("runs/", pages.runs, name="runs"),
    path("runs/new/", pages.new_run, name="new-run"),
    path("runs/<int:run_id>/", pages.run_detail, name="run-page"),
    path("share/<str:token>/", pages.shared_run, name="share-page"),
]
