"""Sign-in throttling, as Django's authentication sees it (the rules: accounts.signing_in).

SignInThrottleBackend comes first in AUTHENTICATION_BACKENDS: it never signs anybody in;
it refuses a try that must wait before any password is checked, so it covers every
sign-in form, the admin's included; a try it lets through it counts as a failure before
the next backend checks the password. SignInThrottleMiddleware answers a refused request
with the 429 page that says how long to wait. The receivers below log each failure and, on
success, take the count back and have the middleware set the cookie that makes the
browser a known device for the name it signed in as.
"""

from __future__ import annotations

import logging

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver

from accounts import signing_in

logger = logging.getLogger(__name__)


class SignInThrottleBackend:
    # Not a BaseBackend: one with get_user() is what force_login() and a session would
    # record as the user's backend, and this one never gives a user.
    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None or username is None:
            return None  # no sign-in form behind it (a shell, a test's login()): no address to count
        refusal = signing_in.sign_in_attempt(request=request, username=username)
        if refusal is None:
            return None  # counted as a failure already; the next backend checks the password
        request.sign_in_refusal = refusal
        raise PermissionDenied("this sign-in must wait: too many failed sign-ins")


@receiver(user_login_failed, dispatch_uid="accounts.log_sign_in_failure")
def log_sign_in_failure(sender, credentials, request=None, **kwargs) -> None:
    # For whoever watches the logs (fail2ban, say); the name as repr, so that it cannot
    # write a line of its own. A refused try says so; the 429 is logged by Django too.
    refusal = getattr(request, "sign_in_refusal", None)
    address = signing_in.client_address(request) if request is not None else None
    if refusal is not None:
        logger.warning("Sign-in as %r from %s refused: it waits %.0f s more", credentials.get("username"),
                       address, refusal.seconds_left)
    else:
        logger.warning("Sign-in as %r from %s failed", credentials.get("username"), address)


@receiver(user_logged_in, dispatch_uid="accounts.clear_sign_in_failures")
def clear_sign_in_failures(sender, request, user, **kwargs) -> None:
    if request is None or not hasattr(request, "COOKIES"):
        return
    username = user.get_username()
    signing_in.sign_in_success_record(request=request, username=username)
    request.sign_in_device_cookie = signing_in.device_cookie_value(request=request, username=username)
