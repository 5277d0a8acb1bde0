"""A run's progress pushed over its socket (issue 35): a viewer that asks for progress
(`&progress=1`, as the run page does) hears the run's evaluations, GPU time, pace and queue
(search.selectors.run_progress) after "synced" and again as the run moves, over the real
Redis channel layer as production configures it; what it hears is what the run API says,
and never another user's run or a GPU worker. Skipped without REDIS_URL, as in
test_live_over_redis."""

from __future__ import annotations

import os

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from optiml_web.env import channel_layers
from profiling.evaluators import RecordedEvaluator
from search import broadcast, selectors, services, sharing_services
from search.models import Run, RunNode
from search.serializers import QueueSerializer
from tests.web.conftest import RUN_RECORDING

pytestmark = [
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL), as in CI"),
    pytest.mark.django_db(transaction=True),
]

WORKER = "gpu-worker-7@secret-host"  # a worker's name: for the operator, never for viewers


@pytest.fixture
def redis_live(settings):
    """The production channel layer, under a prefix of this process's own."""
    layers = channel_layers(os.environ["REDIS_URL"])
    layers["default"]["CONFIG"]["prefix"] = f"test-progress-{os.getpid()}"
    settings.CHANNEL_LAYERS = layers
    settings.OPTIML_LIVE_POLL_S = 0  # news by group message only, as with Redis in production
    settings.OPTIML_LIVE_COALESCE_S = 0.05
    return settings


def session_of(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def socket(path: str, session: str | None = None) -> WebsocketCommunicator:
    from optiml_web.asgi import application

    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if session is not None:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def next_progress(ws: WebsocketCommunicator, timeout: float = 5.0) -> dict:
    """The data of the next progress frame (event frames before it are passed over)."""
    while True:
        frame = await ws.receive_json_from(timeout=timeout)
        if frame["type"] == "progress":
            return frame["data"]


step = database_sync_to_async(services.run_step)
progress_now = database_sync_to_async(lambda run_id: selectors.run_progress(run=Run.objects.get(pk=run_id)))


def test_a_viewer_hears_the_progress_change_as_nodes_are_evaluated(redis_live, people, relu_run):
    run = relu_run(budget=3, user=people["alice"], drive=False)
    evaluator = RecordedEvaluator(RUN_RECORDING)
    session = session_of(people["alice"])

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0&progress=1", session)
        assert (await ws.connect())[0]
        heard = [await next_progress(ws)]  # right after "synced": where the run stands
        while (await step(run_id=run.pk, evaluator=evaluator)).status == Run.Status.RUNNING:
            heard.append(await next_progress(ws))
        heard.append(await next_progress(ws))
        now = await progress_now(run.pk)
        await ws.disconnect()
        return heard, now

    heard, now = async_to_sync(scenario)()

    evaluated = [p["evaluated"] for p in heard]
    assert evaluated[0] == 0 and evaluated[-1] == 3 and evaluated == sorted(evaluated), evaluated
    assert len(set(evaluated)) >= 3  # it moved while the run ran, not only at the end
    assert heard[0]["gpu_seconds"] == 0 and heard[-1]["gpu_seconds"] > 0  # the root's gate, measured
    assert heard[0]["queue"]["evaluated"] == 0 and heard[-1]["queue"]["budget"] == 3
    # The header's vendor comparison: nothing before the root was measured, then its GPU's.
    assert (heard[0]["measured_gpu"], heard[0]["vendor_ms"]) == (None, None)
    assert "H200" in heard[-1]["measured_gpu"] and heard[-1]["vendor_source"] == "recorded on the H200"
    assert heard[-1] == now  # the selector the run API reads too


def test_the_pushed_progress_is_what_the_run_api_says(redis_live, people, relu_run, api):
    run = relu_run(budget=2, user=people["alice"])
    session = session_of(people["alice"])

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0&progress=1", session)
        assert (await ws.connect())[0]
        pushed = await next_progress(ws)
        await ws.disconnect()
        return pushed

    pushed = async_to_sync(scenario)()
    shown = api(people["alice"]).get(f"/api/runs/{run.pk}/").json()

    assert set(pushed) == {"evaluated", "gpu_seconds", "queue", "measured_gpu", "vendor_ms", "vendor_gpu",
                           "vendor_source"}
    assert pushed == {key: shown[key] for key in pushed}


def test_a_worker_taking_an_evaluation_is_pushed_as_a_count_without_its_name(redis_live, people, relu_run):
    """No event is written when a GPU worker takes a node, yet 'being measured' moves; the
    frame says how many, never which worker, and of another user's run only how many of its
    evaluations wait ahead (issue 34)."""
    others = relu_run(budget=3, user=people["carol"], drive=False)
    services.run_dispatch(run_id=others.pk, evaluator=RecordedEvaluator(RUN_RECORDING))  # queued first
    run = relu_run(budget=3, user=people["alice"], team=people["team"], drive=False)
    services.run_dispatch(run_id=run.pk, evaluator=RecordedEvaluator(RUN_RECORDING))
    session = session_of(people["bob"])  # in the run's team: may watch, not control

    def take_root() -> None:
        RunNode.objects.filter(run=run, node_id=0).update(started_at=timezone.now(), worker=WORKER)
        broadcast.progress_after_commit(run_id=run.pk)

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0&progress=1", session)
        assert (await ws.connect())[0]
        before = await next_progress(ws)
        await database_sync_to_async(take_root)()
        after = await next_progress(ws)
        await database_sync_to_async(broadcast.progress_after_commit)(run_id=run.pk)  # nothing moved
        quiet = await ws.receive_nothing(timeout=0.3)  # an unchanged progress is not sent again
        await ws.disconnect()
        return before, after, quiet

    before, after, quiet = async_to_sync(scenario)()

    counts = ("queued", "measuring", "queued_ahead")
    assert [before["queue"][key] for key in counts] == [1, 0, 1]
    assert [after["queue"][key] for key in counts] == [0, 1, 0]
    assert quiet
    # Counts, and nothing else: no worker, no run of anybody else's.
    assert set(after) == {"evaluated", "gpu_seconds", "queue", "measured_gpu", "vendor_ms", "vendor_gpu",
                          "vendor_source"}
    assert set(after["queue"]) == set(QueueSerializer().fields)
    assert all(value is None or isinstance(value, (int, float)) for value in after["queue"].values())
    assert WORKER not in repr(after)


def test_a_viewer_who_does_not_ask_for_progress_gets_none(redis_live, people, relu_run):
    run = relu_run(budget=2, user=people["alice"])
    session = session_of(people["alice"])

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0", session)
        assert (await ws.connect())[0]
        frames = []
        while not frames or frames[-1]["type"] != "synced":
            frames.append(await ws.receive_json_from())
        quiet = await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
        return frames, quiet

    frames, quiet = async_to_sync(scenario)()

    assert {frame["type"] for frame in frames} == {"events", "synced"} and quiet


def test_a_bad_progress_closes_with_4400_and_a_reason_naming_it(redis_live, people, relu_run):
    run = relu_run(budget=1, user=people["alice"], drive=False)
    session = session_of(people["alice"])

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0&progress=maybe", session)
        connected, _ = await ws.connect()
        closed = await ws.receive_output(timeout=2)
        return connected, closed

    connected, closed = async_to_sync(scenario)()

    assert connected is True and closed["type"] == "websocket.close" and closed["code"] == 4400
    assert "progress" in closed.get("reason", "") and "maybe" in closed.get("reason", "")


def test_a_share_link_viewer_hears_progress_too(redis_live, people, relu_run):
    run = relu_run(budget=2, user=people["alice"])
    _link, token = sharing_services.share_create(run=run, user=people["alice"])

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0&progress=1&share={token}")
        assert (await ws.connect())[0]
        pushed = await next_progress(ws)
        await ws.disconnect()
        return pushed

    pushed = async_to_sync(scenario)()

    assert pushed["evaluated"] == 2 and pushed["queue"]["queued_ahead"] == 0


def test_a_stranger_is_refused_before_any_progress(redis_live, people, relu_run):
    run = relu_run(budget=1, user=people["alice"])
    session = session_of(people["carol"])

    async def scenario():
        ws = socket(f"/ws/runs/{run.pk}/?after=0&progress=1", session)
        connected, code = await ws.connect()
        return connected, code

    assert async_to_sync(scenario)() == (False, 4404)
