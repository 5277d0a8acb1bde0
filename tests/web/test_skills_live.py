"""A skill card's page, live (issue 11): the websocket at ws/skills/<card>/ tells its
viewers when the card changes, through the channel layer when the change is made in a
process the layer reaches, and by reading the card's revision when it is not (the
embedded default: `manage.py lineage admit` in another process)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db.models import F
from django.test import Client

from lineage import services
from lineage.models import SkillCard
from tests.web.test_skills_api import card_data

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def card(people):
    return SkillCard.objects.create(card_id="vec4-v1", intent="VEC4", status="induced",
                                    data=card_data("vec4-v1", "VEC4", 1.16, 2, ["relu"]))


def _session(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _communicator(session: str, path: str) -> WebsocketCommunicator:
    from optiml_web.asgi import application

    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"),
               (b"cookie", f"sessionid={session}".encode())]
    return WebsocketCommunicator(application, path, headers=headers)


def test_a_viewer_hears_the_roundtrip_and_the_review_as_they_commit(card, people, settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.OPTIML_CARD_POLL_S = 0  # only the layer's messages

    bob = _session(people["bob"])

    async def scenario() -> list[dict]:
        ws = _communicator(bob, "/ws/skills/vec4-v1/")
        connected, _ = await ws.connect()
        assert connected
        frames = [await ws.receive_json_from(timeout=5)]
        await database_sync_to_async(services.cards_admit)(
            admission={"cards": {"vec4-v1": {"status": "verified", "trials": []}}})
        frames.append(await ws.receive_json_from(timeout=5))
        assert await ws.receive_nothing(timeout=0.2)  # one admission, one frame
        await ws.disconnect()
        return frames

    first, admitted = async_to_sync(scenario)()
    assert first == {"type": "card", "data": {"revision": 1, "what": None}}
    assert admitted == {"type": "card", "data": {"revision": 2, "what": "roundtrip"}}


def test_a_change_made_where_the_layer_does_not_reach_is_read_from_the_row(card, people, settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.OPTIML_CARD_POLL_S = 0.05

    bob = _session(people["bob"])

    async def scenario() -> dict:
        ws = _communicator(bob, "/ws/skills/vec4-v1/")
        assert (await ws.connect())[0]
        await ws.receive_json_from(timeout=5)
        # As another process would: the row changes, and no message comes.
        await database_sync_to_async(
            lambda: SkillCard.objects.filter(pk=card.pk).update(revision=F("revision") + 1,
                                                                last_change="review"))()
        frame = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return frame

    assert async_to_sync(scenario)() == {"type": "card", "data": {"revision": 2, "what": "review"}}


def test_a_bad_team_is_a_bad_request_and_a_stranger_is_refused(card, people, settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

    async def outcome(session: str, path: str):
        ws = _communicator(session, path)
        connected, code = await ws.connect()
        if connected:
            closed = await ws.receive_output(timeout=5)
            await ws.disconnect()
            return closed.get("code")
        return code

    bob, carol = _session(people["bob"]), _session(people["carol"])
    assert async_to_sync(outcome)(bob, "/ws/skills/vec4-v1/?team=x") == 4400
    assert async_to_sync(outcome)(carol, f"/ws/skills/vec4-v1/?team={people['team'].pk}") == 4404


def test_a_change_the_channel_layer_cannot_send_is_logged_as_a_runs_event_is_never_raised(
        card, monkeypatch, caplog):
    """One sender for both apps (search.broadcast.group_send): a broken layer is the
    same log line for a card's change as for a run's event, and neither write fails."""
    from lineage import live
    from search import broadcast

    class BrokenLayer:
        async def group_send(self, group, message):
            raise ConnectionError("the layer is down")

    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: BrokenLayer())

    live.card_changed_after_commit(card_pk=card.pk, what="review")  # no transaction: sent now
    broadcast.event_committed(run_id=7, seq=3, kind="node_added", data={})

    logged = [r.getMessage() for r in caplog.records if r.name == "search.broadcast"]
    assert logged == [f"skill.{card.pk}: skill.changed not broadcast", "run.7: run.event not broadcast"]
