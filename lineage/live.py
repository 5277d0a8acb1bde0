"""A skill card's page, live: its viewers hear when the card changes (a roundtrip's
admission, a review, an edit, a comment) and read it again from the API.

As for runs (search.broadcast, search.consumers), the database is the truth and a message
only says "card N has news": each change bumps the card's `revision` in the transaction
that makes it (lineage.services.card_changed), and the group `skill.<pk>` hears of it after
the commit. A viewer (lineage.consumers.SkillCardConsumer) sends the revision it last
saw to its browser, which reloads the card when it grows. In the embedded default the
channel layer lives in the web process's memory, where an admission from
`manage.py lineage admit` or a worker cannot reach, so the consumer also reads the
revision every OPTIML_CARD_POLL_S seconds (one indexed row per viewer)."""

from __future__ import annotations

from functools import partial

from django.db import transaction

from search.broadcast import group_send

MESSAGE_TYPE = "skill.changed"  # handled by SkillCardConsumer.skill_changed


def card_group(card_pk: int) -> str:
    return f"skill.{card_pk}"


def card_changed_after_commit(*, card_pk: int, what: str) -> None:
    # As a run's events: a failure to send is logged, never raised (search.broadcast).
    # The row is written; a viewer catches up when it next reads the revision.
    transaction.on_commit(partial(group_send, card_group(card_pk), {"type": MESSAGE_TYPE, "what": what}))
