"""A skill card's page, live: a websocket per viewer at ws/skills/<card_id>/[?team=<id>].

Protocol (every frame is {"type", "data"}):
- on connect: {"type": "card", "data": {"revision": n, "what": null}}: the card's
  revision now;
- then, whenever the card changes, {"type": "card", "data": {"revision": n, "what": w}},
  w what made that revision (the card's `last_change`: roundtrip, review, edit, comment,
  card), read from the row whether the change was told through the channel layer or
  noticed by reading the row. The page then reads the card again from the API:
  the socket carries no card data, so it can tell nothing a viewer may not read.

Who may connect: whoever may read the card's library (lineage.selectors.
skill_library_open): anyone signed in for the default library, the team's members for a
team's. Others, and cards that do not exist, are refused (close code 4404) before the
socket is accepted. The viewer's access is checked again when their memberships change
or they sign out, and every few minutes anyway (search.socket_access), and the socket
closed (4404) once it has gone.
A bad `team` is accepted only to be closed with 4400 and a reason
(optiml_web.params.close_bad_request).
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from lineage import live, selectors
from lineage.models import SkillCard
from optiml_web import params
from optiml_web.socket_reads import socket_read
from search.socket_access import AccessRechecked

REFUSED = 4404


class SkillCardConsumer(AccessRechecked, AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        self.card_pk: int | None = None
        self.poll: asyncio.Task | None = None
        card_id = self.scope["url_route"]["kwargs"]["card_id"]
        query = parse_qs(self.scope.get("query_string", b"").decode("utf-8", errors="replace"),
                         keep_blank_values=True)
        try:
            raw = query.get("team", [None])[-1]
            team_id = None if raw is None else params.parse_int(raw, "team", minimum=1)
        except params.ParameterError as error:
            await params.close_bad_request(self, error)
            return
        self.card_id, self.team_id = card_id, team_id
        await self.follow_user()
        found = await _open(self.scope.get("user"), card_id, team_id)
        if found is None:
            await self.unfollow_user()
            await self.close(code=REFUSED)
            return
        self.card_pk, self.revision = found
        # Join first, then read: a change committed in between is in the read, and one
        # committed after it brings a message.
        await self.channel_layer.group_add(live.card_group(self.card_pk), self.channel_name)
        await self.accept()
        self.recheck_periodically()
        self.revision = (await _revision(self.card_pk) or (self.revision, ""))[0]
        await self.send_json({"type": "card", "data": {"revision": self.revision, "what": None}})
        if settings.OPTIML_CARD_POLL_S > 0:
            self.poll = asyncio.create_task(self._watch())

    async def disconnect(self, code: int) -> None:
        await self.unfollow_user()
        if self.card_pk is None:
            return
        if self.poll is not None:
            self.poll.cancel()
        await self.channel_layer.group_discard(live.card_group(self.card_pk), self.channel_name)

    async def receive_json(self, content, **kwargs) -> None:
        """Viewers only listen; what they send is ignored."""

    async def skill_changed(self, message: dict) -> None:
        await self._check()

    async def recheck_access(self, user) -> None:
        """Their memberships changed or they signed out: may `user` still read this card?"""
        found = await _open(user, self.card_id, self.team_id)
        if found is None or found[0] != self.card_pk:
            await self.close(code=REFUSED)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(settings.OPTIML_CARD_POLL_S)
            await self._check()

    async def _check(self) -> None:
        """Send the card's revision and what made it, from the row, if it is newer than the
        last sent (a message only says "look": the row says what)."""
        found = await _revision(self.card_pk)
        if found is None:  # the card is gone (its team deleted): nothing more to follow
            await self.close(code=REFUSED)
            return
        revision, what = found
        if revision > self.revision:
            self.revision = revision
            await self.send_json({"type": "card", "data": {"revision": revision, "what": what or None}})


@socket_read
def _open(user, card_id: str, team_id: int | None) -> tuple[int, int] | None:
    if user is None:
        return None
    library = selectors.skill_library_open(user=user, team_id=team_id)
    if library is None:
        return None
    return (SkillCard.objects.filter(team=library.team, card_id=card_id)
            .values_list("pk", "revision").first())


@socket_read
def _revision(card_pk: int) -> tuple[int, str] | None:
    return SkillCard.objects.filter(pk=card_pk).values_list("revision", "last_change").first()
