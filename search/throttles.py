"""How often one user may start what costs the server most: a run (GPU time, a driver
chain in the worker), a run's pre-flight (nvcc in the web process) and an import (a
request body of up to OPTIML_MAX_IMPORT_BYTES, several times that in memory while it is
read and written), and how many imports one web process reads at once (ImportSlots).

DRF's sliding-window throttle, per signed-in user, counting every request that passed
sign-in and permissions, whatever its answer (reading a refused file costs the server
what reading an accepted one does). The rates live in settings.OPTIML_THROTTLE_RATES,
read at each request (DRF's own THROTTLE_RATES is read once, at import), and the history
in the cache named by settings.OPTIML_THROTTLE_CACHE: Redis when there is one, so that
every web process counts against the same rate.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.cache import caches
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView


class UserActionThrottle(SimpleRateThrottle):
    """At most settings.OPTIML_THROTTLE_RATES[scope] requests ("60/hour") per user, for
    the HTTP methods in `methods` only (a list of runs is not a new run). A rate of None
    throttles nothing; a signed-out request is left to the view's permissions (401)."""

    methods: frozenset[str] = frozenset({"POST"})

    @property
    def cache(self):  # type: ignore[override]
        return caches[settings.OPTIML_THROTTLE_CACHE]

    def get_rate(self) -> str | None:
        return settings.OPTIML_THROTTLE_RATES[self.scope]

    def allow_request(self, request: Request, view: APIView) -> bool:
        if request.method not in self.methods:
            return True
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        if not request.user or not request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class RunCreateThrottle(UserActionThrottle):
    scope = "run_create"


class RunImportThrottle(UserActionThrottle):
    scope = "run_import"


class RunPreflightThrottle(UserActionThrottle):
    scope = "run_preflight"  # each one may run nvcc in the web process (seconds of a core)


class ImportsBusy(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "imports_busy"

    def __init__(self, at_once: int, retry_s: int) -> None:
        super().__init__(f"this server reads at most {at_once} imported runs at a time and is reading "
                         f"that many now; try again in {retry_s} s")
        self.wait = retry_s  # DRF's exception handler answers it as Retry-After


class ImportSlots:
    """How many imports one web process reads at once. A rate per user bounds how often
    one person imports, not how many people import together: each import holds its body,
    its text and its parsed objects (about five times the body for a trajectory's many
    small objects) until it is written, so four 63 MB imports at once took 1.2 GB. An
    import waits up to `wait_s` for a slot, holding only its body, which the server
    keeps on disk beyond FILE_UPLOAD_MAX_MEMORY_SIZE (Django's ASGI request), and is
    then refused (ImportsBusy, a 503 with Retry-After)."""

    def __init__(self) -> None:
        self._busy = 0
        self._free = threading.Condition()

    @contextmanager
    def held(self, *, at_once: int, wait_s: float) -> Iterator[None]:
        with self._free:
            if not self._free.wait_for(lambda: self._busy < at_once, timeout=wait_s):
                raise ImportsBusy(at_once, retry_s=max(1, math.ceil(wait_s)))
            self._busy += 1
        try:
            yield
        finally:
            with self._free:
                self._busy -= 1
                self._free.notify()


import_slots = ImportSlots()
