"""Live run views over the real Redis channel layer, configured as production configures
it (optiml_web.env.channel_layers): a viewer may sit idle for as long as a run is silent
and still hears what comes next. Skipped without REDIS_URL, as in test_live_runs."""

from __future__ import annotations

import asyncio
import os

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from optiml_web.env import channel_layers
from search import control_services
from search.models import Run, RunEvent

pytestmark = [
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL), as in CI"),
    pytest.mark.django_db(transaction=True),
]

# redis-py 8 reads a socket for at most 5 s by default, and channels-redis
# blocks 5 s in BZPOPMIN waiting for a message: an idle viewer's socket was cut (close
# code 1011) every ~5 s. A real run is silent 7-70 s per full gate: the viewer here sits
# through 60 s of silence, past the redis-py health check (30 s) too.
IDLE_S = 60


@pytest.fixture
def redis_live(settings):
    """The production channel layer, under a prefix of this process's own."""
    layers = channel_layers(os.environ["REDIS_URL"])
    layers["default"]["CONFIG"]["prefix"] = f"test-idle-{os.getpid()}"
    settings.CHANNEL_LAYERS = layers
    settings.OPTIML_LIVE_POLL_S = 0  # news by group message only, as with Redis in production
    settings.OPTIML_LIVE_COALESCE_S = 0.05
    return settings


def socket(path: str, session: str) -> WebsocketCommunicator:
    from optiml_web.asgi import application

    headers = [
        (b"origin", b"http://localhost"),
        (b"host", b"localhost"),
        (b"cookie", f"sessionid={session}".encode()),
    ]
    return WebsocketCommunicator(application, path, headers=headers)


set_status = database_sync_to_async(control_services.run_set_status)


@pytest.mark.timeout(IDLE_S + 60)
def test_an_idle_viewer_still_hears_an_event_published_after_a_long_silence(redis_live, people, relu_run):
    run = relu_run(budget=2, user=people["alice"], drive=False)
    everything = RunEvent.objects.filter(run=run).count()
    client = Client()
    client.force_login(people["alice"])
    session = client.cookies["sessionid"].value

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after={everything}", session)
        assert (await ws.connect())[0]
        assert (await ws.receive_json_from())["type"] == "synced"
        await asyncio.sleep(IDLE_S)
        # A cut socket has ended the consumer: receiving raises its error or the close.
        await set_status(run_id=run.pk, status=Run.Status.PAUSED)
        frame = await ws.receive_json_from(timeout=5)
        still_open = await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()
        return frame, still_open

    frame, still_open = async_to_sync(scenario)()

    assert frame["type"] == "events"
    assert [event["seq"] for event in frame["data"]] == [everything + 1]
    assert still_open


def test_a_hundred_and_fifty_viewers_leaving_at_once_all_leave(redis_live):
    from channels.layers import get_channel_layer

    viewers = 150  # more than redis-py's default pool of 100 connections

    async def scenario():
        layer = get_channel_layer()
        channels = [await layer.new_channel() for _ in range(viewers)]
        # The process's receive holds one connection, blocked in BZPOPMIN, as in daphne.
        listening = asyncio.ensure_future(layer.receive(channels[0]))
        await asyncio.sleep(0.2)
        try:
            await asyncio.gather(*(layer.group_add("run.leaving", name) for name in channels))
            await asyncio.gather(*(layer.group_discard("run.leaving", name) for name in channels))
        finally:
            listening.cancel()
            await layer.flush()

    async_to_sync(scenario)()


def test_over_redis_a_run_id_with_a_leading_zero_is_no_route_and_many_handshakes_at_once_all_sync(
    redis_live, people, relu_run
):
    """One integer rule for websocket paths (/ws/runs/007/ names no run, as /api/runs/007/
    does not), and handshakes side by side (optiml_web.socket_reads): 20 of the run's
    viewers connecting at once are all let in and synced, a stranger among them refused."""
    run = relu_run(budget=1, user=people["alice"], team=people["team"])
    sessions = {}
    for name in ("bob", "carol"):
        client = Client()
        client.force_login(people[name])
        sessions[name] = client.cookies["sessionid"].value

    async def connect(path, session):
        ws = socket(path, session)
        connected, code = await ws.connect(timeout=10)
        synced = False
        while connected and not synced:
            synced = (await ws.receive_json_from(timeout=10))["type"] == "synced"
        await ws.disconnect()
        return connected, code if not connected else synced

    async def scenario():
        leading_zero = await connect(f"/ws/runs/0{run.pk}/", sessions["bob"])
        crowd = await asyncio.gather(*(connect(f"/ws/runs/{run.pk}/", sessions["bob"]) for _ in range(20)),
                                     connect(f"/ws/runs/{run.pk}/", sessions["carol"]))
        return leading_zero, crowd

    leading_zero, crowd = async_to_sync(scenario)()

    assert leading_zero == (False, 4404)
    assert crowd[:20] == [(True, True)] * 20
    assert crowd[20] == (False, 4404)  # carol is in no team of the run's
