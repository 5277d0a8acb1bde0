"""Live run views: a websocket per viewer at ws/runs/<run_id>/?after=<seq>[&share=<token>].

Protocol (every frame is {"type", "data"}):
- on connect: every event with seq > after, in order, as {"type": "events", "data": [{seq,
  kind, data}, ...]} (long backlogs in several frames), then {"type": "synced", "data":
  {"last_seq": n}};
- then, whenever the run has news, {"type": "events", "data": [...]} with what came next.

A viewer that asks for progress (`&progress=1`, as the run page does) also gets {"type":
"progress", "data": {"evaluated", "gpu_seconds", "queue"}} after "synced", and again after
news whenever it changed: selectors.run_progress, the run API's fields of those names, read
once per process for every viewer (search.live). Its queue counts other people's
evaluations ahead (`queued_ahead`) and never names their runs or any GPU worker.

The database is the truth: a notification (search.broadcast) only says "run N's log
reaches seq s"; the consumer then sends seq > the last it sent, read from the database
through the process's shared tail of the log (search.live). So frames never repeat or
skip an event whatever happens to notifications, and a client that reconnects with its
last seq gets exactly what it missed. Notifications arriving within
OPTIML_LIVE_COALESCE_S of the last frame are answered by one later frame: coalescing is
on the receiving side, per viewer.

Who may connect: the signed-in user who may view the run, or anyone with an open share
link's token. Others are refused (close code 4404) before the socket is accepted, and a
viewer who came in by a link is closed (4404) when that link is revoked. A signed-in
viewer's access is checked again when their memberships change or they sign out, and
every viewer's when the run or a link changes and every few minutes anyway
(search.socket_access); the socket is closed (4404) when neither they nor the link they
came with may still see the run.

A bad `after` (not a whole number of ASCII digits that a sequence number can be) or a bad
`progress` (not true or false) is a bad request: the socket is accepted only to be closed
with 4400 and a reason that names the parameter and what it must be
(optiml_web.params.close_bad_request, as every consumer).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from optiml_web import params
from optiml_web.socket_reads import socket_read
from search import broadcast, live, selectors
from search.socket_access import AccessRechecked

FRAME_EVENTS = 500  # events per frame when replaying a long backlog
REFUSED = 4404  # application close code: no such run, or not yours to see


class RunConsumer(AccessRechecked, AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        self.run_id: int = self.scope["url_route"]["kwargs"]["run_id"]
        self.feed: live.RunFeed | None = None
        # Bytes from the client: undecodable ones become U+FFFD, and then a bad value.
        query = parse_qs(self.scope.get("query_string", b"").decode("utf-8", errors="replace"),
                         keep_blank_values=True)
        try:
            after = params.parse_int(query.get("after", ["0"])[-1], "after")
            self.wants_progress = params.parse_bool(query.get("progress", ["0"])[-1], "progress")
        except params.ParameterError as error:
            await params.close_bad_request(self, error)
            return
        self.share_token = query.get("share", [""])[-1]
        await self.follow_user()
        allowed, self.share_id = await _access(self.run_id, self.scope.get("user"), self.share_token)
        if not allowed:
            await self.unfollow_user()
            await self.close(code=REFUSED)
            return
        self.lock = asyncio.Lock()
        self.flush_pending = False
        self.flushes: set[asyncio.Task] = set()
        self.last_frame = 0.0
        self.last_progress: dict | None = None
        # Join first, then read: an event committed in between is in the read, and one
        # committed after it brings a notification. Either way nothing falls in a gap.
        await self.channel_layer.group_add(broadcast.run_group(self.run_id), self.channel_name)
        await self.accept()
        self.recheck_periodically()
        self.feed = await live.join(self.run_id)
        self.wanted = await _last_seq(self.run_id)
        # A client ahead of the log (a database restored from backup) starts again from
        # the log's end rather than waiting for sequence numbers it already has.
        self.last_sent = min(after, self.wanted)
        await self._send_new()
        await self.send_json({"type": "synced", "data": {"last_seq": self.last_sent}})
        await self._send_progress()

    async def disconnect(self, code: int) -> None:
        await self.unfollow_user()
        if self.feed is None:
            return
        for task in self.flushes:
            task.cancel()
        live.leave(self.feed)
        await self.channel_layer.group_discard(broadcast.run_group(self.run_id), self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Viewers only listen; what they send is ignored."""

    async def run_event(self, message: dict) -> None:
        """search.broadcast says the log reaches message["seq"]: send what is new, at most
        one frame per OPTIML_LIVE_COALESCE_S."""
        self.wanted = max(self.wanted, message.get("seq") or 0)
        if self.wanted <= self.last_sent:
            return  # nothing new
        self._flush_later()

    async def run_progress(self, message: dict) -> None:
        """search.broadcast says the run's evaluations moved without an event: a viewer
        that follows progress hears it, at most one frame per OPTIML_LIVE_COALESCE_S."""
        if self.wants_progress and self.feed is not None:
            self.feed.progress_notice(str(message.get("notice") or ""))
            self._flush_later()

    def _flush_later(self) -> None:
        if self.flush_pending:
            return  # a flush is coming that reads everything before it
        self.flush_pending = True
        task = asyncio.create_task(self._flush_soon())
        self.flushes.add(task)
        task.add_done_callback(self.flushes.discard)

    async def share_revoked(self, message: dict) -> None:
        """The link this viewer came in by was revoked: it sees no more."""
        if self.share_id is not None and message.get("share_id") == self.share_id:
            await self.close(code=REFUSED)

    async def recheck_access(self, user) -> None:
        """Their memberships changed or they signed out: may `user`, or the link this viewer
        came with, still see the run? If only the link, its revocation now closes the socket."""
        allowed, self.share_id = await _access(self.run_id, user, self.share_token)
        if not allowed:
            await self.close(code=REFUSED)

    async def _flush_soon(self) -> None:
        wait = self.last_frame + settings.OPTIML_LIVE_COALESCE_S - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)
        # Cleared before reading: news that arrives during the read schedules another flush.
        self.flush_pending = False
        await self._send_new()
        await self._send_progress()

    async def _send_new(self) -> None:
        async with self.lock:
            await self.feed.reach(self.wanted)
            events = self.feed.after(self.last_sent)
            if events is None:  # further behind than the shared tail reaches
                events = await _events_after(self.run_id, self.last_sent)
            for start in range(0, len(events), FRAME_EVENTS):
                frame = events[start:start + FRAME_EVENTS]
                await self.send(text_data=self.feed.frame(frame))
                self.last_sent = frame[-1]["seq"]
                self.last_frame = asyncio.get_running_loop().time()


    async def _send_progress(self) -> None:
        """The run's progress, if this viewer follows it and it changed since it was sent."""
        if not self.wants_progress:
            return
        async with self.lock:
            progress = await self.feed.progress()
            if progress and progress != self.last_progress:
                self.last_progress = progress
                await self.send_json({"type": "progress", "data": progress})


@socket_read
def _access(run_id: int, user, share_token: str) -> tuple[bool, int | None]:
    """(may view, the id of the share link the access rests on, if it rests on one)."""
    if user is not None and selectors.run_visible(user=user, run_id=run_id) is not None:
        return True, None
    link = selectors.share_open(token=share_token) if share_token else None
    if link is not None and link.run_id == run_id:
        return True, link.pk
    return False, None


@socket_read
def _last_seq(run_id: int) -> int:
    return selectors.run_last_seq(run_id=run_id)


@socket_read
def _events_after(run_id: int, seq: int) -> list[dict]:
    return [{"seq": e.seq, "kind": e.kind, "data": e.data}
            for e in selectors.run_events_after(run=run_id, seq=seq)]
