"""The joining pages: sign-up, an invitation's page, the sign-in page that links to
sign-up where it is open, and a signed-in user's password change (its current password
checked under the sign-in throttle). Thin: the form is Django's UserCreationForm (a username nobody
has in any case, the password twice, AUTH_PASSWORD_VALIDATORS); the rules are
accounts.joining's. A refusal is a page that says why (404 where there is nothing here
for this visitor, 429 for an address that made its accounts for the hour), never a 500.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import forms as auth_forms
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import UserCreationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from accounts import joining, signing_in
from accounts.selectors import invitation_open, team_role

# The password was set a moment ago: Django's own backend signs the new user in. (The
# throttle backend, first in AUTHENTICATION_BACKENDS, only refuses; it never signs in.)
SIGN_IN_BACKEND = "django.contrib.auth.backends.ModelBackend"
GONE = ("This invitation cannot be used",
        "The link was used already, revoked, or has expired. Ask a team admin for a new one.")


class SignInView(auth_views.LoginView):
    """Django's sign-in page, with a link to sign-up where it is open."""

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "sign_up_open": settings.OPTIML_OPEN_SIGN_UP}


class PasswordChangeForm(auth_forms.PasswordChangeForm):
    """Django's, with the current password checked under the sign-in throttle: a session
    left open, or stolen, is no unthrottled way to guess its user's password."""

    def __init__(self, user, *args, request: HttpRequest, **kwargs) -> None:
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self) -> str:
        username = self.user.get_username()
        refusal = signing_in.sign_in_attempt(request=self.request, username=username)
        if refusal is not None:
            wait = timedelta(seconds=math.ceil(refusal.seconds_left))
            raise ValidationError(f"Too many wrong passwords: try again in {wait} (hours:minutes:seconds).",
                                  code="throttled")
        old_password = super().clean_old_password()  # a wrong one stays counted
        signing_in.sign_in_success_record(request=self.request, username=username)
        return old_password


class PasswordChangeView(auth_views.PasswordChangeView):
    """/accounts/password/: a signed-in user changes their own password."""

    form_class = PasswordChangeForm
    template_name = "registration/password_change.html"

    def get_form_kwargs(self) -> dict:
        return {**super().get_form_kwargs(), "request": self.request}


class SignUpView(View):
    """/accounts/sign-up/: anyone makes an account, where settings.OPTIML_OPEN_SIGN_UP
    says so (a 404 that says how else to join where it does not)."""

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not settings.OPTIML_OPEN_SIGN_UP:
            return _refused(request, "Sign-up is closed",
                            "This site does not take sign-ups. A team admin can send you an "
                            "invitation link; with it you can make an account here.", status=404)
        if request.user.is_authenticated:
            return redirect("welcome")
        return super().dispatch(request, *args, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        return render(request, "registration/sign_up.html", {"form": UserCreationForm()})

    def post(self, request: HttpRequest) -> HttpResponse:
        form = UserCreationForm(request.POST)
        if not form.is_valid():
            return render(request, "registration/sign_up.html", {"form": form})
        return _sign_up(request, form, "registration/sign_up.html", {})


class InvitationView(View):
    """/accounts/invitations/<token>/: a visitor signs up as a member of the invitation's
    team, open sign-up or not; a signed-in user joins the team as themselves."""

    def dispatch(self, request: HttpRequest, token: str) -> HttpResponse:
        self.invitation = invitation_open(token=token)
        if self.invitation is None:
            return _refused(request, *GONE, status=404)
        return super().dispatch(request, token)

    def get(self, request: HttpRequest, token: str) -> HttpResponse:
        return render(request, "registration/invitation.html", self._context(request, UserCreationForm()))

    def post(self, request: HttpRequest, token: str) -> HttpResponse:
        if request.user.is_authenticated:
            try:
                joining.invitation_accept(token=token, user=request.user)
            except joining.InvitationUnusable:
                return _refused(request, *GONE, status=404)
            return redirect("teams-page")
        form = UserCreationForm(request.POST)
        context = self._context(request, form)
        if not form.is_valid():
            return render(request, "registration/invitation.html", context)
        return _sign_up(request, form, "registration/invitation.html", context, invitation_token=token)

    def _context(self, request: HttpRequest, form: UserCreationForm) -> dict:
        member = team_role(user=request.user, team_id=self.invitation.team_id) is not None
        return {"invitation": self.invitation, "team": self.invitation.team, "already_member": member,
                "form": None if request.user.is_authenticated else form}


def _sign_up(request: HttpRequest, form: UserCreationForm, template: str, context: dict,
             invitation_token: str = "") -> HttpResponse:
    """Makes the account from a valid form, signs it in and opens the first-run page."""
    try:
        user = joining.user_sign_up(username=form.cleaned_data["username"],
                                    password=form.cleaned_data["password1"],
                                    ip_address=signing_in.client_address(request),
                                    invitation_token=invitation_token)
    except joining.UsernameTaken as error:
        form.add_error("username", str(error))
        return render(request, template, {**context, "form": form})
    except joining.InvitationUnusable:
        return _refused(request, *GONE, status=404)
    except joining.SignUpRefused as error:
        heading = "Too many sign-ups" if error.limited else "Sign-up is closed"
        return _refused(request, heading, str(error), status=429 if error.limited else 404)
    auth.login(request, user, backend=SIGN_IN_BACKEND)
    return redirect("welcome")


def _refused(request: HttpRequest, heading: str, message: str, *, status: int) -> HttpResponse:
    return render(request, "registration/sign_up_refused.html", {"heading": heading, "message": message},
                  status=status)
