"""What one web process knows of a watched run's event log, shared by all its viewers.

Two hundred people watching one run must not mean two hundred database reads per event.
A RunFeed (one per run per event loop, while the run has viewers here) keeps the log's
recent tail in memory. Told that the log reaches seq s, a viewer asks the feed to
`reach(s)`: the first such request reads the new rows (seq > the feed's last) once, the
others wait for that read. The rows come from the database, in order and without gaps
(seq is handed out under the run's row lock), so the tail is the log itself, only nearer.

In the embedded default the feed also watches the database every OPTIML_LIVE_POLL_S
seconds (one cheap query per run, not per viewer) and announces a longer log through
search.broadcast, since the worker's own announcements stay in the worker's memory.

The feed also holds the run's progress (selectors.run_progress: evaluations, GPU time, pace
and queue), read once per process for every viewer that asked for it, again only once the
log has grown or a worker said that the run's evaluations moved (a progress notice).
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Any

from django.conf import settings

from optiml_web.socket_reads import socket_read
from search import broadcast, selectors

logger = logging.getLogger(__name__)

TAIL_EVENTS = 5000  # kept in memory per watched run; a viewer further behind reads the database
FRAMES_KEPT = 16  # encoded frames remembered per run
READS_PER_REACH = 2  # a notice of a seq the database does not show (yet) is not waited on forever


class RunFeed:
    def __init__(self, run_id: int, last_seq: int) -> None:
        self.run_id = run_id
        self.events: list[dict[str, Any]] = []  # seq first_seq .. last_seq, contiguous
        self.first_seq = last_seq + 1
        self.last_seq = last_seq
        self.viewers = 0
        self._frames: dict[tuple[int, int], str] = {}  # (first seq, last seq) -> encoded frame
        self._reading: asyncio.Task | None = None
        self._watching: asyncio.Task | None = None
        self._progress: dict[str, Any] | None = None
        self._progress_key: tuple[int, int] | None = None  # (last_seq, notices) it was read at
        self._progress_reading: asyncio.Task | None = None
        self._notices = 0
        self._last_notice = ""

    def frame(self, events: list[dict[str, Any]]) -> str:
        """The websocket text of an events frame, encoded once for every viewer sending the
        same events (they mostly are: viewers in step all want the newest few)."""
        key = (events[0]["seq"], events[-1]["seq"])
        text = self._frames.get(key)
        if text is None:
            text = json.dumps({"type": "events", "data": events})
            if len(self._frames) >= FRAMES_KEPT:
                self._frames.pop(next(iter(self._frames)))
            self._frames[key] = text
        return text

    def after(self, seq: int) -> list[dict[str, Any]] | None:
        """Events with seq > `seq` that the feed holds; None if it does not reach back that far."""
        if seq < self.first_seq - 1:
            return None
        return self.events[seq - self.first_seq + 1:]

    async def reach(self, seq: int) -> None:
        """Make the tail reach `seq`, reading the database once however many ask at once."""
        for _ in range(READS_PER_REACH):
            if self.last_seq >= seq:
                return
            if self._reading is None or self._reading.done():
                self._reading = asyncio.create_task(self._read())
            # shield: a viewer leaving mid-read must not cancel the read the others wait on
            await asyncio.shield(self._reading)

    def progress_notice(self, notice: str) -> None:
        """A worker says the run's evaluations moved (search.broadcast.progress_after_commit).
        Every viewer here hears the same notice: it counts once."""
        if notice != self._last_notice:
            self._last_notice = notice
            self._notices += 1

    async def progress(self) -> dict[str, Any]:
        """The run's progress as of the log's tail (or later), read once however many ask."""
        for _ in range(READS_PER_REACH):
            key = (self.last_seq, self._notices)
            if self._progress is not None and self._progress_key == key:
                break
            if self._progress_reading is None or self._progress_reading.done():
                self._progress_reading = asyncio.create_task(self._read_progress(key))
            await asyncio.shield(self._progress_reading)
        return self._progress

    async def _read_progress(self, key: tuple[int, int]) -> None:
        self._progress = await _progress_of(self.run_id)
        self._progress_key = key

    async def _read(self) -> None:
        new = await _events_after(self.run_id, self.last_seq)
        if not new:
            return
        self.events.extend(new)
        self.last_seq = new[-1]["seq"]
        if len(self.events) > TAIL_EVENTS:
            del self.events[:-TAIL_EVENTS]
            self.first_seq = self.events[0]["seq"]

    async def _watch(self, interval: float) -> None:
        known = self.last_seq
        while True:
            await asyncio.sleep(interval)
            try:
                seq = await _last_seq(self.run_id)
                if seq > known:
                    known = seq
                    await broadcast.news(run_id=self.run_id, seq=seq)
            except Exception:
                # A database hiccup: say so, and look again next time rather than go quiet.
                logger.exception("watching run %s for new events failed", self.run_id)


# Per event loop (daphne runs one; tests make many), per run.
_feeds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, RunFeed]] = (
    weakref.WeakKeyDictionary()
)


async def join(run_id: int) -> RunFeed:
    """A viewer of `run_id` arrived in this process."""
    feeds = _feeds.setdefault(asyncio.get_running_loop(), {})
    feed = feeds.get(run_id)
    if feed is None:
        feed = RunFeed(run_id, await _last_seq(run_id))
        feed = feeds.setdefault(run_id, feed)  # another viewer may have made one meanwhile
        interval = settings.OPTIML_LIVE_POLL_S
        if interval > 0 and feed._watching is None:
            feed._watching = asyncio.create_task(feed._watch(interval))
    feed.viewers += 1
    return feed


def leave(feed: RunFeed) -> None:
    feed.viewers -= 1
    if feed.viewers > 0:
        return
    if feed._watching is not None:
        feed._watching.cancel()
    feeds = _feeds.get(asyncio.get_running_loop(), {})
    if feeds.get(feed.run_id) is feed:
        del feeds[feed.run_id]


@socket_read
def _last_seq(run_id: int) -> int:
    return selectors.run_last_seq(run_id=run_id)


@socket_read
def _events_after(run_id: int, seq: int) -> list[dict[str, Any]]:
    return [{"seq": e.seq, "kind": e.kind, "data": e.data}
            for e in selectors.run_events_after(run=run_id, seq=seq)]


@socket_read
def _progress_of(run_id: int) -> dict[str, Any]:
    from search.models import Run

    run = Run.objects.filter(pk=run_id).first()
    return selectors.run_progress(run=run) if run is not None else {}
