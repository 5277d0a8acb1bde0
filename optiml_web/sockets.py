"""What a websocket to a path no app routes gets: the handshake refused with 4404, as for
a run or card the viewer may not see, and one line in the log, instead of Channels' "No
route found" error, which daphne answered with a 500 and a traceback (issue 34)."""

from __future__ import annotations

import logging

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import re_path

log = logging.getLogger(__name__)


class NoRoute(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        log.info("websocket refused: no route for %s", self.scope.get("path", "?")[:200])
        await self.close(code=4404)  # as a run or card the viewer may not see


# Last in the router: every path the apps' own patterns did not take.
catch_all = [re_path(r"", NoRoute.as_asgi())]
