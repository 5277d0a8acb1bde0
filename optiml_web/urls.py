from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts import views as accounts_views
from accounts.apis import (
    MeApi,
    TeamDetailApi,
    TeamInvitationApi,
    TeamInvitationsApi,
    TeamListApi,
    TeamMemberApi,
    TeamMembersApi,
)
from lineage import urls as lineage_urls
from optiml_web import pages, params
from profiling.apis import DeclaredTaskDetailApi, DeclaredTaskListApi, TaskListApi

params.register_converters()  # <id:...>, <token:...>, <task:...>: before any route below

# Under /api/, even Django's own error answers are JSON (optiml_web/errors.py).
handler400 = "optiml_web.errors.bad_request"
handler404 = "optiml_web.errors.not_found"
handler500 = "optiml_web.errors.server_error"

api_urlpatterns = [
    path("me/", MeApi.as_view(), name="api-me"),
    path("teams/", TeamListApi.as_view(), name="api-teams"),
    path("teams/<id:team_id>/", TeamDetailApi.as_view(), name="api-team"),
    path("teams/<id:team_id>/members/", TeamMembersApi.as_view(), name="api-team-members"),
    path("teams/<id:team_id>/members/<username:username>/", TeamMemberApi.as_view(), name="api-team-member"),
    path("teams/<id:team_id>/invitations/", TeamInvitationsApi.as_view(), name="api-team-invitations"),
    path("teams/<id:team_id>/invitations/<id:invitation_id>/", TeamInvitationApi.as_view(),
         name="api-team-invitation"),
    path("tasks/", TaskListApi.as_view(), name="api-tasks"),
    path("tasks/declared/", DeclaredTaskListApi.as_view(), name="api-declared-tasks"),
    path("tasks/declared/<task:name>/", DeclaredTaskDetailApi.as_view(), name="api-declared-task"),
    path("", include("search.urls")),
    path("skills/", include("lineage.urls")),
    path("lineages/", include(lineage_urls.lineage_patterns)),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's settings as a script file of its own, not an
    # inline <script>, which the Content-Security-Policy would refuse.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    # Signing in and out (POST), and a signed-in user changing their own password; no
    # password reset: with no mail set up, Django's reset views would only fail. Sign-in is
    # throttled (accounts/signing_in.py, settings.OPTIML_LOGIN_*). Signing up: open
    # where settings.OPTIML_OPEN_SIGN_UP says so, else by a team admin's invitation link.
    path("accounts/login/", accounts_views.SignInView.as_view(), name="login"),
    path("accounts/sign-up/", accounts_views.SignUpView.as_view(), name="sign-up"),
    path("accounts/invitations/<token:token>/", accounts_views.InvitationView.as_view(), name="invitation"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", accounts_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password/done/",
         auth_views.PasswordChangeDoneView.as_view(template_name="registration/password_changed.html"),
         name="password_change_done"),
    path("api/", include(api_urlpatterns)),
    # The browser pages (optiml_web/pages.py); the front end draws them from the API.
    path("", pages.home, name="home"),
    path("welcome/", pages.welcome, name="welcome"),
    path("runs/", pages.runs, name="runs"),
    path("runs/new/", pages.new_run, name="new-run"),
    path("runs/compare/", pages.compare_runs, name="compare-page"),
    path("runs/<id:run_id>/", pages.run_detail, name="run-page"),
    path("share/<token:token>/", pages.shared_run, name="share-page"),
    path("teams/", pages.teams, name="teams-page"),
    path("skills/", pages.skills, name="skills-page"),
    path("skills/<card:card_id>/", pages.skill_detail, name="skill-page"),
    path("lineages/<id:lineage_id>/", pages.lineage_detail, name="lineage-page"),
]
