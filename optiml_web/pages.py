"""The browser pages. Thin: each renders a template that names its page; the front end
(frontend/, built into frontend/dist/ and served as static files) draws everything from
the API. Access to a run is the API's to decide: a page only asks for a signed-in user,
and the share page not even that (its token is checked by /api/shared/<token>/)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import ensure_csrf_cookie

from accounts.selectors import user_teams
from search.selectors import runs_visible_to


def home(request: HttpRequest) -> HttpResponse:
    """The runs list; for a signed-in user who can see no run yet, the first-run page."""
    if request.user.is_authenticated and not runs_visible_to(user=request.user).exists():
        return redirect("welcome")
    return redirect("runs")


@login_required
def welcome(request: HttpRequest) -> HttpResponse:
    """The first-run page: what to do next, after sign-up or with no runs yet. Server-drawn
    text, no API: it says what this site's settings make true (the evaluator)."""
    return render(request, "welcome.html", {
        "page": "welcome", "teams": user_teams(user=request.user),
        "recorded": settings.OPTIML_EVALUATOR.startswith("recorded:"),
        "has_runs": runs_visible_to(user=request.user).exists()})


@login_required
@ensure_csrf_cookie
def runs(request: HttpRequest) -> HttpResponse:
    return render(request, "runs.html", {"page": "runs"})


@login_required
@ensure_csrf_cookie
def new_run(request: HttpRequest) -> HttpResponse:
    return render(request, "new_run.html", {"page": "new-run"})


@login_required
@ensure_csrf_cookie
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    return render(request, "run.html", {"page": "run", "run_id": run_id})


@login_required
@ensure_csrf_cookie
def compare_runs(request: HttpRequest) -> HttpResponse:
    return render(request, "compare.html", {"page": "compare"})


@login_required
@ensure_csrf_cookie
def teams(request: HttpRequest) -> HttpResponse:
    return render(request, "teams.html", {"page": "teams"})


@login_required
@ensure_csrf_cookie
def skills(request: HttpRequest) -> HttpResponse:
    return render(request, "skills.html", {"page": "skills"})


@login_required
@ensure_csrf_cookie
def skill_detail(request: HttpRequest, card_id: str) -> HttpResponse:
    return render(request, "skill.html", {"page": "skill", "card_id": card_id})


@login_required
@ensure_csrf_cookie
def lineage_detail(request: HttpRequest, lineage_id: int) -> HttpResponse:
    return render(request, "lineage.html", {"page": "lineage", "lineage_id": lineage_id})


def shared_run(request: HttpRequest, token: str) -> HttpResponse:
    return render(request, "share.html", {"page": "share", "token": token})
