"""daphne as the image runs it, with share tokens out of its access log (issue 34).

daphne's command line writes its access log itself (daphne.access.AccessLogGenerator,
to stdout or a file), past the logging filters of settings.LOGGING that redact share
tokens (optiml_web/log_redaction.py): a line per request and per websocket, with the
path, /share/<token>/ included. This entry point runs daphne's own command line with
that generator's lines passed through the same redaction.

    python -m optiml_web.daphne --bind 0.0.0.0 --port 8000 optiml_web.asgi:application
"""

from __future__ import annotations

import daphne.cli
from daphne.access import AccessLogGenerator

from optiml_web.log_redaction import redact


class RedactedAccessLog(AccessLogGenerator):
    """daphne's access log, each request line (path and query) redacted."""

    def write_entry(self, host, date, request, status=None, length=None, ident=None, user=None):
        super().write_entry(host, date, redact(request), status, length, ident, user)


def main() -> None:
    # daphne.cli builds its access log from this name when it starts: ours instead.
    daphne.cli.AccessLogGenerator = RedactedAccessLog
    daphne.cli.CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
