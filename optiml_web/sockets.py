"""What a websocket to a path no app routes gets: the handshake refused with an HTTP 400
where the server offers ASGI's websocket denial response (the image's daphne,
optiml_web/daphne.py), else closed with 4404 before it is accepted, as a run or card the
viewer may not see (a server without it answers that with its own 403); and one line in
the log, instead of Channels' "No route found" error, which daphne answered with a 500
and a traceback (issue 34)."""

from __future__ import annotations

import logging

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import re_path

log = logging.getLogger(__name__)

DENIAL = "websocket.http.response"  # ASGI's websocket denial response extension


class NoRoute(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        log.info("websocket refused: no route for %s", self.scope.get("path", "?")[:200])
        if DENIAL in (self.scope.get("extensions") or {}):
            await self.base_send({"type": f"{DENIAL}.start", "status": 400,
                                  "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
            await self.base_send({"type": f"{DENIAL}.body", "body": b"no websocket route for this path"})
            raise StopConsumer  # refused: nothing more will come of this socket
        await self.close(code=4404)  # as a run or card the viewer may not see


# Last in the router: every path the apps' own patterns did not take.
catch_all = [re_path(r"", NoRoute.as_asgi())]
