"""Sign-in throttling: django-axes' check, plus a higher limit per address.

Axes locks a (username, address) pair after AXES_FAILURE_LIMIT failures
(settings.AXES_LOCKOUT_PARAMETERS), but it has one limit for every parameter set, so it
cannot also lock an address at a higher count across all names. This backend adds that:
an address with OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT failures within the cool-off is refused
before any password is checked, and answered with axes' lock-out page (its middleware).
Being an authentication backend, it covers every sign-in form, the admin's included.
"""

from __future__ import annotations

from axes.attempts import get_cool_off_threshold
from axes.backends import AxesStandaloneBackend
from axes.exceptions import AxesBackendPermissionDenied
from axes.helpers import toggleable
from django.conf import settings

from accounts.selectors import sign_in_failures_from


class SignInThrottleBackend(AxesStandaloneBackend):
    @toggleable
    def authenticate(self, request, username=None, password=None, **kwargs):
        # Axes' own check first: it refuses a locked pair, and sets request.axes_ip_address
        # and request.axes_attempt_time (or raises when there is no request).
        super().authenticate(request, username=username, password=password, **kwargs)
        limit = settings.OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT
        failures = sign_in_failures_from(ip_address=request.axes_ip_address,
                                         since=get_cool_off_threshold(request))
        if failures < limit:
            return None  # not locked: the next backend checks the password
        # As axes does for a locked pair: Django's authenticate() turns the refusal into a
        # failed sign-in (counted, so a failure during the lock-out starts it again), and
        # axes' middleware answers the flagged request with the lock-out page.
        request.axes_locked_out = True
        request.sign_in_address_limit = limit  # for templates/registration/locked_out.html
        raise AxesBackendPermissionDenied("too many failed sign-ins from this address")
