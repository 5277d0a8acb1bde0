"""A skill card's page, live: its viewers hear when the card changes (a roundtrip's
admission, a review, an edit, a comment) and read it again from the API.

As for runs (search.broadcast, search.consumers), the database is the truth and a message
only says "card N has news": each change bumps the card's `revision` in the transaction
that makes it (lineage.services._changed), and the group `skill.<pk>` hears of it after
the commit. A viewer (lineage.consumers.SkillCardConsumer) sends the revision it last
saw to its browser, which reloads the card when it grows. In the embedded default the
channel layer lives in the web process's memory, where an admission from
`manage.py lineage admit` or a worker cannot reach, so the consumer also reads the
revision every OPTIML_CARD_POLL_S seconds (one indexed row per viewer)."""

from __future__ import annotations

import logging
from functools import partial

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "skill.changed"  # handled by SkillCardConsumer.skill_changed


def card_group(card_pk: int) -> str:
    return f"skill.{card_pk}"


def card_changed_after_commit(*, card_pk: int, what: str) -> None:
    transaction.on_commit(partial(_send, card_pk, what))


def _send(card_pk: int, what: str) -> None:
    # As search.broadcast: a failure to send is logged, never raised. The row is written;
    # a viewer catches up when it next reads the revision.
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(card_group(card_pk), {"type": MESSAGE_TYPE, "what": what})
    except Exception:
        logger.exception("skill card %s: %s not broadcast", card_pk, what)
