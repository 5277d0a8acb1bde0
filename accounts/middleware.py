"""Answers a sign-in the throttle refused (accounts/backends.py) with the page that says
how long to wait, status 429; and sets the known-device cookie after a sign-in."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.signing_in import DEVICE_COOKIE, DEVICE_COOKIE_AGE_S


class SignInThrottleMiddleware:
    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        refusal = getattr(request, "sign_in_refusal", None)
        if refusal is not None:
            wait = timedelta(seconds=math.ceil(refusal.seconds_left))
            context = {"refusal": refusal, "wait": wait, "username": request.POST.get("username", ""),
                       "longest_wait": timedelta(seconds=math.ceil(settings.OPTIML_LOGIN_LONGEST_WAIT_S))}
            return render(request, "registration/locked_out.html", context, status=429)
        cookie = getattr(request, "sign_in_device_cookie", None)
        if cookie is not None:
            response.set_cookie(DEVICE_COOKIE, cookie, max_age=DEVICE_COOKIE_AGE_S, httponly=True,
                                secure=settings.SESSION_COOKIE_SECURE, samesite="Lax")
        return response
