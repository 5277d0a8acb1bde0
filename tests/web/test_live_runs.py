"""Live run views over websockets, through the real ASGI application (origin check,
session and auth middleware, routing): replay from any sequence number, then stream, with
no gap and no duplicate, whether news travels by group message or by the embedded
default's database watch; share links connect signed out; strangers are refused.

Each test is synchronous and runs its websocket scenario with async_to_sync, so the
consumer's database calls run on the test's own thread and connection."""

from __future__ import annotations

import os
import time

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from profiling.evaluators import RecordedEvaluator
from search import broadcast, control_services, services, sharing_services
from search import live as search_live
from search.models import Run, RunEvent
from tests.web.conftest import RUN_RECORDING

pytestmark = pytest.mark.django_db(transaction=True)

MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def live(settings):
    """In-memory groups; news by group message only (the watch off) unless a test says so."""
    settings.CHANNEL_LAYERS = MEMORY
    settings.OPTIML_LIVE_POLL_S = 0
    settings.OPTIML_LIVE_COALESCE_S = 0.05
    return settings


@pytest.fixture
def sessions(people) -> dict[str, str]:
    """A signed-in session cookie per person, made before any event loop runs."""
    cookies = {}
    for name in ("alice", "bob", "carol", "dana"):
        client = Client()
        client.force_login(people[name])
        cookies[name] = client.cookies["sessionid"].value
    return cookies


def socket(path: str, session: str | None = None) -> WebsocketCommunicator:
    from optiml_web.asgi import application

    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if session is not None:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def receive_until(ws: WebsocketCommunicator, last_seq: int, timeout: float = 5.0) -> list[dict]:
    """Frames until one carries event `last_seq` (or 'synced' says the log ends there)."""
    frames: list[dict] = []
    while True:
        frame = await ws.receive_json_from(timeout=timeout)
        frames.append(frame)
        if frame["type"] == "events" and frame["data"][-1]["seq"] >= last_seq:
            return frames
        if frame["type"] == "synced" and frame["data"]["last_seq"] >= last_seq:
            return frames


def seqs(frames: list[dict]) -> list[int]:
    return [event["seq"] for frame in frames if frame["type"] == "events" for event in frame["data"]]


def last_seq(run: Run) -> int:
    return RunEvent.objects.filter(run=run).count()


step = database_sync_to_async(services.run_step)
set_status = database_sync_to_async(control_services.run_set_status)
count_events = database_sync_to_async(lambda run: RunEvent.objects.filter(run=run).count())


def test_connecting_from_zero_replays_every_event_then_says_synced(live, people, sessions, relu_run):
    run = relu_run(budget=3, user=people["alice"])
    everything = last_seq(run)

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0", sessions["alice"])
        connected, _ = await ws.connect()
        assert connected
        frames = await receive_until(ws, everything)
        synced = await ws.receive_json_from()
        await ws.disconnect()
        return frames, synced

    frames, synced = async_to_sync(scenario)()

    assert seqs(frames) == list(range(1, everything + 1))
    assert {frame["type"] for frame in frames} == {"events"}
    first = frames[0]["data"][0]
    assert first["kind"] == "run_created" and first["data"]["task"] == "relu"
    assert synced == {"type": "synced", "data": {"last_seq": everything}}


def test_connecting_after_k_sends_exactly_the_events_after_k(live, people, sessions, relu_run):
    run = relu_run(budget=3, user=people["alice"])
    everything = last_seq(run)

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=5", sessions["alice"])
        await ws.connect()
        frames = await receive_until(ws, everything)
        assert (await ws.receive_json_from())["type"] == "synced"
        await ws.disconnect()
        return frames

    assert seqs(async_to_sync(scenario)()) == list(range(6, everything + 1))


def test_a_viewer_who_has_everything_gets_only_synced(live, people, sessions, relu_run):
    run = relu_run(budget=2, user=people["alice"])
    everything = last_seq(run)

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after={everything}", sessions["alice"])
        await ws.connect()
        frame = await ws.receive_json_from()
        assert await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()
        return frame

    assert async_to_sync(scenario)() == {"type": "synced", "data": {"last_seq": everything}}


def _stream_a_run_step_by_step(people, sessions, relu_run) -> tuple[list[dict], int]:
    """Connect to a fresh run, step it to the end while watching, return every frame."""
    run = relu_run(budget=3, user=people["alice"], drive=False)
    evaluator = RecordedEvaluator(RUN_RECORDING)

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0", sessions["alice"])
        assert (await ws.connect())[0]
        frames = await receive_until(ws, 1)
        frames.append(await ws.receive_json_from())  # synced
        while (stepped := await step(run_id=run.pk, evaluator=evaluator)).status == Run.Status.RUNNING:
            frames += await receive_until(ws, await count_events(stepped))
        frames += await receive_until(ws, await count_events(stepped))
        assert await ws.receive_nothing(timeout=0.3)  # nothing repeated afterwards
        await ws.disconnect()
        return frames, await count_events(run)

    return async_to_sync(scenario)()


def test_events_appended_after_connecting_arrive_by_group_message(live, people, sessions, relu_run):
    frames, total = _stream_a_run_step_by_step(people, sessions, relu_run)

    assert seqs(frames) == list(range(1, total + 1))
    assert frames[-1]["data"][-1]["kind"] == "run_finished"


def test_events_arrive_by_the_database_watch_when_no_message_can(
    live, people, sessions, relu_run, monkeypatch
):
    # The embedded default: the worker's group messages stay in the worker's memory.
    monkeypatch.setattr(broadcast, "event_committed", lambda **kwargs: None)
    live.OPTIML_LIVE_POLL_S = 0.05

    frames, total = _stream_a_run_step_by_step(people, sessions, relu_run)

    assert seqs(frames) == list(range(1, total + 1))


def test_without_message_or_watch_nothing_arrives_so_the_watch_is_what_carries_it(
    live, people, sessions, relu_run, monkeypatch
):
    monkeypatch.setattr(broadcast, "event_committed", lambda **kwargs: None)
    run = relu_run(budget=2, user=people["alice"], drive=False)

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=1", sessions["alice"])
        await ws.connect()
        assert (await ws.receive_json_from())["type"] == "synced"
        await set_status(run_id=run.pk, status=Run.Status.PAUSED)
        silent = await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
        return silent

    assert async_to_sync(scenario)()


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL), as in CI")
def test_events_arrive_through_redis_groups(live, people, sessions, relu_run):
    from optiml_web.env import channel_layers

    layers = channel_layers(os.environ["REDIS_URL"])  # as production configures it
    layers["default"]["CONFIG"]["prefix"] = f"test-{os.getpid()}"
    live.CHANNEL_LAYERS = layers

    frames, total = _stream_a_run_step_by_step(people, sessions, relu_run)

    assert seqs(frames) == list(range(1, total + 1))


def test_a_viewer_that_reconnects_with_its_last_seq_misses_nothing_and_sees_nothing_twice(
    live, people, sessions, relu_run
):
    run = relu_run(budget=3, user=people["alice"], drive=False)
    evaluator = RecordedEvaluator(RUN_RECORDING)

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0", sessions["alice"])
        await ws.connect()
        first = await receive_until(ws, 1)
        await step(run_id=run.pk, evaluator=evaluator)
        first += await receive_until(ws, await count_events(run))
        await ws.disconnect()
        seen = seqs(first)[-1]
        # While away: the run goes on, paused and resumed by someone else.
        await step(run_id=run.pk, evaluator=evaluator)
        await set_status(run_id=run.pk, status=Run.Status.PAUSED)
        await set_status(run_id=run.pk, status=Run.Status.RUNNING)
        ws = socket(f"/ws/runs/{run.pk}/?after={seen}", sessions["alice"])
        await ws.connect()
        second = await receive_until(ws, await count_events(run))
        synced = await ws.receive_json_from()
        await step(run_id=run.pk, evaluator=evaluator)
        second += await receive_until(ws, await count_events(run))
        await ws.disconnect()
        return first, second, synced

    first, second, synced = async_to_sync(scenario)()

    together = seqs(first) + seqs(second)
    assert together == list(range(1, last_seq(run) + 1))
    assert seqs(second)[0] == seqs(first)[-1] + 1
    assert synced["type"] == "synced"


def test_a_burst_of_events_is_coalesced_into_few_frames(live, people, sessions, relu_run):
    coalesce_s = live.OPTIML_LIVE_COALESCE_S = 0.25
    run = relu_run(budget=2, user=people["alice"], drive=False)

    def burst() -> float:
        started = time.monotonic()
        for _ in range(10):  # 20 events, 20 transactions, 20 notifications
            control_services.run_set_status(run_id=run.pk, status=Run.Status.PAUSED)
            control_services.run_set_status(run_id=run.pk, status=Run.Status.RUNNING)
        return time.monotonic() - started

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=1", sessions["alice"])
        await ws.connect()
        await ws.receive_json_from()  # synced
        took = await database_sync_to_async(burst)()
        frames = await receive_until(ws, 21)
        await ws.disconnect()
        return frames, took

    frames, took = async_to_sync(scenario)()

    assert seqs(frames) == list(range(2, 22))
    # At most one frame per coalescing window while the burst lasts, and one after it.
    assert len(frames) <= took / coalesce_s + 2 and len(frames) < 20


def test_a_share_token_connects_signed_out_until_the_link_is_revoked(live, people, relu_run):
    run = relu_run(budget=2, user=people["alice"])
    link, token = sharing_services.share_create(run=run, user=people["alice"])
    everything = last_seq(run)

    async def connect(path):
        ws = socket(path)
        connected, code = await ws.connect()
        frames = await receive_until(ws, everything) if connected else []
        await ws.disconnect()
        return connected, code, frames

    connected, _, frames = async_to_sync(connect)(f"/ws/runs/{run.pk}/?after=0&share={token}")
    assert connected and seqs(frames) == list(range(1, last_seq(run) + 1))

    other = relu_run(budget=1, user=people["alice"])
    assert async_to_sync(connect)(f"/ws/runs/{other.pk}/?share={token}")[:2] == (False, 4404)
    sharing_services.share_revoke(run=run, share_id=link.pk)
    assert async_to_sync(connect)(f"/ws/runs/{run.pk}/?share={token}")[:2] == (False, 4404)


def test_a_viewer_who_came_by_a_link_is_closed_when_it_is_revoked_and_a_member_is_not(
    live, people, sessions, relu_run
):
    run = relu_run(budget=1, user=people["alice"], team=people["team"])
    link, token = sharing_services.share_create(run=run, user=people["alice"])
    revoke = database_sync_to_async(sharing_services.share_revoke)

    async def scenario():
        visitor = socket(f"/ws/runs/{run.pk}/?share={token}")
        member = socket(f"/ws/runs/{run.pk}/?share={token}", sessions["bob"])
        for ws in (visitor, member):
            assert (await ws.connect())[0]
            while (await ws.receive_json_from())["type"] != "synced":
                pass
        await revoke(run=run, share_id=link.pk)
        closed = await visitor.receive_output(timeout=2)
        member_silent = await member.receive_nothing(timeout=0.3)
        await member.disconnect()
        await visitor.wait()
        return closed, member_silent

    closed, member_silent = async_to_sync(scenario)()

    assert closed == {"type": "websocket.close", "code": 4404}
    assert member_silent


def test_strangers_and_visitors_are_refused_and_team_members_let_in(live, people, sessions, relu_run):
    run = relu_run(budget=1, user=people["alice"], team=people["team"])

    async def connect(user, path=None):
        ws = socket(path or f"/ws/runs/{run.pk}/", sessions[user] if user else None)
        connected, code = await ws.connect()
        await ws.disconnect()
        return connected, code

    assert async_to_sync(connect)("carol") == (False, 4404)
    assert async_to_sync(connect)(None) == (False, 4404)
    assert async_to_sync(connect)("carol", "/ws/runs/98765/") == (False, 4404)
    assert async_to_sync(connect)("bob")[0] is True
    assert async_to_sync(connect)("carol", "/ws/runs/99999999999999999999/") == (False, 4404)


@pytest.mark.parametrize("path", ["/ws/nowhere/", "/ws/runs/abc/", "/ws/runs/", "/", "/ws/skills/x/y/z/",
                                  "/ws/runs/007/", "/ws/runs/-7/", "/ws/runs/+7/", "/ws/runs/7.0/",
                                  "/ws/runs/\u0667/", "/ws/skills/vec4-v01/"])
def test_a_socket_to_a_path_no_app_routes_is_refused_like_one_it_may_not_see(live, sessions, path, caplog):
    async def connect():
        ws = socket(path, sessions["alice"])
        connected, code = await ws.connect()
        await ws.disconnect()
        return connected, code

    with caplog.at_level("INFO", logger="optiml_web.sockets"):
        assert async_to_sync(connect)() == (False, 4404)
    assert any("no route" in r.getMessage() for r in caplog.records)


def test_a_run_id_with_a_leading_zero_names_no_run_over_websockets_as_over_http(
    live, api, people, sessions, relu_run, caplog
):
    """One integer rule for every path: /api/runs/007/ is a 404, so /ws/runs/007/ is no
    route, even for a member who may see run 7 (issue 34)."""
    run = relu_run(budget=1, user=people["alice"], team=people["team"])

    async def connect(path):
        ws = socket(path, sessions["bob"])
        connected, code = await ws.connect()
        await ws.disconnect()
        return connected, code

    assert api(people["bob"]).get(f"/api/runs/0{run.pk}/").status_code == 404
    assert async_to_sync(connect)(f"/ws/runs/{run.pk}/")[0] is True
    with caplog.at_level("INFO", logger="optiml_web.sockets"):
        assert async_to_sync(connect)(f"/ws/runs/0{run.pk}/") == (False, 4404)
        assert async_to_sync(connect)(f"/ws/runs/00{run.pk}/") == (False, 4404)
    assert [r.getMessage() for r in caplog.records if r.name == "optiml_web.sockets"] == [
        f"websocket refused: no route for /ws/runs/0{run.pk}/",
        f"websocket refused: no route for /ws/runs/00{run.pk}/"]


def test_every_websocket_route_takes_path_parameters_by_the_apis_converters():
    """A route written with Django's own `<int:...>` or `<str:...>` would read 007 as 7
    (or take anything): every websocket parameter goes through optiml_web.params."""
    from django.urls.converters import get_converters

    from optiml_web import params
    from optiml_web.asgi import websocket_urlpatterns

    ours = (params.IdConverter, params.TokenConverter)
    for route in websocket_urlpatterns:
        converters = getattr(route.pattern, "converters", {})
        assert all(isinstance(c, ours) for c in converters.values()), (str(route.pattern), converters)
    assert isinstance(get_converters()["id"], params.IdConverter)


@pytest.mark.parametrize("after", ["x", "-1", "²", "9" * 30, "1.5", ""])
def test_a_bad_after_closes_with_4400_and_a_reason_naming_it(live, people, sessions, relu_run, after):
    from urllib.parse import quote

    run = relu_run(budget=1, user=people["alice"], team=people["team"])

    async def connect():
        ws = socket(f"/ws/runs/{run.pk}/?after={quote(after)}", sessions["bob"])
        connected, _ = await ws.connect()
        closed = await ws.receive_output(timeout=2)
        await ws.disconnect()
        return connected, closed

    connected, closed = async_to_sync(connect)()

    # Accepted only to be closed: a socket refused before it opens tells the client nothing.
    assert connected is True and closed["type"] == "websocket.close" and closed["code"] == 4400
    assert closed["reason"].startswith("after: a whole number from 0 to 9223372036854775807")
    assert len(closed["reason"].encode()) <= 123


def test_a_socket_from_another_site_is_refused(live, people, relu_run):
    from optiml_web.asgi import application

    run = relu_run(budget=1, user=people["alice"])

    async def scenario():
        ws = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/",
                                   headers=[(b"origin", b"https://evil.example")])
        connected, _ = await ws.connect()
        await ws.disconnect()
        return connected

    assert async_to_sync(scenario)() is False


def test_viewers_in_one_process_share_one_feed_and_its_watch_stops_when_the_last_leaves(
    live, people, sessions, relu_run
):
    live.OPTIML_LIVE_POLL_S = 0.05
    run = relu_run(budget=1, user=people["alice"])

    async def scenario():
        import asyncio

        a, b = (socket(f"/ws/runs/{run.pk}/", sessions["alice"]) for _ in range(2))
        await a.connect()
        await b.connect()
        feeds = search_live._feeds[asyncio.get_running_loop()]
        feed = feeds[run.pk]
        assert feed.viewers == 2
        await a.disconnect()
        assert feed.viewers == 1
        watching = feed._watching
        await b.disconnect()
        await asyncio.sleep(0)
        return run.pk in feeds, watching.cancelled() or watching.done()

    assert async_to_sync(scenario)() == (False, True)


def test_a_viewer_behind_the_shared_tail_reads_the_database_instead(
    live, people, sessions, relu_run, monkeypatch
):
    monkeypatch.setattr(search_live, "TAIL_EVENTS", 3)
    run = relu_run(budget=3, user=people["alice"], drive=False)
    evaluator = RecordedEvaluator(RUN_RECORDING)

    async def scenario():
        watcher = socket(f"/ws/runs/{run.pk}/?after=0", sessions["alice"])
        await watcher.connect()
        frames = await receive_until(watcher, 1)
        while (stepped := await step(run_id=run.pk, evaluator=evaluator)).status == Run.Status.RUNNING:
            frames += await receive_until(watcher, await count_events(stepped))
        frames += await receive_until(watcher, await count_events(stepped))
        # A newcomer from 0, with the feed holding only the last three events.
        late = socket(f"/ws/runs/{run.pk}/?after=0", sessions["alice"])
        await late.connect()
        late_frames = await receive_until(late, await count_events(run))
        await watcher.disconnect()
        await late.disconnect()
        return frames, late_frames, await count_events(run)

    frames, late_frames, total = async_to_sync(scenario)()

    assert seqs(frames) == seqs(late_frames) == list(range(1, total + 1))
