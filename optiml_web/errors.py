"""The API's answer to any exception: JSON, always, and never a traceback.

DRF's own handler answers what it knows (ValidationError, Http404, PermissionDenied, ...).
Anything else used to fall through to Django, which under DEBUG sends its debug page (the
settings, the code, the local variables) and otherwise an HTML 500. Here it is logged
with its traceback on the server and the client gets {"detail": ...} with a 500, whatever
DEBUG says, so the API's errors have one shape in development and in production.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

logger = logging.getLogger("optiml_web.api")

INTERNAL_ERROR = "internal server error: it is logged on the server"


def api_exception_handler(exc: Exception, context: dict) -> Response:
    response = exception_handler(exc, context)
    if response is not None:
        return response
    set_rollback()  # were the request atomic, what it wrote goes
    if isinstance(exc, RequestDataTooBig):
        return Response({"detail": "the request body is too large"},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, SuspiciousOperation):  # Django's "bad request" family
        return Response({"detail": _bad_request_text(exc)}, status=status.HTTP_400_BAD_REQUEST)
    request = context.get("request")
    where = f"{request.method} {request.path}" if request is not None else "the API"
    # The path is redacted by the logging filter (optiml_web.log_redaction) like any line.
    logger.error("unexpected error answering %s", where, exc_info=exc)
    return Response({"detail": INTERNAL_ERROR}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)


def _bad_request_text(exc: SuspiciousOperation) -> str:
    # In our words: Django's own messages name its settings ("settings.DATA_UPLOAD_MAX_...").
    if isinstance(exc, TooManyFieldsSent):
        return f"bad request: more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} parameters"
    return "bad request: the request is malformed"


# -- answers Django gives outside DRF's views (optiml_web.urls handler404/400/500) -------
# A path under /api/ that matches no route (an id too large for the `id` converter, say)
# or an error before a view runs still answers JSON there; pages keep Django's own.


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "not found"}, status=status.HTTP_404_NOT_FOUND)
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "bad request"}, status=status.HTTP_400_BAD_REQUEST)
    return defaults.bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": INTERNAL_ERROR}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    return defaults.server_error(request)


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")
