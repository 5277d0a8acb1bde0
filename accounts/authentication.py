"""How the API knows who is asking: the browser's Django session, as the pages use."""

from __future__ import annotations

from rest_framework import authentication


class SessionAuthentication(authentication.SessionAuthentication):
    """DRF's session authentication (CSRF checked on writes), except that a signed-out
    request answers 401 with a WWW-Authenticate header rather than 403: 401 means "sign
    in", 403 "signed in, and not allowed", and the schema can tell the two apart. The
    scheme names the sign-in page, since a session comes from there."""

    def authenticate_header(self, request) -> str:
        return 'Session realm="OptiML Studio", login="/accounts/login/"'
