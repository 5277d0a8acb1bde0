"""daphne as the image runs it, with share tokens out of its access log and a handshake
refused with the status the app chose (issue 34).

- daphne's command line writes its access log itself (daphne.access.AccessLogGenerator,
  to stdout or a file), past the logging filters of settings.LOGGING that redact share
  tokens (optiml_web/log_redaction.py): a line per request and per websocket, with the
  path, /share/<token>/ included. Here that generator's lines pass through the same
  redaction.
- daphne answers every handshake the app closes before accepting with 403, and does not
  offer ASGI's websocket denial response (the `websocket.http.response` extension, which
  uvicorn and hypercorn do), through which an app answers a handshake with an HTTP status
  of its choosing. Here it does: a path no app routes is a 400 (optiml_web/sockets.py),
  not the 403 of a run the viewer may not see.

    python -m optiml_web.daphne --bind 0.0.0.0 --port 8000 optiml_web.asgi:application
"""

from __future__ import annotations

from typing import Any

import daphne.cli
from autobahn.twisted.websocket import ConnectionDeny
from daphne.access import AccessLogGenerator
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol

from optiml_web.log_redaction import redact

DENIAL = "websocket.http.response"  # the ASGI extension's name, and its messages' prefix


class RedactedAccessLog(AccessLogGenerator):
    """daphne's access log, each request line (path and query) redacted."""

    def write_entry(self, host, date, request, status=None, length=None, ident=None, user=None):
        super().write_entry(host, date, redact(request), status, length, ident, user)


class DenyingServer(Server):
    """daphne's server with the websocket denial response: the scope of every websocket
    says the extension is there, and a handshake answered with
    `websocket.http.response.start` (status) then `.body` (more_body false) is refused
    with that status, as daphne refuses a close before accept with its 403."""

    def create_application(self, protocol: Any, scope: dict) -> Any:
        if scope.get("type") == "websocket":
            scope["extensions"] = {**(scope.get("extensions") or {}), DENIAL: {}}
        return super().create_application(protocol, scope)

    async def handle_reply(self, protocol: Any, message: dict) -> None:
        if not str(message.get("type", "")).startswith(f"{DENIAL}."):
            return await super().handle_reply(protocol, message)
        if protocol not in self.connections or self.connections[protocol].get("disconnected"):
            return None
        if not isinstance(protocol, WebSocketProtocol) or not hasattr(protocol, "handshake_deferred"):
            raise ValueError(f"{message['type']} is an answer to a handshake not yet accepted")
        if message["type"] == f"{DENIAL}.start":
            protocol.denial_status = int(message["status"])
        elif message["type"] == f"{DENIAL}.body" and not message.get("more_body", False):
            _deny(self, protocol, getattr(protocol, "denial_status", 403), bytes(message.get("body", b"")))
        return None


def _deny(server: Server, protocol: WebSocketProtocol, status: int, body: bytes) -> None:
    """What WebSocketProtocol.serverReject does, with the app's status and its body's text
    as the reason (autobahn writes it after the status line)."""
    protocol.handshake_deferred.errback(ConnectionDeny(code=status, reason=body.decode("utf-8", "replace")))
    del protocol.handshake_deferred
    server.protocol_disconnected(protocol)
    server.log_action("websocket", "rejected", {
        "path": protocol.request.path,
        "client": f"{protocol.client_addr[0]}:{protocol.client_addr[1]}" if protocol.client_addr else None})


def main() -> None:
    # daphne.cli builds its access log and its server from these names when it starts.
    daphne.cli.AccessLogGenerator = RedactedAccessLog
    daphne.cli.CommandLineInterface.server_class = DenyingServer
    daphne.cli.CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
