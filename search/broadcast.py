"""The one module that tells live viewers about run events.

Events are rows first (search.services._append, under the run's row lock); this module
only says "run N has news" on the channel group `run.<id>`, after the row commits. A
viewer (search.consumers.RunConsumer) then reads seq > its last from the database, so a
lost, repeated or reordered message costs nothing: the database is the truth.

A run's progress (its pace, GPU time and queue: selectors.run_progress) changes with its
events, and also when a GPU worker takes or finishes one of its evaluations, which writes no
event: `progress_after_commit` says "look again" for that (`run.progress`, a notice id and
nothing else), and each web process reads the progress once for its viewers (search.live).

The same module tells a signed-in user's sockets to check their access again (group
`user.<id>`, search.socket_access): the message says only "look again", never what changed.

Two ways news travels, both through here:
- `event_committed`: a group message from whichever process wrote the event. With Redis
  (production) it reaches every web process.
- `news`: in the embedded default the channel layer lives in the web process's memory,
  where the worker process cannot reach, so the web process watches the database itself
  (search.live) and announces what it sees to its own in-memory group.
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "run.event"  # handled by RunConsumer.run_event
PROGRESS_MESSAGE_TYPE = "run.progress"  # handled by RunConsumer.run_progress
ACCESS_MESSAGE_TYPE = "access.changed"  # handled by socket_access.AccessRechecked.access_changed


def run_group(run_id: int) -> str:
    return f"run.{run_id}"


def user_group(user_id: int) -> str:
    """Every open socket of a signed-in user, whatever it shows (runs, skill cards)."""
    return f"user.{user_id}"


def event_after_commit(*, run_id: int, seq: int, kind: str, data: dict[str, Any]) -> None:
    """Announce an event once the transaction that wrote it commits (never before: a viewer
    told early would look for a row it cannot see yet)."""
    transaction.on_commit(partial(event_committed, run_id=run_id, seq=seq, kind=kind, data=data))


def event_committed(*, run_id: int, seq: int, kind: str, data: dict[str, Any]) -> None:
    group_send(run_group(run_id), {"type": MESSAGE_TYPE, "seq": seq, "kind": kind, "data": data})


def events_after_commit(*, run_id: int, events: list[tuple[int, str, dict[str, Any]]]) -> None:
    """Announce several events of one transaction once it commits, in one trip to the
    channel layer (a run's step writes several; each trip costs milliseconds)."""
    if events:
        transaction.on_commit(partial(_send_all, run_id, [
            {"type": MESSAGE_TYPE, "seq": seq, "kind": kind, "data": data} for seq, kind, data in events]))


def progress_after_commit(*, run_id: int) -> None:
    """Tell run `run_id`'s viewers that its evaluations moved (a worker took one, or stored
    what it measured) once that commits. The notice id lets a web process count one notice
    once, however many of its viewers hear it."""
    transaction.on_commit(partial(group_send, run_group(run_id), {"type": PROGRESS_MESSAGE_TYPE,
                                                                   "notice": uuid.uuid4().hex}))


def share_revoked_after_commit(*, run_id: int, share_id: int) -> None:
    """Viewers who came in by this link are closed once its revocation commits."""
    transaction.on_commit(partial(group_send, run_group(run_id), {"type": "share.revoked",
                                                                   "share_id": share_id}))


def run_access_changed_after_commit(*, run_id: int) -> None:
    """Tell every socket on run `run_id` to check its access again once the change commits
    (the run moved to another team or creator, or deleted)."""
    transaction.on_commit(partial(group_send, run_group(run_id), {"type": ACCESS_MESSAGE_TYPE}))


def access_changed_after_commit(*, user_id: int, session_ended: str | None = None) -> None:
    """Tell `user_id`'s sockets to check their access again once the change commits (a
    socket told early would read the access it is losing). `session_ended`: the session
    being signed out, which its sockets take as gone whether or not its row is deleted yet
    (Django signals a sign-out before it deletes the session)."""
    message: dict[str, Any] = {"type": ACCESS_MESSAGE_TYPE}
    if session_ended:
        message["session_ended"] = session_ended
    transaction.on_commit(partial(group_send, user_group(user_id), message))


def group_send(group: str, message: dict[str, Any]) -> None:
    """Send one message to a channel group now: every app's "this subject has news" (a
    run's events here, a skill card's changes in lineage.live). A failure to send is
    logged, never raised: the row is written, and viewers catch up from the database when
    they next hear of the subject, read it or reconnect. A broken channel layer must not
    fail the write that announced it."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:
        logger.exception("%s: %s not broadcast", group, message["type"])


def _send_all(run_id: int, messages: list[dict[str, Any]]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return

    async def send() -> None:
        for message in messages:
            await layer.group_send(run_group(run_id), message)

    try:
        async_to_sync(send)()
    except Exception:
        logger.exception("run %s: %d events not broadcast", run_id, len(messages))


async def news(*, run_id: int, seq: int) -> None:
    """Tell this process's viewers of `run_id` that its log reaches `seq` (the database
    watch of search.live, which notices what another process wrote)."""
    await get_channel_layer().group_send(run_group(run_id), {"type": MESSAGE_TYPE, "seq": seq,
                                                             "kind": None, "data": None})
