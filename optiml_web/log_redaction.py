"""Share tokens out of the logs.

A share link's token opens a run to anyone who has it, so it is stored only as a hash
(search.models.ShareLink). It also travels in URLs: the page /share/<token>/, the API
/api/shared/<token>/..., and the live view's websocket ?share=<token>. Request logs
(daphne's and runserver's, Django's "Not Found: <path>") write those URLs, so this
filter, on every handler of settings.LOGGING and of Celery's worker and beat
(optiml_web/celery.py), replaces the token before a line is written; daphne's own access
log passes through `redact` (optiml_web/daphne.py).
A team invitation's token (accounts.models.Invitation: /accounts/invitations/<token>/, and
?next= to it from the sign-in page) lets someone into a team, and is kept out the same way.
"""

from __future__ import annotations

import logging
import re

REDACTED = "[redacted]"

_TOKEN_IN_URL = [
    # /share/<token>/ (the page) and /api/shared/<token>/... (the API)
    re.compile(r"(/shared?/)[^/?#&\s\"'<>]+", re.IGNORECASE),
    # ?share=<token> (the websocket), and any such query parameter
    re.compile(r"([?&;]share=)[^&#\s\"'<>]+", re.IGNORECASE),
    # the same, URL-encoded, as in ?next=%2Fshare%2F<token>%2F
    re.compile(r"(%2Fshared?%2F)[^%&#\s\"'<>]+", re.IGNORECASE),
    re.compile(r"((?:%3F|%26)share%3D)[^%&#\s\"'<>]+", re.IGNORECASE),
    # /accounts/invitations/<token>/, plain and URL-encoded
    re.compile(r"(/accounts/invitations/)[^/?#&\s\"'<>]+", re.IGNORECASE),
    re.compile(r"(%2Faccounts%2Finvitations%2F)[^%&#\s\"'<>]+", re.IGNORECASE),
]


def redact(text: str) -> str:
    for pattern in _TOKEN_IN_URL:
        text = pattern.sub(rf"\g<1>{REDACTED}", text)
    return text


class RedactShareTokens(logging.Filter):
    """Rewrites the record's message (and its traceback, formatted here) without tokens.
    Never drops a record."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it for logging's own error report
            return True
        redacted = redact(message)
        if redacted != message or record.args:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
